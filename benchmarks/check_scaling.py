"""How `forge check` scales: time and peak memory of each check, in a process of its own,
against the same definitions at --max-steps 8.

    python benchmarks/check_scaling.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import resource, sys, time
from forge.check import check_definition
started = time.perf_counter()
reports = [check_definition(path, int(sys.argv[1]), int(sys.argv[2])) for path in sys.argv[3:]]
assert all(r.ok for r in reports), [f for r in reports for f in r.findings]
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def generated(states: int, folder: Path) -> Path:
    """The shipped loop with `states - 10` pass-through states between observe and verify."""
    source = (ROOT / "machines" / "single_agent.toml").read_text()
    head, rest = source.split("[states.verify]", 1)
    extra = states - 10
    text = head + "".join(f'[states.pass{i}]\n\n' for i in range(extra)) + "[states.verify]" + rest
    text = text.replace('source = "observe"\ntrigger = "record"\ndest = "verify"',
                        'source = "observe"\ntrigger = "record"\ndest = "pass0"')
    text += "".join(f'\n[[transitions]]\nsource = "pass{i}"\ntrigger = "on"\n'
                    f'dest = "{f"pass{i + 1}" if i < extra - 1 else "verify"}"\n' for i in range(extra))
    path = folder / f"generated_{states}.toml"
    path.write_text(text)
    return path


def measure(max_steps: int, repeat_limit: int, paths: list[str]) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(max_steps), str(repeat_limit), *paths],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1]) / 1024


def main() -> None:
    shipped = [str(p) for p in sorted((ROOT / "machines").glob("*.toml"))]
    with tempfile.TemporaryDirectory() as folder:
        big = [str(generated(1000, Path(folder)))]
        for label, paths, limits in (("shipped definitions", shipped, (200, 10)),
                                     ("shipped definitions", shipped, (3000, 3)),
                                     ("a 1,000-state definition", big, (8, 3)),
                                     ("a 1,000-state definition", big, (50, 10))):
            base_time, base_memory = measure(8, 3, paths)
            seconds, memory = measure(*limits, paths)
            print(f"{label}, --max-steps {limits[0]} --repeat-limit {limits[1]}: {seconds:6.2f} s, {memory:6.0f} MiB "
                  f"peak; at --max-steps 8: {base_time:5.2f} s, {base_memory:4.0f} MiB "
                  f"(time {seconds / base_time:6.1f}x, memory {memory / base_memory:4.1f}x)")


if __name__ == "__main__":
    main()
