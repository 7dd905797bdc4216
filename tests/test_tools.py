import pytest

from forge import AgentLoop, Tool


def handler(**kwargs):
    return None


@pytest.mark.parametrize("name", ["", "   "])
def test_blank_tool_name_is_rejected(name):
    with pytest.raises(ValueError, match="name"):
        Tool(name, {"fs"}, handler)


def test_a_tool_without_capabilities_is_selected_by_name_only():
    """Issue 24 item 23 reverses an earlier refusal: Intent.call names the tool, so a tool
    needs no capabilities to be called; no intent's capabilities ever select it."""
    from forge import AgentLoop, Finish, Intent, ScriptedPolicy

    named = Tool("t", set(), lambda: "ran")
    by_name = AgentLoop([named], ScriptedPolicy([Intent.call("t"), Finish("ok")]), lambda o: True).run("call t")
    assert by_name.state.observations[0].payload == "ran"
    by_capability = AgentLoop([named], ScriptedPolicy([Intent({"fs"})]), lambda o: True).run("call something")
    assert by_capability.reason == "capability_gap"


def test_argument_both_required_and_optional_is_rejected():
    with pytest.raises(ValueError, match="both required and optional: path"):
        Tool("t", {"fs"}, handler, required={"path"}, optional={"path"})


def test_capabilities_given_as_a_string_are_rejected():
    with pytest.raises(ValueError, match="not a string"):
        Tool("t", "fs", handler)


def test_sets_are_stored_frozen():
    tool = Tool("t", ["fs"], handler, required=["path"])
    assert tool.capabilities == frozenset({"fs"}) and tool.required == frozenset({"path"})


def test_duplicate_tool_names_are_rejected_when_the_loop_is_built():
    with pytest.raises(ValueError, match="duplicate tool names: t"):
        AgentLoop([Tool("t", {"a"}, handler), Tool("t", {"b"}, handler)], lambda g, s: None, lambda o: True)


def test_loop_without_tools_is_rejected():
    with pytest.raises(ValueError, match="at least one tool"):
        AgentLoop([], lambda g, s: None, lambda o: True)
