"""Typed tools: schemas from signatures, arguments checked against JSON Schema before any
handler runs, tools chosen by name."""

from dataclasses import dataclass
from typing import Annotated, Literal

import pytest
from builders import Recorder, intent, scripted_loop
from pydantic import Field
from typing_extensions import TypedDict

from forge import AgentLoop, ArgumentContractError, Intent, ScriptedPolicy, Tool, UnknownTool, tool
from forge.agent.execution import execute_tool


class Filter(TypedDict):
    kind: Literal["note", "task"]
    min_words: int


@dataclass
class Page:
    number: int
    size: int = 20


def search(query: str, limit: Annotated[int, Field(ge=1, le=100)] = 10, tags: list[str] | None = None,
           mode: Literal["fast", "deep"] = "fast", filter: Filter | None = None, page: Page | None = None) -> str:
    """Search the notes for `query`.

    The second paragraph is not part of the description.
    """
    return query


SEARCH = Tool.from_function(search)


def test_a_function_tools_schema_matches_its_signature():
    assert (SEARCH.name, SEARCH.capabilities, SEARCH.description) == ("search", {"search"}, "Search the notes for `query`.")
    assert SEARCH.required == {"query"} and SEARCH.optional == {"limit", "tags", "mode", "filter", "page"}
    schema = SEARCH.schema
    assert schema["required"] == ["query"] and schema["additionalProperties"] is False
    properties = schema["properties"]
    assert set(properties) == {"query", "limit", "tags", "mode", "filter", "page"}
    assert properties["query"]["type"] == "string"
    assert (properties["limit"]["type"], properties["limit"]["minimum"], properties["limit"]["maximum"]) == ("integer", 1, 100)
    assert properties["mode"]["enum"] == ["fast", "deep"]
    assert {"type": "array", "items": {"type": "string"}} in properties["tags"]["anyOf"]


@pytest.mark.parametrize(("arguments", "path", "why"), [
    ({"query": 3}, "query", "3 is not of type 'string'"),
    ({"query": "x", "limit": "10"}, "limit", "'10' is not of type 'integer'"),
    ({"query": "x", "limit": 0}, "limit", "0 is less than the minimum of 1"),
    ({"query": "x", "tags": ["a", 2]}, "tags[1]", "2 is not of type 'string'"),
    ({"query": "x", "mode": "slow"}, "mode", "'slow' is not one of ['fast', 'deep']"),
    ({"query": "x", "filter": {"kind": "note", "min_words": "many"}}, "filter.min_words", "'many' is not of type 'integer'"),
    ({"query": "x", "page": {"number": 1, "size": "big"}}, "page.size", "'big' is not of type 'integer'"),
])
def test_a_wrong_value_is_refused_before_the_handler_with_its_path_named(arguments, path, why):
    handler = Recorder()
    contract = Tool("search", {"search"}, handler, schema=SEARCH.schema).contract
    with pytest.raises(ArgumentContractError) as raised:
        execute_tool(contract, arguments)
    assert handler.calls == []
    assert any(v.path == path and why in v.message for v in raised.value.violations), raised.value.violations
    assert f"{path}: " in str(raised.value) and why in str(raised.value)


def test_nested_object_mistakes_name_the_nested_path():
    schema = {"type": "object", "properties": {"filter": {"type": "object", "properties": {
        "kind": {"type": "string"}}, "additionalProperties": False}}, "additionalProperties": False}
    contract = Tool("t", {"t"}, Recorder(), schema=schema).contract
    with pytest.raises(ArgumentContractError) as raised:
        execute_tool(contract, {"filter": {"kind": 1, "extra": True}})
    assert [(v.path, v.message) for v in raised.value.violations] == [
        ("filter", "Additional properties are not allowed ('extra' was unexpected)"),
        ("filter.kind", "1 is not of type 'string'"),
    ]


def test_every_violation_is_reported_at_once():
    with pytest.raises(ArgumentContractError) as raised:
        execute_tool(SEARCH.contract, {"query": 1, "limit": "x", "mode": "slow"})
    assert [v.path for v in raised.value.violations] == ["limit", "mode", "query"]


def test_missing_and_unexpected_arguments_are_still_reported_first_with_the_seed_message():
    with pytest.raises(ArgumentContractError, match=r"^arguments for search break its contract; missing: query; "
                                                   r"unexpected: sudo$") as raised:
        execute_tool(SEARCH.contract, {"sudo": True, "limit": "wrong type too"})
    assert raised.value.violations == ()


