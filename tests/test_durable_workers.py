"""Many workers on a real PostgreSQL server: 4 `forge worker` processes, 200 queued runs,
one worker SIGKILLed halfway. Every run ends as it should, and each side effect's handler
was called once, counted as it was called (duplicates kept): only a call the killed worker
had in flight may have been made again (at most its concurrency of them, with the same
key). Skips, saying why, without PostgreSQL."""

import signal
import time
from collections import Counter

import pytest
from durable_agent import calls_made
from postgres import postgres_server, why_no_postgres
from worker_processes import start_worker, stop_all

from forge.durable.runs import StoredRuns

REASON = why_no_postgres()
if REASON is not None:
    print(f"\nPostgreSQL worker test skipped: {REASON}")
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

RUNS, WORKERS = 200, 4


def test_two_hundred_runs_on_four_workers_survive_a_worker_killed_halfway(tmp_path):
    ledger = tmp_path / "ledger"
    with postgres_server() as url:
        workers = [start_worker(url, ledger) for _ in range(WORKERS)]
        try:
            with StoredRuns(url, create=True) as runs:
                started = time.monotonic()
                ids = [runs.submit("filing", "file every item", f"run-{n:03}") for n in range(RUNS)]
                victim = workers[1]
                for _ in range(3000):  # a bound on the polls, not a claim about speed: a stuck suite ends
                    finished = sum(1 for row in runs.list(limit=RUNS) if row.workflow_status == "SUCCESS")
                    if finished >= RUNS // 2:
                        victim.send_signal(signal.SIGKILL)
                        break
                    time.sleep(0.2)
                else:
                    pytest.fail(f"only {finished} runs finished before the poll bound")
                killed_at = finished
                results = [runs.wait(run_id, timeout=300) for run_id in ids]
                elapsed = time.monotonic() - started
        finally:
            stop_all(workers)
    reasons = Counter(result.reason for result in results)
    lines = [line.split("\t") for line in ledger.read_text().splitlines()]
    per_key = Counter(line[0] for line in lines)
    made = calls_made(ledger)
    print(f"\nworker test: {RUNS} runs on {WORKERS} workers, one SIGKILLed after {killed_at} had finished; "
          f"all done in {elapsed:.1f} s; ends {dict(reasons)}; ledger {len(lines)} lines, "
          f"{sum(1 for count in per_key.values() if count > 1)} keys written more than once")
    assert victim.returncode == -9, victim.stderr.read()[-3000:]
    assert reasons == {"verified_success": RUNS}
    assert len(lines) == RUNS * 3 and max(per_key.values()) == 1
    assert {line[0].split("/")[0] for line in lines} == set(ids)
    assert len(made) == RUNS * 3  # every write of every run was called
    again = {key: count for key, count in made.items() if count > 1}
    assert max(made.values()) <= 2 and len(again) <= 4, again  # only the killed worker's calls in flight, once more
