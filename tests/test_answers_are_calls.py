"""The person's answer is a call (issue 32, items 3 and 4): a run that needs input asks its
performer; in memory nobody answers and the run ends there as it always has; answered, it
goes on in the same run, the answer journaled as that call's outcome, so a replay makes the
whole run again calling nothing, and a fork may start anywhere, after answers too, or
replace an answer with a `Patch`."""

import time

import pytest

from forge import AgentLoop, Finish, Hooks, Intent, Patch, RunStart, Tool
from forge.machine.fork import PatchRefused
from forge.machine.performers import Performer
from forge.records.answers import Answer
from forge.records.trace import read_journal, write_trace


class Counted:
    def __init__(self, result):
        self.result, self.calls = result, []

    def __call__(self, **arguments):
        self.calls.append(arguments)
        return self.result


class Answering(Performer):
    """A live performer with a person behind it: each question is answered by the next of
    `answers`, a function of what the run waits for."""

    def __init__(self, answers, journal, run):
        super().__init__(journal, run, time.sleep)
        self.answers = list(answers)

    def asks(self):
        return bool(self.answers)

    def ask(self, waiting):
        return self.answers.pop(0)(waiting).to_json()


def answered_by(*answers):
    return lambda journal, run: Answering(answers, journal, run)


def approve(waiting):
    return Answer.approve(waiting.fingerprint)


def reject(waiting):
    return Answer.reject(waiting.fingerprint)


def two_writes():
    write = Counted("written")
    policy_calls = []

    def policy(goal, state):
        policy_calls.append(len(state.observations))
        done = [o for o in state.observations if o.tool_name == "write"]
        if len(done) < 2:
            return Intent.call("write", path=f"{len(done) + 1}.md")
        return Finish("both written")

    loop = AgentLoop([Tool("write", {"write"}, write, side_effect=True, optional={"path"})], policy,
                     lambda o: o.tool_name == "finish", definition="approval", approver=lambda request: None)
    return loop, write, policy_calls


def test_in_memory_nobody_answers_and_the_run_ends_in_its_waiting_state():
    loop, write, _ = two_writes()
    result = loop.run("write two files")
    assert result.reason == "approval_required" and result.outcome == "needs_input" and write.calls == []
    assert "answer" not in [entry.kind for entry in result.journal]
    assert [record.trigger for record in result.trace][-1] == "wait"


def test_an_answered_run_goes_on_in_the_same_run_by_an_answer_transition():
    loop, write, _ = two_writes()
    result = loop.run(RunStart("write two files", performer=answered_by(approve, approve)))
    assert result.reason == "verified_success" and write.calls == [{"path": "1.md"}, {"path": "2.md"}]
    answers = [record for record in result.trace if record.trigger == "answer"]
    assert [(a.source, a.dest, a.detail["answer"]) for a in answers] == [("approval_required", "select", "approve")] * 2
    assert [record.sequence for record in result.trace] == list(range(1, len(result.trace) + 1))


def test_the_answer_is_journaled_as_the_outcome_of_a_call_asking_the_question():
    loop, _, _ = two_writes()
    result = loop.run(RunStart("write two files", performer=answered_by(approve, approve)))
    asked = [entry for entry in result.journal if entry.kind == "answer"]
    assert [entry.name for entry in asked] == ["approval_required"] * 2
    assert asked[0].identity["tool"] == "write" and asked[0].identity["arguments"] == {"path": "1.md"}
    assert asked[0].value == {"kind": "approve", "value": asked[0].identity["fingerprint"], "question": 0}


def test_an_answered_approval_is_not_asked_of_the_approver_again():
    loop, _, _ = two_writes()
    result = loop.run(RunStart("write two files", performer=answered_by(approve, approve)))
    assert [entry.kind for entry in result.journal].count("approver") == 2  # one per call, before each wait


def test_a_replay_makes_the_answered_run_again_calling_nothing():
    loop, write, policy_calls = two_writes()
    recorded = loop.run(RunStart("write two files", performer=answered_by(approve, approve)))
    written, decided = len(write.calls), len(policy_calls)
    replayed = loop.replay(recorded.journal)
    assert replayed.trace == recorded.trace and list(replayed.journal) == list(recorded.journal)
    assert len(write.calls) == written  # the tool is the world: answered from the journal
    assert len(policy_calls) > decided  # the policy is code: run again, its decisions checked


def test_an_answered_run_replays_from_its_trace_file(tmp_path):
    loop, write, _ = two_writes()
    recorded = loop.run(RunStart("write two files", performer=answered_by(approve, reject)))
    path = tmp_path / "run.jsonl"
    write_trace(recorded.trace, path, journal=recorded.journal)
    assert [entry.kind for entry in read_journal(path)].count("answer") == 2
    written = len(write.calls)
    replayed = loop.replay(path)
    assert [(r.source, r.trigger, r.dest) for r in replayed.trace] == \
        [(r.source, r.trigger, r.dest) for r in recorded.trace]
    assert len(write.calls) == written


