"""A fleet of `forge worker` processes on PostgreSQL, measured as an operator sees it: how many
runs a minute three workers finish, with no faults and while one worker is SIGKILLed and
started again every few seconds (side by side, in alternating rounds, so a slow moment of
the shared machine falls on both), and how long a killed worker's runs wait before another
worker takes them (from the kill until DBOS has given every run the killed worker held to a
live one, median over the kills).

And, on 2 workers of `--concurrency 4`, how long new runs take with `--parked` runs (1,000)
left waiting for approvals against with none (a waiting run is parked: it holds no slot).

    python benchmarks/fleet.py [--runs 90] [--rounds 2] [--kill-every 4] [--parked 1000]

Targets (issue 48): throughput under repeated kills at least 0.9x throughput without faults;
recovery of a killed worker's runs p50 <= 3 s at the workers' defaults; new runs' throughput
with 1,000 runs waiting at least 0.9x their throughput with none. Needs Debian's
PostgreSQL (the benchmark starts its own server as user postgres), else it says so.
"""

from __future__ import annotations

import argparse
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from postgres import postgres_server, why_no_postgres
from targets import against, at_least
from worker_processes import start_worker, stop_all

from forge.durable.runs import StoredRuns

WORKERS = 3


def _finished(runs: StoredRuns, ids: set[str]) -> int:
    return sum(1 for row in runs.list(limit=len(ids) + 10) if row.run_id in ids and row.workflow_status == "SUCCESS")


def _round(url: str, folder: Path, name: str, count: int, kill_every: float | None) -> tuple[float, list[float]]:
    """Seconds for `count` runs on the fleet, and, when `kill_every` is given, each kill's
    recovery: seconds from the SIGKILL until every run it held had a call stored elsewhere."""
    ledger = folder / f"{name}.ledger"
    workers = [start_worker(url, ledger) for _ in range(WORKERS)]
    recoveries: list[float] = []
    try:
        with StoredRuns(url, create=True) as runs:
            time.sleep(3.0)  # the workers launch (not measured: an operator's fleet is up before its load)
            ids = {runs.submit("filing-paced", "file every item", f"{name}-{n:03}") for n in range(count)}
            started = last_kill = time.monotonic()
            victim = 0
            while _finished(runs, ids) < count:
                if kill_every is not None and time.monotonic() - last_kill >= kill_every:
                    name = f"forge-worker-{socket.gethostname()}-{workers[victim].pid}"  # its DBOS executor
                    workers[victim].send_signal(signal.SIGKILL)
                    workers[victim].wait(timeout=30)
                    killed_at = last_kill = time.monotonic()
                    workers[victim] = start_worker(url, ledger)
                    victim = (victim + 1) % WORKERS
                    held = [status.workflow_id for status in runs.client.list_workflows(
                        status="PENDING", executor_id=name, load_input=False, load_output=False)]
                    if held:
                        recoveries.append(_recovered(runs, held, name, killed_at))
                time.sleep(0.1)
            return time.monotonic() - started, recoveries
    finally:
        stop_all(workers)


def _recovered(runs: StoredRuns, held: list[str], executor: str, killed_at: float) -> float:
    """Seconds from the kill until every run the killed worker (`executor`) held is another
    worker's (DBOS has given it to a live executor) or finished."""
    while time.monotonic() - killed_at < 60:
        statuses = runs.client.list_workflows(workflow_ids=held, load_input=False, load_output=False)
        if all(status.executor_id != executor or status.status != "PENDING" for status in statuses):
            break
        time.sleep(0.05)
    return time.monotonic() - killed_at


def _beside_parked(url: str, folder: Path, name: str, count: int, parked: int) -> float:
    """Seconds for `count` new runs on 2 workers of `--concurrency 4`, with `parked` runs
    left waiting for approvals first (not measured: they are parked before the clock starts)."""
    ledger = folder / f"{name}.ledger"
    workers = [start_worker(url, ledger, 4) for _ in range(2)]
    try:
        with StoredRuns(url, create=True) as runs:
            time.sleep(3.0)
            for n in range(parked):
                runs.submit("filing-approved", "file every item", f"{name}-waits-{n:04}")
            while len(runs.database.chained("waiting")) < parked:
                time.sleep(0.2)
            ids = {runs.submit("filing-paced", "file every item", f"{name}-{n:03}") for n in range(count)}
            started = time.monotonic()
            while _finished(runs, ids) < count:
                time.sleep(0.1)
            return time.monotonic() - started
    finally:
        stop_all(workers)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=90, help="runs per round (default 90)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each kind, alternating (default 2)")
    parser.add_argument("--kill-every", type=float, default=4.0, help="seconds between kills (default 4)")
    parser.add_argument("--parked", type=int, default=1000, help="runs left waiting beside new ones (default 1000)")
    args = parser.parse_args(argv)
    why = why_no_postgres()
    if why is not None:
        print(f"fleet benchmark skipped: {why}")
        return 0
    calm: list[float] = []
    faulty: list[float] = []
    recoveries: list[float] = []
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as folder, postgres_server() as url:
        for number in range(args.rounds):
            calm.append(_round(url, Path(folder), f"calm{number}", args.runs, None)[0])
            seconds, recovered = _round(url, Path(folder), f"kills{number}", args.runs, args.kill_every)
            faulty.append(seconds)
            recoveries += recovered
        alone = _beside_parked(url, Path(folder), "alone", args.runs, 0)
        beside = _beside_parked(url, Path(folder), "beside", args.runs, args.parked)
    calm_rate = args.runs / statistics.median(calm) * 60
    faulty_rate = args.runs / statistics.median(faulty) * 60
    ratio = faulty_rate / calm_rate
    print(f"fleet: {WORKERS} workers, {args.runs} runs a round, {args.rounds} rounds of each, medians")
    print(f"throughput under a SIGKILL every {args.kill_every:g} s: {faulty_rate:.0f} runs/min against "
          f"{calm_rate:.0f} without faults, {ratio:.2f}x {at_least(ratio, 0.9)}")
    ratio = alone / beside
    print(f"new runs beside {args.parked:,} runs waiting for approvals (2 workers x --concurrency 4): "
          f"{args.runs / beside * 60:.0f} runs/min against {args.runs / alone * 60:.0f} with none waiting, "
          f"{ratio:.2f}x {at_least(ratio, 0.9)}")
    if recoveries:
        p50 = statistics.median(recoveries)
        print(f"recovery of a killed worker's runs: p50 {p50:.1f} s over {len(recoveries)} kills "
              f"(max {max(recoveries):.1f} s) {against(p50, 3.0, ' s')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
