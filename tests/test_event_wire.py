"""Every stream event has one wire form (issue 49, item 2): `event.to_json()`, a JSON object
whose `type` names it; `forge ui`'s API streams exactly that."""

import json

import forge.events as events
from forge import AgentLoop, Finish, Intent, ScriptedPolicy, Tool, TransientToolError
from forge.observe import ToolAttempt
from forge.records.answers import Waiting
from forge.ui.api import event_json


def _kinds():
    return [cls for cls in vars(events).values()
            if isinstance(cls, type) and issubclass(cls, events.StreamEvent) and cls is not events.StreamEvent]


def test_every_event_type_has_a_type_of_its_own():
    types = [cls.TYPE for cls in _kinds()]
    assert len(types) == len(set(types)) == 13
    assert "event" not in types


def _streamed():
    calls = []

    def fetch(path: str) -> str:
        calls.append(path)
        if len(calls) == 1:
            raise TransientToolError("busy")
        return "text"

    loop = AgentLoop([Tool("fetch", {"fetch"}, fetch, required={"path"})],
                     ScriptedPolicy([Intent.call("fetch", path="a.md"), Finish("done")]), lambda o: o.tool_name == "finish")
    return list(loop.stream("copy"))


def test_a_streamed_runs_events_are_json_each_typed():
    sent = [json.loads(json.dumps(event.to_json())) for event in _streamed()]
    assert {each["type"] for each in sent} == {"started", "transition", "tool_attempt_started", "tool_attempt", "finished"}
    assert sent[0] == {"type": "started", "run_id": sent[0]["run_id"], "goal": "copy"} and sent[0]["run_id"]
    assert sent[-1] == {"type": "finished", "reason": "verified_success", "outcome": "success", "steps": 2,
                        "error": None}


def test_a_tool_attempts_form_names_the_tool_its_number_wait_error_and_the_models_call_id():
    failed = next(e.to_json() for e in _streamed() if isinstance(e, events.ToolAttemptFinished))
    assert failed == {"type": "tool_attempt", "tool": "fetch", "number": 1, "delay_before": 0.0, "call_id": None,
                      "error": "TransientToolError: busy"}  # a Python policy's call: no model named it
    named = events.ToolAttemptFinished(ToolAttempt("fetch", 1, 0.0, call_id="call_7")).to_json()
    assert named["call_id"] == "call_7"


def test_a_transitions_form_is_its_records():
    fired = next(e for e in _streamed() if isinstance(e, events.TransitionFired))
    assert fired.to_json() == {"type": "transition", "record": fired.record.to_json()}


def test_the_models_events_carry_what_the_model_wrote():
    assert events.ModelCallStarted("gpt").to_json() == {"type": "model_call", "model": "gpt"}
    assert events.TextDelta("Hi").to_json() == {"type": "text", "text": "Hi"}
    assert events.ToolCallDelta(0, "c1", "fetch", '{"pa').to_json() == {
        "type": "tool_call", "index": 0, "call_id": "c1", "name": "fetch", "arguments": '{"pa'}


def test_a_waiting_event_shows_the_question_in_words():
    waiting = Waiting("approval_required", "pay", {"to": "bob"}, "fp1", asked=2)
    sent = events.WaitingOn(waiting).to_json()
    assert sent == {"type": "waiting", "waiting": {**waiting.to_json(), "question": "may it call pay({\"to\": \"bob\"})?",
                                                   "answers": [{"kind": "approve", "value": "fp1"},
                                                               {"kind": "reject", "value": "fp1"}]}}


def test_the_api_streams_each_events_own_form():
    started = events.ToolAttemptStarted(ToolAttempt("fetch", 2, 0.5))
    assert event_json(started) == started.to_json() == {"type": "tool_attempt_started", "tool": "fetch", "number": 2,
                                                        "delay_before": 0.5, "call_id": None}
