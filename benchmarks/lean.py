"""How lean a run is: trace memory against observations, per-step time early and late in a
long run, import time against transitions (and each extra's against the library it wraps),
and `forge diagram` against bare `dot`, each printed as a ratio of two things measured side by side in this one run.

    python benchmarks/lean.py [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from loop_overhead import NEVER_REPEAT, TOOLS, _handler, make_policy
from targets import against

from forge import AgentLoop, Limits, Tool


def _loop(steps: int) -> AgentLoop:
    tools = [Tool(f"tool{i}", {f"cap{i}", "common"}, _handler, required={"path"}) for i in range(TOOLS)]
    return AgentLoop(tools, make_policy(), verify=lambda obs: False, max_steps=steps,
                     limits=Limits(repeat_limit=NEVER_REPEAT))


def trace_bytes(steps: int) -> tuple[float, float]:
    """Bytes per step held by the trace and by the observations of one finished run: every
    object each one reaches, counted once (names and small numbers shared by all are not)."""
    result = _loop(steps).run("benchmark")
    seen: set[int] = set()

    def size(obj: object) -> int:
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        total = sys.getsizeof(obj)
        if isinstance(obj, dict):
            total += sum(size(k) + size(v) for k, v in obj.items())
        elif isinstance(obj, (tuple, list)):
            total += sum(size(item) for item in obj)
        elif hasattr(obj, "__slots__"):
            total += sum(size(getattr(obj, name)) for name in obj.__slots__ if hasattr(obj, name))
        return total

    # names of states, triggers, verdicts and tools are shared by everything: not the trace's
    for shared in ("select", "execute", "observe", "verify", "single_agent", "ok", "continue", "choose", "call",
                   "record", "replan", "stop", "selected", "recorded", *(f"tool{i}" for i in range(TOOLS))):
        seen.add(id(shared))
    observations = size(result.state.observations)
    trace = size(result.trace)
    return trace / steps, observations / steps


def step_time_at(total: int, windows: tuple[int, ...], width: int = 500) -> dict[int, float]:
    """Seconds per step around each step number in `windows`, in one run of `total` steps, gc on."""
    loop = _loop(total)
    run = loop.start("benchmark")
    stamps: dict[int, float] = {}
    wanted = {w - width // 2 for w in windows} | {w + width // 2 for w in windows}
    while not loop.engine.is_terminal(run):
        step = run.loop_state.step_count
        if step in wanted and step not in stamps:
            stamps[step] = time.perf_counter()
        loop.engine.fire(run)
    return {w: (stamps[w + width // 2] - stamps[w - width // 2]) / width for w in windows}


def compile_forge() -> None:
    """Write forge's bytecode, as installing a wheel does (pip compiles what it installs):
    this machine sets PYTHONDONTWRITEBYTECODE, so a source checkout would otherwise compile
    every module on every import while transitions, installed, reads its bytecode."""
    import compileall

    import forge

    compileall.compile_dir(str(Path(forge.__file__).parent), quiet=1)


def import_time(statement: str, repeats: int) -> float:
    """Best seconds to run `statement` in a fresh interpreter, less the interpreter's own start."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
            for _ in range(repeats)]
    return min(runs)


def extra_import_ratio(ours: str, theirs: str, repeats: int) -> str | None:
    """`import forge.durable` against `import dbos` alone (and the like): what an extra costs
    beyond the library it wraps (issue 54: at most 3x). None when that library is not installed."""
    try:
        theirs_time = import_time(f"import {theirs}", repeats)
    except subprocess.CalledProcessError:
        print(f"import {ours} against import {theirs}: skipped ({theirs} is not installed)")
        return None
    ours_time = import_time(f"import {ours}", repeats)
    return (f"import {ours} {ours_time * 1e3:6.1f} ms against import {theirs} {theirs_time * 1e3:6.1f} ms: "
            f"ratio {ours_time / theirs_time:5.2f}x {against(ours_time / theirs_time, 3)}")


def command_time(command: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    steps, late, repeats = (2_000, 20_000, 3) if args.quick else (10_000, 100_000, 7)

    per_trace, per_observation = trace_bytes(steps)
    print(f"trace {per_trace:7.0f} B/step against observations {per_observation:5.0f} B/step: "
          f"ratio {per_trace / per_observation:5.2f}x {against(per_trace / per_observation, 2)}")

    times = [step_time_at(late + 1000, (1000, late)) for _ in range(3 if args.quick else 5)]
    early = statistics.median(t[1000] for t in times)
    later = statistics.median(t[late] for t in times)
    print(f"per step at step 1,000 {early * 1e6:6.2f} us, at step {late:,} {later * 1e6:6.2f} us (gc on): "
          f"ratio {later / early:5.2f}x {against(later / early, 1.2)}")

    compile_forge()
    transitions = import_time("import transitions", repeats)
    forge_import = import_time("import forge", repeats)
    agent_loop = import_time("from forge import AgentLoop", repeats)
    loop_import = import_time("from forge import AgentLoop, Intent, Tool", repeats)
    first_loop = import_time("from forge import AgentLoop, Intent, Tool; "
                             "AgentLoop([Tool('t', {'t'}, lambda: 1)], lambda g, s: Intent.call('t'), bool)", repeats)
    machine = import_time("from transitions import Machine; Machine(states=['a', 'b'], initial='a')", repeats)
    print(f"import transitions {transitions * 1e3:6.1f} ms  import forge {forge_import * 1e3:6.1f} ms: ratio "
          f"{forge_import / transitions:5.2f}x {against(forge_import / transitions, 2)}")
    print(f"from forge import AgentLoop {agent_loop * 1e3:6.1f} ms against import transitions: "
          f"ratio {agent_loop / transitions:5.2f}x {against(agent_loop / transitions, 3)}")
    print(f"from forge import AgentLoop, Intent, Tool {loop_import * 1e3:6.1f} ms against import transitions: "
          f"ratio {loop_import / transitions:5.2f}x {against(loop_import / transitions, 2)}")
    print(f"the first AgentLoop built (its engine imported then) {first_loop * 1e3:6.1f} ms against the first "
          f"transitions Machine {machine * 1e3:6.1f} ms: ratio {first_loop / machine:5.2f}x "
          f"{against(first_loop / machine, 8)}")
    for ours, theirs in (("forge.durable", "dbos"), ("forge.models.chat", "openai")):
        extra = extra_import_ratio(ours, theirs, repeats)
        if extra is not None:
            print(extra)

    dot = shutil.which("dot")
    forge_cli = Path(sys.executable).with_name("forge")
    if dot is None or not forge_cli.exists():
        print("forge diagram against dot: skipped (needs Graphviz's dot and the forge command)")
        return
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "loop.dot"
        subprocess.run([str(forge_cli), "diagram", "-o", str(source)], check=True, capture_output=True)
        bare = command_time([dot, "-Tsvg", str(source), "-o", str(Path(folder) / "bare.svg")], repeats)
        ours = command_time([str(forge_cli), "diagram", "-o", str(Path(folder) / "x.svg")], repeats)
    print(f"forge diagram -o x.svg {ours * 1e3:6.1f} ms against dot -Tsvg {bare * 1e3:6.1f} ms: "
          f"ratio {ours / bare:5.2f}x {against(ours / bare, 3)}")


if __name__ == "__main__":
    main()
