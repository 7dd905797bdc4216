"""A fleet that loses nothing: three `forge worker` processes on a real PostgreSQL server take
hundreds of queued runs while the operations every deployment does happen under load — a
worker stopped politely and started again, a worker SIGKILLed and started again, the
database restarted for half a second, runs waiting for a person's approval while new runs
flow, an approval sent twice.

Judged from what cannot lie: every run's end as stored, and the append-only log of handler
invocations (each call as it happened, duplicates kept). 0 lost (every run ends in success),
0 stranded (none left queued, running or in error), 0 doubled beyond the documented case (a
call in flight at the SIGKILL, made again with the same key), every stored run replays
equal calling nothing. 60 runs in the suite; `--full-trials` (CI) runs 240."""

import signal
import subprocess
import time
from collections import Counter

import pytest
from durable_agent import Ledger, calls_made, make_loop
from postgres import postgres_server, restart_postgres, why_no_postgres
from worker_processes import start_worker, stop_all

from forge.durable import Answer, AnswerRefused
from forge.durable.runs import StoredRuns

REASON = why_no_postgres()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

WORKERS, CONCURRENCY, APPROVALS = 3, 4, 4


@pytest.fixture
def runs_count(request):
    return 240 if request.config.getoption("full_trials") else 60


def finished(runs: StoredRuns, ids: list[str]) -> int:
    wanted = set(ids)
    return sum(1 for row in runs.list(limit=len(ids) + APPROVALS + 10)
               if row.run_id in wanted and row.workflow_status == "SUCCESS")


def approve_waiting(runs: StoredRuns, ids: list[str], twice: set[str], refused: list[str]) -> None:
    """Approve every approval run waiting now; the first answer of all twice."""
    for run_id in ids:
        waiting = runs.get(run_id)
        if waiting.status != "waiting" or waiting.waiting is None:
            continue
        answer = Answer.approve(waiting.waiting.fingerprint)
        try:
            runs.resume(run_id, answer)
        except AnswerRefused:
            continue  # answered at the last poll; the run has not taken it yet
        if not twice:  # the first answer of all is sent again at once: it must be refused
            twice.add(run_id)
            try:
                runs.resume(run_id, answer)
            except AnswerRefused as refusal:
                refused.append(str(refusal))


def test_a_fleet_under_restarts_kills_and_a_database_restart_loses_and_doubles_nothing(tmp_path, runs_count):
    ledger = tmp_path / "ledger"
    events: list[str] = []
    with postgres_server() as url:
        workers = [start_worker(url, ledger, CONCURRENCY) for _ in range(WORKERS)]
        killed: list[subprocess.Popen[str]] = []
        twice: set[str] = set()
        refused: list[str] = []
        try:
            with StoredRuns(url, create=True) as runs:
                started = time.monotonic()
                waiting_ids = [runs.submit("filing-approved", "file every item", f"approved-{n}")
                               for n in range(APPROVALS)]
                ids = [runs.submit("filing-paced", "file every item", f"run-{n:03}") for n in range(runs_count)]
                plan = [(runs_count // 10, "stop worker 0", lambda: polite(0)),
                        (runs_count // 4, "kill worker 1", lambda: kill(1)),
                        (2 * runs_count // 5, "restart the database", lambda: restart_postgres(url, down_for=0.5)),
                        (runs_count // 2, "stop worker 2", lambda: polite(2))]

                def polite(index: int) -> None:
                    workers[index].send_signal(signal.SIGTERM)
                    assert workers[index].wait(timeout=90) == 0, workers[index].stderr.read()[-3000:]  # type: ignore[union-attr]
                    workers[index] = start_worker(url, ledger, CONCURRENCY)

                def kill(index: int) -> None:
                    workers[index].send_signal(signal.SIGKILL)
                    workers[index].wait(timeout=30)
                    killed.append(workers[index])
                    workers[index] = start_worker(url, ledger, CONCURRENCY)

                for _ in range(3000):  # a bound on the polls, not a claim about speed: a stuck fleet fails
                    done = finished(runs, ids)
                    while plan and done >= plan[0][0]:
                        _, what, act = plan.pop(0)
                        events.append(f"{what} after {done} runs")
                        act()
                    approve_waiting(runs, waiting_ids, twice, refused)
                    if not plan and done == runs_count:
                        break
                    time.sleep(0.2)
                else:
                    pytest.fail(f"the fleet did not finish: {finished(runs, ids)} of {runs_count}; {events}")
                for _ in range(600):
                    approve_waiting(runs, waiting_ids, twice, refused)
                    if all(runs.get(run_id).status == "finished" for run_id in waiting_ids):
                        break
                    time.sleep(0.2)
                results = {run_id: runs.wait(run_id, timeout=120) for run_id in [*ids, *waiting_ids]}
                elapsed = time.monotonic() - started
                journals = {run_id: runs.under_way(run_id) for run_id in results}
                stranded = [row.run_id for row in runs.list(limit=runs_count + APPROVALS + 10)
                            if row.workflow_status not in ("SUCCESS",)]
        finally:
            stop_all(workers)

    ends = Counter((result.status, result.reason) for result in results.values())
    made = calls_made(ledger)
    again = {key: count for key, count in made.items() if count > 1}
    print(f"\nfleet test: {runs_count} runs and {APPROVALS} approval runs on {WORKERS} workers in {elapsed:.1f} s; "
          f"{'; '.join(events)}; ends {dict(ends)}; writes made again: {len(again)}")
    assert ends == {("finished", "verified_success"): runs_count + APPROVALS}  # 0 lost
    assert stranded == []  # 0 stranded: nothing queued, running or in error
    assert len(refused) == 1 and ("answered already" in refused[0] or "not waiting" in refused[0]), refused
    written = [line.split("\t") for line in ledger.read_text().splitlines()]
    assert len(written) == 3 * (runs_count + APPROVALS) and max(Counter(row[0] for row in written).values()) == 1
    assert len(made) == 3 * (runs_count + APPROVALS)  # every write of every run was called
    assert max(made.values(), default=1) <= 2 and len(again) <= CONCURRENCY, again  # only calls in flight at the kill
    assert killed and killed[0].returncode == -9
    replaying = make_loop(Ledger(tmp_path / "replay-ledger"), pause=0.1)
    approving = make_loop(Ledger(tmp_path / "replay-ledger"), definition="approval")
    for run_id, result in results.items():
        loop = approving if run_id.startswith("approved-") else replaying
        replayed = loop.replay(journals[run_id], result.goal or "")
        assert replayed.trace == result.trace, f"{run_id} replays otherwise than it ran"
    assert not (tmp_path / "replay-ledger.calls").exists()  # the replays called nothing
