"""One reader of an answer given from outside Python (issue 49, item 2): `forge runs resume`'s
flags, a `forge ui` form and the JSON API's body all become an `Answer` through
`read_answer`, so each takes the same answers and refuses the same ones in the same words."""

import pytest

from forge.errors import UsageError
from forge.records.answers import ANSWER_KINDS, Answer, AnswerRefused, read_answer


@pytest.mark.parametrize(("kind", "value", "made"), [
    ("approve", " fp1 ", Answer("approve", "fp1")),
    ("reject", "fp1", Answer("reject", "fp1")),
    ("tool", "search", Answer("tool", "search")),
    ("add_tool", "fetch", Answer("add_tool", "fetch")),
    ("text", " Oslo ", Answer("text", " Oslo ")),
    ("run_again", None, Answer("run_again")),
    ("did_run", {"rows": 3}, Answer("did_run", {"rows": 3})),
])
def test_each_kind_reads_as_the_answer_its_class_method_makes(kind, value, made):
    assert read_answer(kind, value) == made


def test_every_kind_forge_knows_is_read():
    assert {read_answer(kind, "x" if kind != "did_run" else None).kind for kind in ANSWER_KINDS} == set(ANSWER_KINDS)


def test_a_did_run_result_given_as_text_is_read_as_json_and_blank_as_none():
    assert read_answer("did_run", '{"rows": 3}', as_text=True).value == {"rows": 3}
    assert read_answer("did_run", "", as_text=True).value is None
    assert read_answer("did_run", '"ok"').value == '"ok"'  # a JSON body's string is the result itself


def test_edited_arguments_are_an_object_or_its_json_text():
    assert read_answer("approve", "fp", {"to": "bob"}).arguments == {"to": "bob"}
    assert read_answer("approve", "fp", '{"to": "bob"}').arguments == {"to": "bob"}
    assert read_answer("approve", "fp", "  ").arguments is None


@pytest.mark.parametrize(("arguments", "said"), [
    ("{to: bob}", "the edited arguments is not JSON: Expecting property name"),
    ("[" * 100_000, "the edited arguments nests too deeply"),
    ('["to", "bob"]', "mapping of argument names"),
])
def test_edited_arguments_that_are_not_an_object_are_refused_saying_why(arguments, said):
    with pytest.raises(UsageError, match=said):
        read_answer("approve", "fp", arguments)


def test_only_an_approval_carries_edited_arguments():
    with pytest.raises(AnswerRefused, match="only an approval carries edited arguments"):
        read_answer("reject", "fp", {"to": "bob"})


@pytest.mark.parametrize(("kind", "value", "said"), [
    ("approve", "", "an answer of kind 'approve' takes a non-blank fingerprint, got ''"),
    ("tool", None, "an answer of kind 'tool' takes a non-blank tool name, got None"),
    ("text", "  ", "a text answer must be a non-blank string"),
    ("maybe", "x", "not an answer forge knows: 'maybe' \\(the kinds are approve, reject"),
    ("", "x", "not an answer forge knows: ''"),
])
def test_a_value_that_does_not_fit_its_kind_is_refused_naming_both(kind, value, said):
    with pytest.raises(AnswerRefused, match=said):
        read_answer(kind, value)


def test_a_question_binds_the_answer_given_as_a_number_or_its_digits():
    assert read_answer("text", "hi").question == 0
    assert read_answer("text", "hi", question=3).question == 3
    assert read_answer("text", "hi", question="3").question == 3


@pytest.mark.parametrize("question", [0, "", "two", True, -1])
def test_a_question_that_is_not_a_number_of_one_or_more_is_refused(question):
    with pytest.raises(AnswerRefused, match="does not say which question it answers"):
        read_answer("text", "hi", question=question)


def test_a_refusal_names_what_the_caller_calls_the_value():
    with pytest.raises(UsageError, match=r"^--did-run is not JSON"):
        read_answer("did_run", "{oops", as_text=True, names={"value": "--did-run"})
