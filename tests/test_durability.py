"""Durability is a capability of an AgentLoop (issue 32, item 5): `loop.durable(name, db)`
runs the loop's runs durably, and reads, waits for, answers and cancels them through the one
client of stored runs (`StoredRuns`), the one `forge runs` and `forge ui` use; its async
forms run the same code; `DurableLoop` is a deprecated alias of the same thing."""

import asyncio

import pytest
from builders import Recorder
from test_durable_one_run import two_writes

from forge.durable import Answer, AnswerRefused, Durable, DurableLoop, StoredRuns


def test_a_loop_made_durable_reads_its_runs_through_the_one_client(make):
    durable = make(two_writes(Recorder("written", "written")))
    assert isinstance(durable, Durable) and isinstance(durable.runs, StoredRuns)
    waiting = durable.run("write two files", run_id="through-the-client")
    assert durable.status("through-the-client") == durable.runs.get("through-the-client") == waiting


def test_a_run_started_by_the_loop_is_answered_by_another_client_and_waited_for(make, db):
    durable = make(two_writes(Recorder("written", "written")))
    first = durable.run("write two files", run_id="answered-elsewhere")
    with StoredRuns(db) as elsewhere:
        second = elsewhere.resume("answered-elsewhere", Answer.approve(first.waiting.fingerprint), 60, wait=True)
        assert (second.status, second.answers) == ("waiting", 1)
        sent = elsewhere.resume("answered-elsewhere", Answer.approve(second.waiting.fingerprint))
        assert (sent.status, sent.answers) == ("waiting", 1)  # as it was answered: without wait, it is not waited for
    assert durable.wait("answered-elsewhere", timeout=60, answers=2).reason == "verified_success"


def test_an_answer_sent_twice_is_taken_once_whoever_sends_it(make, db):
    durable = make(two_writes(Recorder("written", "written")))
    first = durable.run("write two files", run_id="sent-twice")
    durable.resume("sent-twice", Answer.approve(first.waiting.fingerprint))
    with StoredRuns(db) as elsewhere, pytest.raises(AnswerRefused):
        elsewhere.resume("sent-twice", Answer.approve(first.waiting.fingerprint))


def test_the_async_forms_give_what_the_sync_ones_give(make):
    durable = make(two_writes(Recorder("written", "written")))
    first = durable.run("write two files", run_id="async-reads")

    async def read_and_answer():
        status = await durable.astatus("async-reads")
        answered = await durable.aresume("async-reads", Answer.approve(first.waiting.fingerprint), 60)
        waited = await durable.await_for("async-reads", 60, answers=1)
        return status, answered, waited

    status, answered, waited = asyncio.run(read_and_answer())
    assert status == first and answered == waited == durable.status("async-reads")
    assert (answered.status, answered.answers) == ("waiting", 1)


def test_a_submitted_run_waits_on_the_queue_for_a_worker(make):
    durable = make(two_writes(Recorder()))
    run_id = durable.submit("write two files", run_id="queued-by-the-loop")
    assert durable.status(run_id).status == "queued"
    durable.cancel(run_id)
    assert durable.status(run_id).status == "cancelled"


def test_forking_into_the_same_id_again_is_the_same_fork(make):
    durable = make(two_writes(Recorder("written", "written", "written", "written")))
    done = durable.run("write two files", run_id="fork-twice-parent")
    first = durable.fork("fork-twice-parent", at=2, run_id="fork-twice")
    assert durable.fork("fork-twice-parent", at=2, run_id="fork-twice") == first
    assert durable.runs.fork("fork-twice-parent", at=2, run_id="fork-twice") == first
    assert done.status == "waiting"


def test_durable_loop_still_makes_the_same_thing_and_says_it_is_deprecated(db, request):
    loop = two_writes(Recorder("written"))
    with pytest.warns(DeprecationWarning, match=r"loop\.durable\(name, db\)"):
        durable = DurableLoop(loop, name=f"{request.node.name}-alias", db=db)
    try:
        assert isinstance(durable, Durable) and durable.loop is loop
        assert durable.run("write two files", run_id="through-the-alias").status == "waiting"
    finally:
        durable.close()


def test_an_answer_sent_twice_before_the_run_takes_either_is_taken_once(tmp_path):
    """The run's process has stopped while it waits, so nothing takes an answer off the
    database: the second of two identical answers finds the first there, claimed, and is
    refused as answered already; on recovery the approved write is made once."""
    import subprocess
    import sys
    from pathlib import Path

    agent = str(Path(__file__).with_name("durable_agent.py"))
    db, ledger = tmp_path / "runs.sqlite", tmp_path / "ledger"

    def run_agent(*more):
        done = subprocess.run([sys.executable, agent, "run", str(db), str(ledger), "twice", "--approvals", *more],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.splitlines()[-1]

    assert '"status": "waiting"' in run_agent()
    with StoredRuns(db) as runs:
        asked = runs.get("twice").waiting
        runs.resume("twice", Answer.approve(asked.fingerprint))
        with pytest.raises(AnswerRefused, match="answered already on that question"):
            runs.resume("twice", Answer.approve(asked.fingerprint))
    assert '"status": "waiting"' in run_agent("--answers", "1")  # recovered: took the one answer, waits again
    calls = [line.split("\t")[0] for line in (tmp_path / "ledger.calls").read_text().splitlines()]
    assert calls.count("write_entry") == 1
