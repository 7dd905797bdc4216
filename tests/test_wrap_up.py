"""A wrap-up call before a budget ends a run (issue 51, item 4): `with_wrap_up` puts a
`wrap_up` state on each edge into the budget state; the policy is asked once more for its
answer (`LoopResult.wrap_up`), journaled, drawn and checked like any state. The model
policies' side is in tests/test_model_conformance.py (every provider, every mode)."""

import pytest

from forge import AgentLoop, Finish, Intent, Limits, UsageError, tool
from forge.check import check_loop
from forge.diagram import diagram_text
from forge.machine.loader import load_definition
from forge.records.usage import USAGE_KEY


@tool
def search(query: str) -> str:
    """Search."""
    return f"found {query}"


def spending(goal, state):
    """A policy that spends 60 tokens a call (as a model policy records usage)."""
    state.messages.append({"role": "assistant", "content": None, USAGE_KEY: {"prompt_tokens": 50,
                                                                               "completion_tokens": 10}})
    return Intent.call("search", query=f"q{len(state.observations)}")


class Wrapping:
    """`spending`, with a wrap-up that answers from what it found."""

    def __init__(self):
        self.wrapped = 0

    def __call__(self, goal, state):
        return spending(goal, state)

    def wrapping_up(self):
        def wrap(goal, state):
            self.wrapped += 1
            return Finish(f"found {len(state.observations)} things; stopped there")
        return wrap


WRAPPED = load_definition("single_agent").with_wrap_up()


def test_a_policy_out_of_budget_is_asked_once_more_and_its_answer_is_the_runs_wrap_up():
    policy = Wrapping()
    result = AgentLoop([search], policy, lambda o: False, definition=WRAPPED, limits=Limits(token_budget=100)).run("go")
    assert (result.reason, result.wrap_up, result.answer, policy.wrapped) == \
        ("budget_exhausted", "found 2 things; stopped there", None, 1)
    assert result.trace[-2].dest == "wrap_up" and result.trace[-1].trigger == "stop"


def test_a_policy_without_a_wrap_up_is_not_asked_and_the_run_ends_as_it_would():
    result = AgentLoop([search], spending, lambda o: False, definition=WRAPPED, limits=Limits(token_budget=100)).run("g")
    assert (result.reason, result.wrap_up) == ("budget_exhausted", None)
    assert "the policy has no wrapping_up()" in result.trace[-1].detail["wrap_up"]


def test_a_replay_answers_the_wrap_up_from_the_journal():
    policy = Wrapping()
    loop = AgentLoop([search], policy, lambda o: False, definition=WRAPPED, limits=Limits(token_budget=100))
    result = loop.run("go")
    again = loop.replay(result.journal)
    assert (again.wrap_up, again.trace) == (result.wrap_up, result.trace)


def test_the_wrap_up_state_is_drawn_and_the_definition_passes_forge_check():
    loop = AgentLoop([search], Wrapping(), lambda o: False, definition=WRAPPED, limits=Limits(token_budget=100))
    assert check_loop(loop).ok
    dot = diagram_text(WRAPPED, "dot")
    assert "wrap_up" in dot and "wrapped_up" in dot


def _without_budget_edges():
    from dataclasses import replace

    definition = load_definition("single_agent")
    return replace(definition, transitions=tuple(t for t in definition.transitions if t.dest != "budget_exhausted"))


@pytest.mark.parametrize(("made", "said"), [
    (lambda: load_definition("single_agent").with_wrap_up("nowhere"), "no terminal state 'nowhere'"),
    (lambda: WRAPPED.with_wrap_up("verified_success"), "has a state named 'wrap_up' already"),
    (lambda: _without_budget_edges().with_wrap_up(), "no edge of definition 'single_agent' goes into 'budget_exhausted'"),
])
def test_a_wrap_up_before_nothing_or_twice_is_refused_naming_why(made, said):
    with pytest.raises(UsageError, match=said):
        made()
