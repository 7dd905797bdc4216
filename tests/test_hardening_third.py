"""Issue 24's reproductions (hardening, third pass), one test each, named by item."""

from __future__ import annotations

from typing import Any

from forge import AgentLoop, Finish, ScriptedPolicy, tool


@tool
def noop() -> str:
    """Do nothing."""
    return ""


def _finishing_loop(verify: Any) -> AgentLoop:
    return AgentLoop([noop], ScriptedPolicy([Finish("done")]), verify)


def test_item_19_a_verify_with_a_defaulted_parameter_is_called_with_the_observation_alone():
    seen: list[Any] = []

    def verify(observation, expected=1):
        seen.append(expected)
        return True

    assert _finishing_loop(verify).run("finish").reason == "verified_success" and seen == [1]


def test_item_19_a_verify_method_is_called_with_the_observation_alone():
    class Checker:
        def verify(self, observation):
            return isinstance(observation.payload, Finish)

    assert _finishing_loop(Checker().verify).run("finish").reason == "verified_success"


def test_item_19_a_verify_that_needs_the_state_still_gets_it():
    class Checker:
        def __call__(self, observation, state):
            return len(state.observations) == 1

    assert _finishing_loop(Checker()).run("finish").reason == "verified_success"
    assert _finishing_loop(lambda o, state: state is not None).run("finish").reason == "verified_success"
