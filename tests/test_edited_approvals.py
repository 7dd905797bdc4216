"""Approvals a team can rely on: an approval may edit the call's arguments (checked against
the tool's contract before it is sent, recorded as edited with the original, run once under
the edited call's key, even across a crash); every needs-input state waits durably."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from builders import forge

from forge import AgentLoop, Finish, Intent, Stage, tool
from forge.durable import Answer, AnswerRefused

HERE = Path(__file__).parent
AGENT = str(HERE / "durable_agent.py")
SENT: list[dict] = []


@tool(side_effect=True)
def send(to: str, amount: int) -> str:
    """Send an amount to someone."""
    SENT.append({"to": to, "amount": amount})
    return f"sent {amount} to {to}"


def sender(goal, state):
    return Intent.call("send", to="bob", amount=500) if not state.observations else Finish(state.observations[-1].payload)


def approval_loop():
    return AgentLoop([send], sender, lambda o: o.tool_name == "finish", definition="approval",
                     approver=lambda request: None)


def test_an_edited_approval_runs_the_call_once_with_the_edited_arguments(make):
    SENT.clear()
    durable = make(approval_loop())
    waiting = durable.run("pay bob", run_id="edit-1")
    assert waiting.waiting.contract["required"] == ["amount", "to"]
    done = durable.resume("edit-1", Answer.approve(waiting.waiting.fingerprint, arguments={"to": "bob", "amount": 50}))
    assert (done.status, done.answer) == ("finished", "sent 50 to bob")
    assert SENT == [{"to": "bob", "amount": 50}]


def test_the_trace_records_the_call_as_edited_with_the_original(make):
    durable = make(approval_loop())
    waiting = durable.run("pay bob", run_id="edit-2")
    done = durable.resume("edit-2", Answer.approve(waiting.waiting.fingerprint, arguments={"to": "carol", "amount": 5}))
    answered = next(record for record in done.trace if record.trigger == "answer")
    assert answered.source == "approval_required" and answered.detail["answer"] == "approve"
    assert answered.detail["edited"] == {"tool": "send", "original": {"to": "bob", "amount": 500},
                                      "original_fingerprint": waiting.waiting.fingerprint,
                                      "arguments": {"to": "carol", "amount": 5}}


@pytest.mark.parametrize(("arguments", "why"), [({"to": "bob"}, "missing: amount"),
                                                ({"to": "bob", "amount": "fifty"}, "amount"),
                                                ({"to": "bob", "amount": 5, "memo": "x"}, "unexpected: memo")])
def test_edited_arguments_the_contract_refuses_are_refused_and_nothing_is_sent(make, arguments, why):
    durable = make(approval_loop())
    waiting = durable.run("pay bob", run_id=f"edit-bad-{len(arguments)}-{why[:4]}")
    with pytest.raises(AnswerRefused, match=f"break send's contract.*{why}"):
        durable.resume(waiting.run_id, Answer.approve(waiting.waiting.fingerprint, arguments=arguments))
    still = durable.status(waiting.run_id)
    assert (still.status, still.answers) == ("waiting", 0)


def test_edited_arguments_that_are_not_a_mapping_are_refused_when_made():
    with pytest.raises(AnswerRefused, match="mapping of argument names"):
        Answer.approve("fp", arguments=["to", "bob"])


def test_forge_runs_resume_approves_with_edited_arguments_from_json(make, db):
    durable = make(approval_loop())
    waiting = durable.run("pay bob", run_id="edit-cli")
    fingerprint = waiting.waiting.fingerprint
    bad = forge("runs", "resume", "edit-cli", "--db", str(db), "--approve", fingerprint, "--arguments", "{to: bob}")
    assert bad.returncode != 0 and "--arguments (the edited call's arguments as a JSON object) is not JSON" in bad.stderr
    refused = forge("runs", "resume", "edit-cli", "--db", str(db), "--approve", fingerprint,
                    "--arguments", '{"to": "bob"}')
    assert refused.returncode != 0 and "missing: amount" in refused.stderr
    done = forge("runs", "resume", "edit-cli", "--db", str(db), "--approve", fingerprint,
                 "--arguments", '{"to": "bob", "amount": 7}')
    assert done.returncode == 0, done.stderr
    assert durable.wait("edit-cli", timeout=30, answers=1).answer == "sent 7 to bob"


def test_a_definitions_own_needs_input_state_waits_durably_and_takes_a_text_answer(make, tmp_path):
    def review(run):
        return "hold" if run.goal == "check this" else "fine"

    path = tmp_path / "review.toml"
    path.write_text('''
[machine]
name = "review"
initial = "review"

[states.review]
action = "review"

[states.select]
action = "select_tool"

[states.execute]
action = "call_tool"

[states.observe]
action = "record_observation"

[states.verify]
action = "verify_and_decide"

[states.on_hold]
terminal = true
outcome = "needs_input"
doc = "A person must look first."

[states.verified_success]
terminal = true
outcome = "success"

[states.fatal_error]
terminal = true
outcome = "failure"

[states.step_budget_exhausted]
terminal = true
outcome = "failure"

[states.repeated_action]
terminal = true
outcome = "failure"

[states.clarification_required]
terminal = true
outcome = "needs_input"

[states.capability_gap]
terminal = true
outcome = "needs_input"

[[transitions]]
source = "review"
trigger = "hold"
dest = "on_hold"
guard = "hold"

[[transitions]]
source = "review"
trigger = "pass"
dest = "select"
guard = "fine"

[[transitions]]
source = "select"
trigger = "finish"
dest = "observe"
guard = "policy_finished"

[[transitions]]
source = "select"
trigger = "choose"
dest = "execute"
guard = "tool_selected"

[[transitions]]
source = "select"
trigger = "choose"
dest = "clarification_required"
guard = "tool_choice_ambiguous"

[[transitions]]
source = "select"
trigger = "choose"
dest = "capability_gap"
guard = "no_tool_fits"

[[transitions]]
source = "select"
trigger = "choose"
dest = "fatal_error"
guard = "policy_raised"

[[transitions]]
source = "execute"
trigger = "call"
dest = "observe"

[[transitions]]
source = "observe"
trigger = "record"
dest = "verify"

[[transitions]]
source = "verify"
trigger = "replan"
dest = "review"
guard = "decided_continue"

[[transitions]]
source = "verify"
trigger = "stop"
dest = "verified_success"
guard = "decided_verified_success"

[[transitions]]
source = "verify"
trigger = "stop"
dest = "fatal_error"
guard = "decided_fatal_error"

[[transitions]]
source = "verify"
trigger = "stop"
dest = "fatal_error"
guard = "verify_raised"

[[transitions]]
source = "verify"
trigger = "stop"
dest = "step_budget_exhausted"
guard = "decided_step_budget_exhausted"

[[transitions]]
source = "verify"
trigger = "stop"
dest = "repeated_action"
guard = "decided_repeated_action"
''')
    loop = AgentLoop([send], lambda goal, state: Finish(f"looked at: {goal}"), lambda o: o.tool_name == "finish",
                     definition=path, stages={"review": Stage(review, {"hold", "fine"})})
    durable = make(loop)
    waiting = durable.run("check this", run_id="own-wait")
    assert (waiting.status, waiting.waiting.state) == ("waiting", "on_hold")
    assert "answer with text" in waiting.waiting.question
    with pytest.raises(AnswerRefused, match="answer with text"):
        durable.resume("own-wait", Answer.run_again())
    done = durable.resume("own-wait", Answer.text("it is fine now"))
    assert (done.status, done.answer) == ("finished", "looked at: it is fine now")


@pytest.mark.slow
def test_an_edited_approval_runs_once_with_its_arguments_after_a_crash_between_the_approval_and_the_call(tmp_path):
    db, ledger = tmp_path / "runs.sqlite", tmp_path / "ledger"
    base = [sys.executable, AGENT, "run", str(db), str(ledger), "edited-run", "--approvals"]
    first = subprocess.run(base, capture_output=True, text=True, timeout=60)
    lines = first.stdout.splitlines()
    end = json.loads(lines[-1])
    assert end["status"] == "waiting" and end["waiting"]["arguments"]["item"] == "alpha"
    turn_one = len(lines) - 1
    edited = dict(end["waiting"]["arguments"], text="EDITED")
    answered = forge("runs", "resume", "edited-run", "--db", str(db), "--approve", end["waiting"]["fingerprint"],
                     "--arguments", json.dumps(edited))
    assert answered.returncode == 0, answered.stderr
    # recover, and die as turn two's execute transition starts: approved, not yet called
    killed = subprocess.run([*base, "--crash-at", str(turn_one + 3), "--answers", "1"], capture_output=True, text=True,
                            timeout=60)
    assert killed.returncode == -9
    assert not ledger.exists() or "EDITED" not in ledger.read_text()
    again = subprocess.run([*base, "--answers", "1"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    filed = [line.split("\t") for line in ledger.read_text().splitlines()]
    assert [(item, text) for _, item, text in filed] == [("alpha", "EDITED")]
    calls = [line for line in Path(str(ledger) + ".calls").read_text().splitlines() if line.startswith("write_entry")]
    assert len(calls) == 1
    waiting_again = json.loads(again.stdout.splitlines()[-1])
    assert waiting_again["waiting"]["arguments"]["item"] == "beta"  # the run went on to the next write


@tool(side_effect=True)
async def send_later(to: str, amount: int) -> str:
    """Send an amount, awaited."""
    SENT.append({"to": to, "amount": amount, "awaited": True})
    return f"sent {amount} to {to}"


def test_durable_arun_waits_for_an_approval_and_an_awaited_resume_finishes_it(make):
    import asyncio

    async def policy(goal, state):
        return Intent.call("send_later", to="ann", amount=3) if not state.observations else Finish(
            state.observations[-1].payload)

    durable = make(AgentLoop([send_later], policy, lambda o: o.tool_name == "finish", definition="approval",
                             approver=lambda request: None))

    async def both():
        waiting = await durable.arun("pay ann", run_id="async-1", timeout=30)
        assert (waiting.status, waiting.waiting.state) == ("waiting", "approval_required")
        return await durable.aresume("async-1", Answer.approve(waiting.waiting.fingerprint), timeout=30)

    SENT.clear()
    done = asyncio.run(both())
    assert (done.status, done.answer) == ("finished", "sent 3 to ann")
    assert SENT == [{"to": "ann", "amount": 3, "awaited": True}]


def test_durable_arun_refuses_a_tool_that_asks_when_in_doubt(make):
    import asyncio

    from forge import Tool

    asking = Tool("ask_me", {"x"}, lambda: "x", side_effect=True, on_crash="ask")
    durable = make(AgentLoop([asking], lambda goal, state: Finish("x"), lambda o: True))
    with pytest.raises(ValueError, match="on_crash='ask'"):
        asyncio.run(durable.arun("x", run_id="async-ask"))


def test_forge_runs_list_shows_async_runs_too(make, db):
    import asyncio

    durable = make(approval_loop())
    asyncio.run(durable.arun("pay bob", run_id="async-listed", timeout=30))
    listed = forge("runs", "list", "--db", str(db))
    assert "async-listed" in listed.stdout
