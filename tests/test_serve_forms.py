"""The elicitation form `forge serve` sends for each kind of question, and the answer each
reply makes (`forge.serve.asking.form_for`, `answer_of`): an approval is one yes/no field
naming the call, a choice of tools one field listing them, a question of the policy's one
text field; a declined approval is a rejection, a declined question is no answer. (Written
from the mutation run's survivors.)"""

from types import SimpleNamespace

import pytest

from forge.machine.answers import Answer, Waiting
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
