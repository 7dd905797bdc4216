"""A `forge worker` stopped politely (SIGTERM, Ctrl-C) strands none of its runs: it lets a
run in a call finish it, and hands back every run it held, so another worker takes it on.
Real worker processes on a SQLite runs database."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forge.durable import Answer
from forge.durable.runs import StoredRuns

LOOPS = str(Path(__file__).with_name("durable_workers.py"))
pytestmark = pytest.mark.slow


def start_worker(db: str, ledger: Path, loops: str = LOOPS, *more: str) -> subprocess.Popen[str]:
    env = dict(os.environ, FORGE_TEST_LEDGER=str(ledger), FORGE_TEST_DB=db)
    worker = subprocess.Popen([sys.executable, "-m", "forge", "worker", "--db", db, "--loops", loops, *more],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = worker.stdout.readline()  # type: ignore[union-attr]
    assert "serving loops" in started, started + worker.stderr.read()  # type: ignore[union-attr]
    return worker


def stop(worker: subprocess.Popen[str], signum: int) -> str:
    worker.send_signal(signum)
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err[-3000:]
    return out


def all_ended(runs: StoredRuns, ids: list[str], worker: subprocess.Popen[str]) -> list:
    """How each of the runs `ids` ended, waited for while `worker` takes them; then the
    worker stopped politely."""
    try:
        return [runs.wait(run_id, timeout=120) for run_id in ids]
    finally:
        stop(worker, signal.SIGTERM)


def said_line(worker: subprocess.Popen[str], words: str) -> str:
    """The first line of the worker's standard error holding `words`, read as it comes."""
    for line in worker.stderr:  # type: ignore[union-attr]
        if words in line:
            return line
    raise AssertionError(f"the worker ended without saying {words!r}")


def last_beat(runs: StoredRuns, said: str) -> float | None:
    """The last beat the database holds of the worker whose stop `said` is."""
    import sqlalchemy as sa

    me = said.strip().splitlines()[-1].split(":")[0].removeprefix("forge worker ")
    workers = runs.database.workers
    with runs.database.engine.connect() as connection:
        return connection.execute(sa.select(workers.c.beat_at).where(workers.c.executor_id == me)).scalar()


def eventually(check, seconds: float = 60.0):
    for _ in range(int(seconds / 0.05)):
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("not reached in time")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_run_waiting_for_approval_goes_on_in_the_next_worker_after_a_polite_stop(tmp_path, signum):
    """A waiting run holds no worker (issue 48 item 3): the stopping worker has nothing to hand
    back, and the answer starts the run again in whichever worker is live."""
    db, ledger = str(tmp_path / "runs.sqlite"), tmp_path / "ledger"
    with StoredRuns(db, create=True) as runs:
        runs.submit("filing-approved", "file every item", "waits")
        first = start_worker(db, ledger)
        try:
            asked = runs.wait("waits", timeout=60)
            assert asked.status == "waiting"
            eventually(lambda: str(runs.client.list_workflows(workflow_ids=["waits"], load_input=False)[0].status)
                       == "SUCCESS")  # parked: its workflow has ended (just after it said it waits)
        finally:
            said = stop(first, signum)
        assert "stopped; handed back 0 runs to the other workers" in said
        assert last_beat(runs, said) == 0.0  # said in the database: every worker finds it silent at once
        runs.resume("waits", Answer.approve(asked.waiting.fingerprint))
        second = start_worker(db, ledger)
        try:
            again = runs.wait("waits", timeout=60, answers=1)
        finally:
            stop(second, signal.SIGTERM)
    assert again.status == "waiting" and again.waiting.fingerprint != asked.waiting.fingerprint  # the next write's
    calls = [line.split("\t")[0] for line in Path(f"{ledger}.calls").read_text().splitlines()]
    assert calls.count("write_entry") == 1  # the approved write ran once, in the second worker


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_run_stopped_mid_tool_finishes_its_call_and_the_next_worker_goes_on_without_calling_it_again(tmp_path, signum):
    db, ledger = str(tmp_path / "runs.sqlite"), tmp_path / "ledger"
    held = Path(f"{ledger}.held")
    with StoredRuns(db, create=True) as runs:
        runs.submit("counting", "hold on", "mid-tool")
        first = start_worker(db, ledger)
        try:
            eventually(lambda: held.exists() and held.read_text().splitlines() == ["1", "2"])  # in its second call
            first.send_signal(signum)
            said = said_line(first, "stopping: it takes no more runs")  # the worker is stopping, the call under way
            assert first.poll() is None, "the worker waits for the call it is in"
            assert said.split()[2] == "worker"  # one line, with the time
            Path(f"{ledger}.release").touch()
        finally:
            said = stop(first, signum)
        assert "stopped; handed back 1 run to the other workers: mid-tool" in said
        assert held.read_text().splitlines() == ["1", "2"]  # stopped before its next call
        second = start_worker(db, ledger)
        try:
            done = runs.wait("mid-tool", timeout=60)
        finally:
            stop(second, signal.SIGTERM)
    assert (done.status, done.reason) == ("finished", "verified_success")
    assert held.read_text().splitlines() == ["1", "2", "3"]  # each call made once: the held one not again


