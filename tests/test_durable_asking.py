"""Durable runs that ask the user and durable conversations: a run waits in input_required for
`Answer.text`, from Python, from `forge runs resume --text` and across a kill -9; turn N+1 of
a durable conversation goes on from turn N's state; a finished run gives its answer."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from builders import forge

from forge import AgentLoop, Ask, Finish, Intent, tool
from forge.durable import Answer, AnswerRefused
from forge.errors import UsageError

ASKER = str(Path(__file__).with_name("durable_asker.py"))


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


def asking_policy(goal, state):
    """Asks for the city, looks it up with the reply, answers with what it found."""
    if not state.observations:
        return Ask("Which city?")
    last = state.observations[-1]
    if last.tool_name == "ask_user":
        return Intent.call("weather", city=goal)
    return Finish(last.payload)


def answered(observation):
    return observation.tool_name == "finish"


def test_a_durable_run_that_asks_waits_for_a_text_answer_and_goes_on_with_it(make):
    durable = make(AgentLoop([weather], asking_policy, answered))
    waiting = durable.run("what is the weather?", run_id="ask-1")
    assert (waiting.status, waiting.waiting.state, waiting.question) == ("waiting", "input_required", "Which city?")
    done = durable.resume("ask-1", Answer.text("Oslo"))
    assert (done.status, done.reason, done.answer) == ("finished", "verified_success", "Oslo: sunny")
    answers = [(r.source, r.detail) for r in done.trace if r.trigger == "answer"]
    assert len(done.traces) == 1 and answers == [("input_required", {"answer": "text", "reply": "Oslo"})]


def test_a_run_waiting_for_text_refuses_another_kind_of_answer(make):
    durable = make(AgentLoop([weather], asking_policy, answered))
    durable.run("what is the weather?", run_id="ask-2")
    with pytest.raises(AnswerRefused, match="answer with text"):
        durable.resume("ask-2", Answer.tool("weather"))


def test_a_blank_text_answer_is_refused_when_made():
    with pytest.raises(AnswerRefused, match="non-blank"):
        Answer.text("   ")


def test_forge_runs_resume_text_answers_a_waiting_run_and_show_prints_the_question_and_answer(make, db):
    durable = make(AgentLoop([weather], asking_policy, answered))
    durable.run("what is the weather?", run_id="ask-cli")
    shown = forge("runs", "show", "ask-cli", "--db", str(db))
    assert "waiting in input_required: Which city?" in shown.stdout
    answered_ = forge("runs", "resume", "ask-cli", "--db", str(db), "--text", "Bergen")
    assert answered_.returncode == 0, answered_.stderr
    done = durable.wait("ask-cli", timeout=30)
    assert done.answer == "Bergen: sunny"
    assert "answer: Bergen: sunny" in forge("runs", "show", "ask-cli", "--db", str(db)).stdout


def test_turn_two_of_a_durable_conversation_goes_on_from_turn_ones_state(make, db):
    def policy(goal, state):
        if state.observations and state.observations[-1].tool_name == "finish":  # a new turn of the conversation
            return Finish(f"{goal}, after {len(state.observations)} observations")
        if not state.observations:
            return Finish(f"first: {goal}")
        return Finish("?")

    durable = make(AgentLoop([weather], policy, answered))
    first = durable.run("hello", run_id="conv-1")
    assert first.answer == "first: hello" and first.state is not None
    second = durable.run("and again", run_id="conv-2", state=first)
    assert second.answer == "and again, after 1 observations"
    assert second.continues == "conv-1" and len(second.state.observations) == 2
    shown = forge("runs", "show", "conv-2", "--db", str(db)).stdout
    assert "continues the conversation of run conv-1" in shown and "answer: and again" in shown


def test_a_conversation_cannot_go_on_from_a_run_with_no_state(make):
    durable = make(AgentLoop([weather], asking_policy, answered))
    with pytest.raises(UsageError, match="LoopState or a DurableResult"):
        durable.run("x", state={"observations": []})


@pytest.mark.slow
def test_a_run_killed_while_it_waits_for_the_users_reply_is_answered_from_another_process_and_goes_on(tmp_path):
    db, ledger = tmp_path / "runs.sqlite", tmp_path / "ledger"
    command = [sys.executable, ASKER, str(db), str(ledger), "asked-run"]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = json.loads(first.stdout.readline())
        assert line == {"status": "waiting", "question": "Which item should I file?", "answer": None}
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    assert first.returncode == -9 and not ledger.exists()
    answered_ = forge("runs", "resume", "asked-run", "--db", str(db), "--text", "beta")
    assert answered_.returncode == 0, answered_.stderr
    again = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1]) == {"status": "finished", "question": None, "answer": "filed beta"}
    assert ledger.read_text() == "beta\n"
