"""A durable run is one run (issue 32, items 3 and 4): answered twice, it is one DBOS
workflow with one journal (the answers among its calls) and one trace; a durable fork may
start after the answers, calling nothing before it, or replace an answer."""

import json

import pytest
import sqlalchemy as sa
from builders import Recorder
from dbos import DBOS

from forge import AgentLoop, Finish, Intent, Patch, Tool
from forge.durable import Answer, database_url
from forge.records.journal import JournalEntry


def two_writes(write):
    def policy(goal, state):
        done = [o for o in state.observations if o.tool_name == "write"]
        return Intent.call("write", path=f"{len(done) + 1}.md") if len(done) < 2 else Finish("both written")

    return AgentLoop([Tool("write", {"write"}, write, side_effect=True, optional={"path"})], policy,
                     lambda o: o.tool_name == "finish", definition="approval", approver=lambda request: None)


def answered_twice(durable, run_id):
    """Run two approved writes durably; the finished run, and the fingerprints approved."""
    first = durable.run("write two files", run_id=run_id)
    second = durable.resume(run_id, Answer.approve(first.waiting.fingerprint))
    assert second.status == "waiting" and second.answers == 1
    done = durable.resume(run_id, Answer.approve(second.waiting.fingerprint))
    return done, (first.waiting.fingerprint, second.waiting.fingerprint)


def stored_calls(db, run_id):
    with sa.create_engine(database_url(db)).connect() as connection:
        rows = connection.execute(sa.text("select turn, entry from forge_journal where run_id = :id order by turn, seq"),
                                  {"id": run_id}).all()
    return [(turn, JournalEntry.from_json(json.loads(bytes(entry)))) for turn, entry in rows]


def test_a_durable_run_answered_twice_is_one_workflow_with_one_journal_and_one_trace(make, db):
    write = Recorder("written", "written")
    done, _ = answered_twice(make(two_writes(write)), "twice")
    assert (done.status, done.reason, done.answers) == ("finished", "verified_success", 2)
    assert len(DBOS.list_workflows(workflow_ids=["twice"], load_input=False, load_output=False)) == 1
    calls = stored_calls(db, "twice")
    assert {turn for turn, _ in calls} == {1}
    assert [entry.name for _, entry in calls if entry.kind == "answer"] == ["approval_required"] * 2
    assert len(done.traces) == 1 and [r.sequence for r in done.trace] == list(range(1, len(done.trace) + 1))
    assert [r.source for r in done.trace if r.trigger == "answer"] == ["approval_required"] * 2
    assert write.calls == [{"path": "1.md"}, {"path": "2.md"}]


def test_a_durable_fork_after_the_second_answer_calls_nothing_before_it(make):
    write = Recorder("written", "written", "written again")
    durable = make(two_writes(write))
    done, _ = answered_twice(durable, "twice-parent")
    second = [r.sequence for r in done.trace if r.trigger == "answer"][1]
    execute = next(r.sequence for r in done.trace if r.sequence > second and r.source == "execute")
    forked = durable.wait(durable.fork("twice-parent", at=execute, run_id="twice-fork"), timeout=60)
    assert (forked.status, forked.reason) == ("finished", "verified_success")
    assert write.calls == [{"path": "1.md"}, {"path": "2.md"}, {"path": "2.md"}]  # only the call at the fork point
    assert forked.forked_from.run_id == "twice-parent" and forked.forked_from.transition == execute
    assert [r.trigger for r in forked.trace[:execute - 1]] == [r.trigger for r in done.trace[:execute - 1]]


def test_a_durable_fork_may_replace_a_persons_answer_and_then_waits_for_its_own(make):
    write = Recorder("written", "written", "written")
    durable = make(two_writes(write))
    done, (fingerprint, _) = answered_twice(durable, "answer-parent")
    first = next(r.sequence for r in done.trace if r.trigger == "answer")
    forked_id = durable.fork("answer-parent", at=first, patch=Patch.answered(Answer.reject(fingerprint)),
                             run_id="answer-fork")
    waiting = durable.wait(forked_id, timeout=60)
    assert waiting.status == "waiting" and waiting.waiting.arguments == {"path": "2.md"}
    assert waiting.trace[first - 1].detail["answer"] == "reject" and "patched" in waiting.trace[first - 1].detail
    assert len(write.calls) == 2  # the fork rejected the first write and has not been answered about the second
    finished = durable.resume(forked_id, Answer.approve(waiting.waiting.fingerprint))
    assert finished.reason == "verified_success" and write.calls[-1] == {"path": "2.md"}