def test_a_worker_with_nothing_under_way_stops_saying_it_handed_back_nothing(tmp_path):
    db = str(tmp_path / "runs.sqlite")
    StoredRuns(db, create=True).close()
    said = stop(start_worker(db, tmp_path / "ledger"), signal.SIGTERM)
    assert "stopped; handed back 0 runs" in said


SLOW_START = str(Path(__file__).with_name("durable_slow_start.py"))


def test_runs_queued_while_a_worker_launches_wait_for_it_and_none_is_lost(tmp_path):
    """DBOS hands a starting worker queued runs as soon as it launches, before forge's side
    of the worker is open (two seconds later, in this worker): each such run waits for it.
    Before, all of them ended in `error` ("durable runs are not launched in this process")."""
    db, ledger = str(tmp_path / "runs.sqlite"), tmp_path / "ledger"
    stop(start_worker(db, ledger), signal.SIGTERM)  # the queue exists: the next worker dequeues at once
    with StoredRuns(db) as runs:
        ids = [runs.submit("filing", "file every item", f"queued-{n}") for n in range(6)]
        ended = all_ended(runs, ids, start_worker(db, ledger, SLOW_START))
    assert [(result.status, result.reason) for result in ended] == [("finished", "verified_success")] * 6


def test_a_worker_stopped_while_runs_are_queued_loses_none_of_them(tmp_path):
    """Stopped while it still has queued runs to take, a worker takes no more once it begins
    to stop, and what it holds is handed back: the next worker runs every one to its end."""
    db, ledger = str(tmp_path / "runs.sqlite"), tmp_path / "ledger"
    stop(start_worker(db, ledger), signal.SIGTERM)
    with StoredRuns(db) as runs:
        ids = [runs.submit("filing", "file every item", f"stopping-{n}") for n in range(10)]
        first = start_worker(db, ledger, LOOPS, "--concurrency", "2")
        eventually(lambda: any(runs.get(run_id).status == "finished" for run_id in ids))
        stop(first, signal.SIGTERM)
        ended = all_ended(runs, ids, start_worker(db, ledger))
    assert [(result.status, result.reason) for result in ended] == [("finished", "verified_success")] * 10


def test_a_worker_rides_out_a_database_restart_and_its_run_goes_on(tmp_path):
    """PostgreSQL down for three seconds (several of the worker's beats) while a run's tool
    call returns: the worker keeps running (its beat rides the outage out) and the run
    stores the call's outcome once the database is back and ends in success, not in `error`
    or the agent's `fatal_error`."""
    from postgres import postgres_server, restart_postgres, why_no_postgres

    why = why_no_postgres()
    if why is not None:
        pytest.skip(why)
    ledger = tmp_path / "ledger"
    with postgres_server() as url:
        worker = start_worker(url, ledger)
        try:
            with StoredRuns(url) as runs:
                runs.submit("holding", "hold twice", "held-through-restart")
                eventually(lambda: len(runs.under_way("held-through-restart")) >= 3)  # in its second call
                restart_postgres(url, down_for=3.0, while_down=(Path(str(ledger) + ".release")).touch)
                ended = runs.wait("held-through-restart", timeout=120)
            assert worker.poll() is None, worker.stderr.read()  # type: ignore[union-attr]
        finally:
            said = stop(worker, signal.SIGTERM)
    assert (ended.status, ended.reason) == ("finished", "verified_success"), ended.error
    assert "stopped; handed back 0 runs" in said
