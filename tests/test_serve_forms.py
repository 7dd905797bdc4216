"""The elicitation form `forge serve` sends for each kind of question, and the answer each
reply makes (`forge.serve.asking.form_for`, `answer_of`): an approval is one yes/no field
naming the call, a choice of tools one field listing them, a question of the policy's one
text field; a declined approval is a rejection, a declined question is no answer. (Written
from the mutation run's survivors.)"""

from types import SimpleNamespace

import pytest

from forge.records.answers import Answer, Waiting
from forge.serve.asking import Unanswered, answer_of, form_for

APPROVAL = Waiting("approval_required", "pay", {"to": "bob"}, "f" * 64)
CHOICE = Waiting("clarification_required", tied=("fast", "slow"))
QUESTION = Waiting("input_required", prompt="Which city?")


def test_an_approval_is_one_yes_or_no_field_naming_the_call():
    form, answer = form_for(APPROVAL)
    assert form == {"type": "object", "required": ["approve"], "properties": {"approve": {
        "type": "boolean", "title": "Run pay?", "description": 'pay({"to": "bob"})'}}}
    assert answer(True) == Answer.approve("f" * 64) and answer(False) == Answer.reject("f" * 64)


def test_a_choice_of_tools_is_one_field_listing_them():
    form, answer = form_for(CHOICE)
    assert form["required"] == ["tool"] and form["properties"]["tool"] == {
        "type": "string", "title": "tool", "description": CHOICE.asks, "enum": ["fast", "slow"]}
    assert answer("slow") == Answer.tool("slow")


def test_a_question_of_the_policy_is_one_text_field():
    form, answer = form_for(QUESTION)
    assert form == {"type": "object", "required": ["reply"], "properties": {"reply": {
        "type": "string", "title": "reply", "description": "Which city?"}}}
    assert answer("Paris") == Answer.text("Paris")


def test_an_accepted_reply_answers_with_its_field():
    assert answer_of(CHOICE, SimpleNamespace(action="accept", content={"tool": "fast"})) == Answer.tool("fast").to_json()
    assert answer_of(QUESTION, SimpleNamespace(action="accept", content={"reply": "Oslo"})) == Answer.text("Oslo").to_json()


def test_a_declined_approval_is_a_rejection_and_a_declined_question_no_answer():
    assert answer_of(APPROVAL, SimpleNamespace(action="decline", content=None)) == Answer.reject("f" * 64).to_json()
    declined = r"the run waits in input_required: Which city\? \(the client's user declined to answer\)"
    with pytest.raises(Unanswered, match=declined):
        answer_of(QUESTION, SimpleNamespace(action="decline", content=None))
    with pytest.raises(Unanswered, match="cancelled the question"):
        answer_of(CHOICE, SimpleNamespace(action="cancel", content=None))


def test_an_approvals_call_is_named_with_arguments_json_cannot_hold_as_their_text():
    import datetime

    form, _ = form_for(Waiting("approval_required", "pay", {"on": datetime.date(2026, 1, 2)}, "f" * 64))
    assert form["properties"]["approve"]["description"] == 'pay({"on": "2026-01-02"})'


def test_a_cancelled_question_says_the_user_cancelled_it():
    with pytest.raises(Unanswered) as refused:
        answer_of(CHOICE, SimpleNamespace(action="cancel", content=None))
    assert str(refused.value).endswith("(the client's user cancelled the question)")


def test_a_request_state_changed_on_the_way_is_refused_as_not_this_servers():
    from forge.serve.asking import opened, sealed

    state = sealed({"run_id": "r"}, "shop")
    text, _, signature = state.rpartition(".")
    with pytest.raises(Unanswered) as refused:
        opened(f"{text}x.{signature}", "shop")
    assert str(refused.value) == ("the request state is not one this server made (it was changed, or the server "
                                  "restarted): call the tool again")


def test_a_request_state_of_another_tool_names_the_tool_it_was_made_for():
    from forge.serve.asking import opened, sealed

    with pytest.raises(Unanswered) as refused:
        opened(sealed({"run_id": "r"}, "shop"), "bank")
    assert str(refused.value) == ("the request state is a call of 'shop''s, not of 'bank''s: retry the call of "
                                  "'shop' with it, or call 'bank' again")


def test_the_record_of_spent_states_forgets_expired_ones_and_still_refuses_a_live_one_twice():
    from forge.serve.asking import STATE_LIFETIME, _Spent

    spent, now = _Spent(), 10 * STATE_LIFETIME
    assert spent.spend("live", now - 1.0, now)
    for n in range(5000):  # made two lifetimes ago: expired
        assert spent.spend(f"old-{n}", now - 2 * STATE_LIFETIME, now)
    assert len(spent._issued) < 5000  # bounded: the expired were forgotten
    assert not spent.spend("live", now - 1.0, now + 1.0)  # a live one is never forgotten
