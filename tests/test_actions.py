import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge.agent.actions import (
    Action,
    AmbiguousToolChoice,
    NoMatchingTool,
    ToolSpec,
    select_action,
)

READ = ToolSpec("read_file", frozenset({"fs", "read"}))
WRITE = ToolSpec("write_file", frozenset({"fs", "write"}))
FETCH = ToolSpec("fetch", frozenset({"net", "read"}))


def test_tool_covering_most_required_capabilities_is_selected():
    action = select_action("read notes", {"fs", "read"}, [WRITE, READ, FETCH])
    assert action == Action("read_file", action.reason)


def test_reason_names_the_winner_and_its_score():
    action = select_action("read notes", {"fs", "read"}, [WRITE, READ])
    assert "read_file" in action.reason
    assert "2 of 2" in action.reason


@pytest.mark.parametrize("tools", [[READ, FETCH], [FETCH, READ]])
def test_top_two_tools_tied_raise_ambiguous_in_either_list_order(tools):
    with pytest.raises(ValueError, match="ambiguous tool choice requires clarification"):
        select_action("read something", {"read"}, tools)


def test_ambiguity_error_lists_the_tied_tools_and_score():
    with pytest.raises(AmbiguousToolChoice) as caught:
        select_action("read something", {"read"}, [READ, FETCH, WRITE])
    assert caught.value.tied == ("fetch", "read_file")
    assert caught.value.score == 1


def test_tie_below_the_top_does_not_matter():
    a = ToolSpec("a", frozenset({"x"}))
    b = ToolSpec("b", frozenset({"x"}))
    best = ToolSpec("best", frozenset({"x", "y"}))
    assert select_action("goal", {"x", "y"}, [a, b, best]).tool_name == "best"


def test_no_matching_capability_raises_no_tool():
    with pytest.raises(NoMatchingTool, match="no tool"):
        select_action("send mail", {"smtp"}, [READ, WRITE])


def test_empty_tool_list_raises_no_tool():
    with pytest.raises(NoMatchingTool, match="no tool"):
        select_action("anything", {"fs"}, [])


def test_ambiguity_and_no_match_are_distinct_value_errors():
    assert issubclass(AmbiguousToolChoice, ValueError)
    assert issubclass(NoMatchingTool, ValueError)
    assert not issubclass(AmbiguousToolChoice, NoMatchingTool)
    assert not issubclass(NoMatchingTool, AmbiguousToolChoice)


@pytest.mark.parametrize("goal", ["", "   ", "\n\t"])
def test_blank_goal_is_rejected(goal):
    with pytest.raises(ValueError, match="goal"):
        select_action(goal, {"fs"}, [READ])


def test_duplicate_tool_names_are_rejected():
    twin = ToolSpec("read_file", frozenset({"other"}))
    with pytest.raises(ValueError, match="duplicate tool names: read_file"):
        select_action("read", {"read"}, [READ, twin])


def test_tool_spec_and_action_are_frozen():
    with pytest.raises(AttributeError):
        READ.name = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        Action("a", "b").tool_name = "c"  # type: ignore[misc]


capabilities = st.frozensets(st.sampled_from("abcdef"), max_size=4)
tool_lists = st.lists(
    st.builds(ToolSpec, st.text("xyz", min_size=1, max_size=3), capabilities),
    max_size=6,
    unique_by=lambda tool: tool.name,
)


def _outcome(goal, required, tools):
    try:
        return select_action(goal, required, tools).tool_name
    except AmbiguousToolChoice as error:
        return ("ambiguous", error.tied)
    except NoMatchingTool:
        return "no tool"


@given(tool_lists, capabilities, st.randoms())
def test_selection_never_depends_on_list_order(tools, required, rnd):
    shuffled = list(tools)
    rnd.shuffle(shuffled)
    assert _outcome("goal", required, tools) == _outcome("goal", required, shuffled)


def _expected(required, tools):
    """The outcome the seed's contract gives, worked out apart from select_action."""
    scores = {tool.name: len(tool.capabilities & required) for tool in tools}
    best = max(scores.values(), default=0)
    if best == 0:
        return "no tool"
    tied = tuple(sorted(name for name, score in scores.items() if score == best))
    return tied[0] if len(tied) == 1 else ("ambiguous", tied)


@given(tool_lists, capabilities)
def test_selected_tool_strictly_outscores_every_other(tools, required):
    outcome = _outcome("goal", required, tools)
    assert outcome == _expected(required, tools)  # a selector that always refused would fail here
    if isinstance(outcome, str) and outcome != "no tool":
        scores = {tool.name: len(tool.capabilities & required) for tool in tools}
        winner = scores.pop(outcome)
        assert all(winner > other for other in scores.values())


def test_the_selection_properties_meet_every_outcome():
    """The generated cases reach a selection, a tie and no match (so the properties above
    say something of each)."""
    a, b = ToolSpec("x", frozenset("ab")), ToolSpec("y", frozenset("a"))
    assert _outcome("goal", frozenset("ab"), [a, b]) == "x"
    assert _outcome("goal", frozenset("a"), [a, b]) == ("ambiguous", ("x", "y"))
    assert _outcome("goal", frozenset("f"), [a, b]) == "no tool"