def test_a_fork_after_the_second_answer_makes_no_call_before_it():
    loop, write, _ = two_writes()
    recorded = loop.run(RunStart("write two files", performer=answered_by(approve, approve)))
    second = [record.sequence for record in recorded.trace if record.trigger == "answer"][1]
    written = len(write.calls)
    fork = loop.fork(recorded, at=second + 1)
    assert len(write.calls) == written + 1  # only the second write, made live after the fork point
    assert fork.reason == "verified_success" and fork.journal.forked_from.transition == second + 1
    assert [r.trigger for r in fork.trace[:second]] == [r.trigger for r in recorded.trace[:second]]


def test_a_patch_replaces_a_persons_answer():
    loop, write, _ = two_writes()
    recorded = loop.run(RunStart("write two files", performer=answered_by(approve, approve)))
    first = next(record.sequence for record in recorded.trace if record.trigger == "answer")
    fingerprint = next(e.identity["fingerprint"] for e in recorded.journal if e.kind == "answer")
    written = len(write.calls)
    fork = loop.fork(recorded, at=first, patch=Patch.answered(Answer.reject(fingerprint)))
    assert fork.trace[first - 1].detail["patched"] == {"answered": {"kind": "reject", "value": fingerprint,
                                                                    "question": 0}}
    assert fork.trace[first - 1].detail["answer"] == "reject"
    assert fork.trace[first + 1].detail["approval"] == "rejected"
    assert len(write.calls) == written  # rejected, then the policy asks again and nobody answers here
    assert fork.reason == "approval_required"


def test_an_answer_patch_where_no_one_was_asked_is_refused():
    loop, _, _ = two_writes()
    recorded = loop.run(RunStart("write two files", performer=answered_by(approve, approve)))
    with pytest.raises(PatchRefused, match="a person"):
        loop.fork(recorded, at=1, patch=Patch.answered(Answer.text("hello")))


def test_an_answer_patch_reads_from_json():
    assert Patch.from_json({"answered": {"kind": "text", "value": "blue"}}) == Patch.answered(Answer.text("blue"))
    assert Patch.from_json({"answered": None}) == Patch.answered(None)
    with pytest.raises(ValueError, match="'answered' must be an answer"):
        Patch.from_json({"answered": "blue"})


def test_a_reply_to_the_policys_question_is_the_goal_of_a_new_turn_of_the_same_run():
    from forge import Ask

    seen = []

    def policy(goal, state):
        seen.append(goal)
        if not state.observations:
            return Ask("which colour?")
        return Finish(goal) if state.observations[-1].tool_name == "ask_user" else Ask("again?")

    loop = AgentLoop([Tool("noop", {"noop"}, Counted(None))], policy, lambda o: o.tool_name == "finish")
    result = loop.run(RunStart("paint it", performer=answered_by(lambda waiting: Answer.text("blue"))))
    assert (result.reason, result.state.observations[-1].payload.answer) == ("verified_success", "blue")
    answered = next(record for record in result.trace if record.trigger == "answer")
    assert (answered.source, answered.detail) == ("input_required", {"answer": "text", "reply": "blue"})
    assert seen[0] == "paint it" and seen[-1] == "blue" and result.question is None


def test_the_debugger_steps_through_a_fork_of_an_answered_run_answers_and_all():
    loop, write, _ = two_writes()
    recorded = loop.run(RunStart("write two files", performer=answered_by(approve, approve)))
    written = len(write.calls)
    session = loop.debug_fork(recorded)  # at the start: each step replays the recorded run
    while not session.done:
        session.step()
    assert [r.trigger for r in session.trace] == [r.trigger for r in recorded.trace]
    assert session.state == "verified_success" and len(write.calls) == written
    second = [record.sequence for record in recorded.trace if record.trigger == "answer"][1]
    while len(session.trace) >= second:
        session.back()
    assert session.state == "approval_required" and not session.done  # waiting, the answer ahead
    assert session.step().trigger == "answer" and session.state == "select"


def hide_paths(tool, field, value):
    return {**value, "path": "***"} if field == "arguments" and isinstance(value, dict) and "path" in value else value


def test_a_file_written_through_redact_masks_the_answers_call_and_edited_arguments(tmp_path):
    loop = two_writes()[0].replace(hooks=Hooks(redact=hide_paths))

    def edit(waiting):
        return Answer.approve(waiting.fingerprint, arguments={"path": "secret.md"})

    recorded = loop.run(RunStart("write two files", performer=answered_by(edit, approve)))
    path = tmp_path / "run.jsonl"
    write_trace(recorded.trace, path, journal=recorded.journal)
    text = path.read_text()
    assert "secret.md" not in text and "1.md" not in text and "2.md" not in text
    replayed = loop.replay(path)
    assert [(r.source, r.trigger, r.dest) for r in replayed.trace] == \
        [(r.source, r.trigger, r.dest) for r in recorded.trace]
