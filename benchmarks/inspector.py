"""The run inspector's page for a 10,000-transition run against one for a 40-transition run,
side by side in one headless Chromium: file size, time until the page is ready, and time
per move along the timeline (it should not grow with the run: only visible rows are drawn).

    python benchmarks/inspector.py        (needs chromium, chromedriver and selenium)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from browser import load, open_browser, why_no_browser
from builders import intent, scripted_loop, tool
from targets import against

from forge.inspect import write


def page_of(steps: int, folder: Path) -> Path:
    loop = scripted_loop([tool(f"t{i}", required={"n"}) for i in range(3)],
                         [intent(f"t{i % 3}", n=i) for i in range(steps)], max_steps=steps, repeat_limit=steps)
    return write(loop.run("benchmark"), folder / f"run-{steps}.html")


def measure(driver: object, page: Path, repeats: int = 5) -> tuple[float, float]:
    """Best seconds until ready, and median seconds per move (100 moves through the run)."""
    loads, moves = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        load(driver, page)
        loads.append(time.perf_counter() - started)
        per_move = driver.execute_script(  # type: ignore[attr-defined]
            "var r = document.querySelector('.forge-inspector'), s = r.querySelector('.fi-scrubber');"
            "var n = Number(s.max), t = performance.now();"
            "for (var i = 0; i < 100; i++) { s.value = String(Math.floor(i * n / 100));"
            "  s.dispatchEvent(new Event('input')); }"
            "return (performance.now() - t) / 100 / 1000;")
        moves.append(per_move)
    return min(loads), statistics.median(moves)


def main() -> int:
    reason = why_no_browser()
    if reason is not None:
        print(f"inspector benchmark skipped: {reason}")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        small, big = page_of(10, Path(folder)), page_of(2500, Path(folder))
        driver = open_browser()
        try:
            small_load, small_move = measure(driver, small)
            big_load, big_move = measure(driver, big)
        finally:
            driver.quit()
        print(f"page size: 10,000 transitions {big.stat().st_size / 1e6:5.2f} MB "
              f"{against(big.stat().st_size / 1e6, 5, ' MB')}, "
              f"40 transitions {small.stat().st_size / 1e3:5.1f} kB")
        print(f"ready in: 10,000 transitions {big_load * 1e3:6.0f} ms against 40 transitions {small_load * 1e3:6.0f} ms: "
              f"ratio {big_load / small_load:5.2f}x {against(big_load / small_load, 3)}")
        print(f"per move: 10,000 transitions {big_move * 1e3:6.2f} ms against 40 transitions {small_move * 1e3:6.2f} ms: "
              f"ratio {big_move / small_move:5.2f}x {against(big_move / small_move, 2)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
