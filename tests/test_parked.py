"""Waiting costs no slot (issue 48, item 3): a run a worker took from forge's queue that must
wait for a person is parked — its workflow ends, holding no worker slot and no thread — and
the answer (or the question's deadline) starts it again on any live worker, exactly once,
as the same run: one id, one journal, one trace. Real worker processes on SQLite."""

import threading

import pytest
import sqlalchemy as sa
from durable_agent import calls_made
from worker_processes import start_worker, stop_all

from forge.durable import Answer, AnswerRefused
from forge.durable.runs import StoredRuns

pytestmark = pytest.mark.slow


@pytest.fixture
def fleet(tmp_path):
    """`fleet(n, concurrency)`: n workers on a new runs database, stopped after the test;
    gives the database's path and its ledger."""
    started = []

    def start(count=1, concurrency=4):
        db, ledger = str(tmp_path / "runs.sqlite"), tmp_path / "ledger"
        with StoredRuns(db, create=True) as runs:
            assert runs.database is not None  # forge's tables, made before the workers race to make them
        started.extend(start_worker(db, ledger, concurrency) for _ in range(count))
        return db, ledger

    yield start
    stop_all(started)


def workflows_of(db, run_id):
    """The DBOS workflows a run has had: its own, then one per answer that took it on."""
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as connection:
        rows = connection.exec_driver_sql("select workflow_uuid, name, status from workflow_status "
                                          "where workflow_uuid = ? or workflow_uuid like ? order by created_at",
                                          (run_id, f"{run_id}~%")).all()
    engine.dispose()
    return [tuple(row) for row in rows]


def test_runs_waiting_for_approval_leave_the_only_slot_free_for_new_runs(fleet):
    db, _ = fleet(1, concurrency=1)
    with StoredRuns(db) as runs:
        for n in range(3):
            runs.submit("filing-approved", "file every item", f"asks-{n}")
        for n in range(3):
            assert runs.wait(f"asks-{n}", timeout=120).status == "waiting"
        runs.submit("filing", "file every item", "flows")
        done = runs.wait("flows", timeout=120)  # with the slot held by a waiting run, it would stay queued
        assert (done.status, done.reason) == ("finished", "verified_success")
        assert [row.run_id for row in runs.find(status="waiting")[0]] == ["asks-2", "asks-1", "asks-0"]
        assert runs.waiting_count() == 3 and runs.waiting_count(cap=2) == 2  # a count of forge's index


def test_an_answer_takes_a_parked_run_on_as_the_same_run_with_one_journal_and_one_trace(fleet):
    db, ledger = fleet(2)
    with StoredRuns(db) as runs:
        runs.submit("filing-approved", "file every item", "approved")
        asked = runs.wait("approved", timeout=120)
        answers = 0
        while asked.status == "waiting":
            answers += 1
            asked = runs.resume("approved", Answer.approve(asked.waiting.fingerprint), 120, wait=True)
            assert asked.answers == answers
        assert (asked.status, asked.reason, answers) == ("finished", "verified_success", 3)
        records, calls = runs.recorded("approved")
        assert [record.sequence for record in records] == list(range(1, len(records) + 1))
        assert [call.kind for call in calls].count("answer") == 3
        assert [row[1:] for row in workflows_of(db, "approved")] == [
            ("forge_run", "SUCCESS"), ("forge_resume", "SUCCESS"), ("forge_resume", "SUCCESS"),
            ("forge_resume", "SUCCESS")]
    assert sorted(calls_made(ledger).values()) == [1, 1, 1]


