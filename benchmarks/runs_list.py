"""`forge runs list --status` at scale: a runs database of 100,000 finished runs and a few
queued, running and waiting ones (live in a program, and parked by a worker), listed by
status from the command line, as an operator would.

    python benchmarks/runs_list.py [--runs 100000]

Target (issue 48, item 5): `forge runs list --status queued|running|waiting` answers within
1 s on 100,000 runs (the whole command: start, read, print). The finished runs are copies of
one real run made here (rows cloned in SQL, `tests/cloned_runs.py`: making 100,000 runs one by one would take the
benchmark half an hour, and the listing reads the same rows either way).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cloned_runs import clone_runs
from targets import against
from worker_processes import start_worker, stop_all

from forge import AgentLoop, Finish, Intent, Tool
from forge.durable import shutdown
from forge.durable.runs import StoredRuns

QUEUED, LIVE_WAITING, PARKED = 20, 5, 5


def _listed(db: Path, status: str) -> tuple[float, int]:
    """Seconds `forge runs list --status STATUS` takes, and how many runs it lists."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "forge", "runs", "list", "--status", status, "--db", str(db),
                           "--limit", "1000"], capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return seconds, sum(1 for line in done.stdout.splitlines()
                        if f" {status} " in f" {line} " and not line.startswith(f"no {status} runs"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000, help="finished runs (default 100000)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="runs-list-bench-") as folder:
        db = Path(folder) / "runs.sqlite"
        finishing = AgentLoop([Tool("note", {"note"}, lambda: "noted")],
                              lambda goal, state: Intent.call("note") if not state.observations else Finish("ok"),
                              lambda o: o.tool_name == "finish")
        asking = AgentLoop([Tool("send", {"send"}, lambda: "sent", side_effect=True)],
                           lambda goal, state: Intent.call("send") if not state.observations else Finish("ok"),
                           lambda o: o.tool_name == "finish", definition="approval", approver=lambda request: None)
        with finishing.durable("bench", db=db) as done, asking.durable("bench-asking", db=db) as waits:
            done.run("a finished run", run_id="template")
            for n in range(LIVE_WAITING):
                waits.start("waits here", run_id=f"live-waiting-{n}")
            for n in range(LIVE_WAITING):
                waits.wait(f"live-waiting-{n}", timeout=60)
            ledger = Path(folder) / "ledger"
            workers = [start_worker(str(db), ledger, 4)]
            try:
                with StoredRuns(db) as runs:
                    for n in range(PARKED):
                        runs.submit("filing-approved", "file every item", f"parked-{n}")
                    while len(runs.database.chained("waiting")) < PARKED:
                        time.sleep(0.1)
            finally:
                stop_all(workers)
            with StoredRuns(db) as runs:
                for n in range(QUEUED):
                    runs.submit("bench", "queued with no worker", f"queued-{n}")
            clone_runs(db, "template", args.runs)
            shutdown()
        print(f"runs list --status, {args.runs:,} finished runs beside {QUEUED} queued, {LIVE_WAITING} waiting in a "
              f"program and {PARKED} parked by a worker (the whole command, median of 3):")
        for status, expected in (("queued", QUEUED), ("waiting", LIVE_WAITING + PARKED), ("running", 0)):
            timings = [_listed(db, status) for _ in range(3)]
            seconds = statistics.median(t for t, _ in timings)
            listed = timings[-1][1]
            mark = "" if listed == expected else f" (listed {listed}, expected {expected})"
            print(f"  {status:8} {listed:3} runs in {seconds:.2f} s{mark} {against(seconds, 1.0, ' s')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