def test_in_a_loop_a_wrongly_typed_call_is_a_retryable_observation_and_the_handler_never_ran():
    handler = Recorder("found")

    def find(query: str, limit: int = 5) -> str:
        return handler(query=query, limit=limit)

    loop = AgentLoop([Tool.from_function(find)],
                     ScriptedPolicy([Intent.call("find", query="x", limit="5"), Intent.call("find", query="x", limit=5)]),
                     verify=lambda o: o.status == "ok")
    result = loop.run("find x")
    first, _ = result.state.observations
    assert first.status == "retryable_error" and "limit: '5' is not of type 'integer'" in str(first.payload)
    assert handler.calls == [{"query": "x", "limit": 5}]
    assert result.reason == "verified_success"


def test_intent_call_selects_exactly_the_named_tool_even_where_capabilities_would_tie():
    read, fetch = Tool("read", {"read"}, Recorder("r")), Tool("fetch", {"read"}, Recorder("f"))
    loop = AgentLoop([read, fetch], ScriptedPolicy([Intent.call("fetch")]), verify=lambda o: True)
    result = loop.run("goal")
    assert result.reason == "verified_success" and result.state.observations[0].tool_name == "fetch"
    assert scripted_loop([read, fetch], [intent("read")]).run("goal").reason == "clarification_required"


def test_intent_call_with_an_unknown_name_ends_in_capability_gap_naming_the_closest_tools():
    loop = AgentLoop([SEARCH, Tool("read_file", {"fs"}, Recorder()), Tool("write_file", {"fs"}, Recorder())],
                     ScriptedPolicy([Intent.call("raed_file", path="a")]), verify=lambda o: True)
    result = loop.run("goal")
    assert result.reason == "capability_gap"
    assert isinstance(result.error, UnknownTool) and result.error.suggestions[0] == "read_file"
    assert "no tool named 'raed_file'; the closest known tools are: read_file" in str(result.error)
    assert result.trace[0].detail == {"unknown_tool": "raed_file", "suggestions": list(result.error.suggestions),
                                      "arguments": '{"path": "a"}'}


def test_the_tool_decorator_keeps_the_function_callable_and_takes_options():
    @tool
    def double(n: int) -> int:
        """Double n."""
        return 2 * n

    @tool(capabilities={"fs", "write"}, side_effect=True, name="save")
    def write(path: str, text: str) -> int:
        return len(text)

    assert double(4) == 8 and isinstance(double, Tool) and double.description == "Double n."
    assert (write.name, write.capabilities, write.side_effect) == ("save", {"fs", "write"}, True)


@pytest.mark.parametrize(("function", "message"), [
    (lambda *paths: None, r"\*paths cannot be passed by name"),
    (lambda **options: None, r"\*\*options cannot be passed by name"),
])
def test_functions_whose_arguments_cannot_be_named_are_refused(function, message):
    with pytest.raises(ValueError, match=message):
        Tool.from_function(function, name="f")


def test_a_tool_with_an_explicit_schema_takes_required_and_optional_from_it():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]}
    declared = Tool("t", {"t"}, Recorder(), schema=schema)
    assert (declared.required, declared.optional) == ({"a"}, {"b"})


def test_an_invalid_schema_is_refused_when_the_tool_is_made():
    with pytest.raises(ValueError, match="not valid JSON Schema at properties.a.type"):
        Tool("t", {"t"}, Recorder(), schema={"type": "object", "properties": {"a": {"type": "integer-ish"}}})


def test_tools_declared_the_old_way_keep_working():
    plain = Tool("read_file", {"fs", "read"}, Recorder("text"), required={"path"})
    assert plain.schema is None and execute_tool(plain.contract, {"path": "a"}).value == "text"
    assert hash(plain) == hash(Tool("read_file", {"fs", "read"}, plain.handler, required={"path"}))


@pytest.mark.parametrize("make", [
    lambda: tool(sid_effect=True),
    lambda: Tool.from_function(search, retryable=True),
], ids=["decorator", "from_function"])
def test_a_tool_option_misspelt_is_refused_and_named_before_any_tool_is_made(make):
    with pytest.raises(TypeError, match=r"unknown tool option '(sid_effect|retryable)'; the options are capabilities, "
                                        r"side_effect, name, errors, is_error, on_crash, repeatable, raises, inline"):
        make()


def test_the_options_a_decorator_takes_reach_its_tool():
    def refuse(value: str) -> bool:
        return value == "no"

    @tool(capabilities={"notes"}, side_effect=True, name="write", errors="report", is_error=refuse, on_crash="ask",
          repeatable=True, raises=(KeyError,), inline=True)
    def write_note(text: str) -> str:
        return text

    assert (write_note.name, write_note.capabilities, write_note.side_effect) == ("write", {"notes"}, True)
    assert (write_note.errors, write_note.is_error, write_note.on_crash, write_note.repeatable, write_note.raises,
            write_note.inline) == ("report", refuse, "ask", True, (KeyError,), True)