def test_one_answer_of_two_sent_at_once_to_a_parked_run_is_taken(fleet):
    db, _ = fleet(2)
    with StoredRuns(db) as runs:
        runs.submit("filing-approved", "file every item", "raced")
        asked = runs.wait("raced", timeout=120)
        outcomes = []

        def answer(how):
            try:
                runs.resume("raced", how(asked.waiting.fingerprint))
                outcomes.append("taken")
            except AnswerRefused:
                outcomes.append("refused")

        both = [threading.Thread(target=answer, args=(how,)) for how in (Answer.approve, Answer.reject)]
        for thread in both:
            thread.start()
        for thread in both:
            thread.join()
        assert sorted(outcomes) == ["refused", "taken"]
        after = runs.wait("raced", timeout=120, answers=1)
        assert after.answers == 1
        assert len([row for row in workflows_of(db, "raced") if row[1] == "forge_resume"]) == 1


def test_a_parked_runs_deadline_takes_it_on_by_its_timeout_edge_and_a_later_answer_is_refused(fleet):
    db, ledger = fleet(1)
    with StoredRuns(db) as runs:
        runs.submit("filing-expiring", "file every item", "expires")
        asked = runs.wait("expires", timeout=120)
        assert asked.status == "waiting" and asked.waiting.deadline is not None
        ended = runs.wait("expires", timeout=120, answers=1)
        assert (ended.status, ended.reason) == ("finished", "approval_expired")
        assert ended.records[-1].trigger == "timeout"
        with pytest.raises(AnswerRefused):
            runs.resume("expires", Answer.approve(asked.waiting.fingerprint))
    assert not calls_made(ledger)


def test_a_cancelled_parked_run_is_cancelled_and_takes_no_answer(fleet):
    db, ledger = fleet(1)
    with StoredRuns(db) as runs:
        runs.submit("filing-approved", "file every item", "dropped")
        asked = runs.wait("dropped", timeout=120)
        runs.cancel("dropped")
        assert runs.get("dropped").status == "cancelled"
        assert [row.run_id for row in runs.find(status="cancelled")[0]] == ["dropped"]
        with pytest.raises(AnswerRefused):
            runs.resume("dropped", Answer.approve(asked.waiting.fingerprint))
    assert not calls_made(ledger)


def test_the_waiting_list_the_inbox_and_the_runs_list_read_as_much_with_many_waiting_runs_as_with_few(fleet):
    """Issue 50 item 3: a page costs a bounded number of queries however many runs wait (here
    60, then 240 copies of a parked run beside it), counted at SQLAlchemy's cursor."""
    from cloned_runs import clone_runs
    from starlette.testclient import TestClient

    from forge.ui.app import create_app

    db, _ = fleet(1)
    with StoredRuns(db) as runs:
        runs.submit("filing-approved", "file every item", "template")
        assert runs.wait("template", timeout=120).status == "waiting"
    statements = []

    def counted(*_):
        statements.append(1)

    def reads(action):
        statements.clear()
        action()
        return len(statements)

    app = TestClient(create_app(db, "t", hosts={"testserver"}))
    app.get("/inbox?token=t").raise_for_status()  # the app's first request opens its database
    costs = []
    for copies, prefix in ((60, "few-"), (180, "more-")):
        clone_runs(db, "template", copies, prefix)
        with StoredRuns(db) as runs:
            sa.event.listen(sa.engine.Engine, "before_cursor_execute", counted)
            try:
                page, more = runs.find(status="waiting", limit=50)
                assert len(page) == 50 and more
                assert all(row.status == "waiting" and row.waiting is not None for row in page)
                costs.append((reads(lambda runs=runs: runs.find(status="waiting", limit=50)),
                              reads(lambda runs=runs: runs.waiting_count()),
                              reads(lambda: app.get("/inbox?token=t").raise_for_status()),
                              reads(lambda: app.get("/?token=t&status=waiting").raise_for_status()),
                              reads(lambda: app.get("/?token=t").raise_for_status())))
            finally:
                sa.event.remove(sa.engine.Engine, "before_cursor_execute", counted)
    assert costs[0] == costs[1], costs
    assert costs[0][0] <= 10, costs  # a page of 50 waiting runs: a few reads, not a few per run