def legacy_event(done):
    """The event an earlier forge published for `done`: one trace per answer, under `turns`."""
    at = next(index for index, record in enumerate(done.trace) if record.trigger == "answer")
    first = [record.to_json() for record in done.trace[:at]]
    rest = [record.to_json() for record in done.trace[at + 1:]]
    return {"status": "finished", "loop": done.loop, "goal": done.goal, "turns": [first, rest], "answers": 1,
            "reason": done.reason, "outcome": done.outcome, "summary": done.summary}


def test_a_run_stored_in_the_earlier_form_one_trace_per_answer_stays_readable(make):
    from forge.durable.result import DurableResult

    done, _ = answered_twice(make(two_writes(Recorder("written", "written"))), "legacy-shape")
    legacy = DurableResult.of("legacy", "SUCCESS", legacy_event(done))
    assert legacy.legacy and len(legacy.traces) == 2
    assert [r.sequence for r in legacy.records] == list(range(1, len(done.trace)))  # both turns, numbered on
    assert legacy.trace == legacy.traces[1] and legacy.reason == "verified_success"
    assert not done.legacy and len(done.traces) == 1
    with pytest.warns(DeprecationWarning, match="DurableResult.turns is deprecated"):
        assert legacy.turns == legacy.traces


def test_a_run_stored_in_the_earlier_form_is_forked_from_its_first_turn_only(make):
    from forge.durable.forks import ForkRequest, seed_fork
    from forge.durable.result import DurableResult
    from forge.machine.fork import PatchRefused

    durable = make(two_writes(Recorder("written", "written")))
    done, _ = answered_twice(durable, "legacy-fork")
    legacy = DurableResult.of("legacy-fork", "SUCCESS", legacy_event(done))
    with pytest.raises(PatchRefused, match="stored by an earlier forge"):
        seed_fork(durable.database, ForkRequest("legacy-fork", len(legacy.traces[0]) + 2, None, "legacy-fork-2"),
                  legacy.traces, {"write": durable.loop.tools[0]})


def test_an_async_durable_run_answered_twice_is_one_run_too(make, db):
    import asyncio

    write = Recorder("written", "written")
    durable = make(two_writes(write))

    async def answered():
        first = await durable.arun("write two files", run_id="async-twice")
        second = await durable.aresume("async-twice", Answer.approve(first.waiting.fingerprint))
        return await durable.aresume("async-twice", Answer.approve(second.waiting.fingerprint))

    done = asyncio.run(answered())
    assert (done.status, done.reason, done.answers) == ("finished", "verified_success", 2)
    assert [r.source for r in done.trace if r.trigger == "answer"] == ["approval_required"] * 2
    assert [entry.kind for _, entry in stored_calls(db, "async-twice")].count("answer") == 2
    assert write.calls == [{"path": "1.md"}, {"path": "2.md"}]


def test_a_durable_fork_replays_its_parents_keyed_call_as_its_own(make):
    charge = Recorder("charged", "charged again")

    def policy(goal, state):
        if not state.observations:
            return Intent.call("charge", cents=5).keyed("fork-order-1")
        return Intent.call("charge", cents=6) if len(state.observations) == 1 else Finish("done")

    durable = make(AgentLoop([Tool("charge", {"charge"}, charge, side_effect=True, optional={"cents"})], policy,
                             lambda o: o.tool_name == "finish"))
    parent = durable.run("charge twice", run_id="keyed-parent")
    second = [r.sequence for r in parent.trace if r.source == "execute"][1]
    forked = durable.wait(durable.fork("keyed-parent", at=second, run_id="keyed-fork"), timeout=60)
    first_call = next(r for r in forked.trace if r.source == "execute")
    assert first_call.detail["replayed"] is False  # the parent's keyed call is the fork's own, replayed as made
    assert first_call.detail == next(r for r in parent.trace if r.source == "execute").detail
    assert charge.calls == [{"cents": 5}, {"cents": 6}, {"cents": 6}]
