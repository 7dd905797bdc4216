"""The shapes a typed answer may have (`forge.output`), each as the docs promise it: a JSON
Schema named by its title, refused with the paths it refuses; a shape that is not an object
wrapped in `answer` when asked of a model; type expressions (`int | None`, `Literal`); JSON
text read as JSON unless the shape is text. (Written from the mutation run's survivors.)"""

from typing import Literal

import pytest

pytest.importorskip("pydantic", reason="typed answers are validated by pydantic: the schema extra")
pytest.importorskip("jsonschema", reason="a JSON Schema output is checked by jsonschema: the schema extra")

from forge.output import ANSWER_FIELD, AnswerInvalid, Output

WEATHER = {"title": "Weather", "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_a_json_schema_output_is_named_by_its_title_and_keeps_its_schema():
    output = Output.of(WEATHER)
    assert (output.name, dict(output.schema), output.wrapped) == ("Weather", WEATHER, False)
    assert Output.of({"type": "object"}).name == "answer"


def test_a_json_schema_output_refuses_naming_the_shape_each_path_and_the_answer():
    with pytest.raises(AnswerInvalid) as refused:
        Output.of(WEATHER).validated({"city": 3})
    assert refused.value.shape == "Weather" and refused.value.answer == {"city": 3}
    assert [violation.path for violation in refused.value.violations] == ["city"]
    assert str(refused.value).startswith("the answer is not a valid Weather: city: ")


def test_a_json_schema_output_reads_json_text_and_keeps_the_value_it_validates():
    assert Output.of(WEATHER).validated('{"city": "Paris"}') == {"city": "Paris"}


def test_a_shape_that_is_not_an_object_is_wrapped_in_answer_when_asked_of_a_model():
    number = Output.of({"type": "integer"})
    assert number.wrapped and number.for_model()["properties"] == {ANSWER_FIELD: {"type": "integer"}}
    assert number.from_model({ANSWER_FIELD: 4}) == 4
    assert not Output.of(WEATHER).wrapped and Output.of(WEATHER).for_model() == WEATHER


def test_type_expressions_are_shapes_pydantic_validates():
    assert Output.of(int | None).validated("null") is None and Output.of(int | None).validated("7") == 7
    choice = Output.of(Literal["red", "green"])
    assert choice.validated("red") == "red"
    with pytest.raises(AnswerInvalid):
        choice.validated("blue")


def test_json_text_is_read_as_json_unless_the_shape_is_text():
    assert Output.of(list[int]).validated("[1, 2]") == [1, 2]
    assert Output.of(str).validated("[1, 2]") == "[1, 2]"
    with pytest.raises(AnswerInvalid):
        Output.of(list[int]).validated("not json")


def test_a_json_schema_output_names_the_whole_answer_when_the_answer_itself_is_refused():
    with pytest.raises(AnswerInvalid) as refused:
        Output.of(WEATHER).validated(["Paris"])
    assert [violation.path for violation in refused.value.violations] == ["(answer)"]


def test_a_json_schema_output_that_refers_outside_itself_is_named_as_the_outputs_schema():
    elsewhere = {"title": "Remote", "$ref": "https://example.com/weather.json"}
    with pytest.raises(AnswerInvalid) as refused:
        Output.of(elsewhere).validated({"city": "Paris"})
    [violation] = refused.value.violations
    assert violation.path == "(answer)"
    assert violation.message.startswith("the output's schema refers to 'https://example.com/weather.json'")
