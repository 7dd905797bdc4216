"""AgentLoop's arguments: tools, policy, verify, max_steps, definition, stages, approver,
registry, and four grouped values (`Limits`, `Retry`, `Clocks`, `Hooks`); the flat names of
earlier releases are taken with a DeprecationWarning naming their new home."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from builders import intent, scripted_loop, tool

from forge import AgentLoop, Clocks, Hooks, Limits, LoopObserver, Retry, ScriptedPolicy, TransientToolError
from forge.machine.run import Run


def test_agent_loop_takes_at_most_thirteen_parameters():
    """Twelve since the grouped values (issue 32), and `output`, the typed answer's shape,
    which issue 33 spells as a keyword of AgentLoop itself."""
    named = [p for p in inspect.signature(AgentLoop).parameters.values() if p.kind is not p.VAR_KEYWORD]
    assert len(named) <= 13, [p.name for p in named]
    assert named[-1].name == "output"


def test_a_run_has_at_most_twelve_fields():
    assert len(dataclasses.fields(Run)) <= 12, [f.name for f in dataclasses.fields(Run)]


def test_a_flat_name_still_works_and_warns_naming_its_group():
    with pytest.warns(DeprecationWarning, match=r"repeat_limit=\.\.\.\) is deprecated: pass limits=Limits"):
        loop = scripted_loop([tool("a")], [intent("a")] * 5, repeat_limit=2)
    assert loop.run("goal").reason == "repeated_action"
    assert loop.options.limits == Limits(repeat_limit=2)


def test_the_grouped_value_runs_the_same_as_the_flat_name_did():
    grouped = scripted_loop([tool("a")], [intent("a")] * 5, limits=Limits(repeat_limit=2)).run("goal")
    with pytest.warns(DeprecationWarning):
        flat = scripted_loop([tool("a")], [intent("a")] * 5, repeat_limit=2).run("goal")
    assert (grouped.reason, grouped.steps, grouped.trace) == (flat.reason, flat.steps, flat.trace)


def test_a_flat_name_given_with_its_group_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"both limits= and repeat_limit="):
        scripted_loop([tool("a")], [intent("a")], limits=Limits(), repeat_limit=2)


def test_an_unknown_argument_is_refused_naming_it():
    with pytest.raises(TypeError, match="repeat_limt"):
        scripted_loop([tool("a")], [intent("a")], repeat_limt=2)


def test_a_group_given_as_something_else_is_refused_naming_the_value_it_takes():
    with pytest.raises(TypeError, match=r"limits=\.\.\.\) takes a forge\.Limits, got dict"):
        scripted_loop([tool("a")], [intent("a")], limits={"repeat_limit": 2})


@pytest.mark.parametrize(("make", "named"), [
    (lambda: Limits(repeat_limit=0), "repeat_limit"),
    (lambda: Limits(token_budget=-5), "token_budget"),
    (lambda: Limits(repeat_by="tools"), "repeat_by"),
    (lambda: Limits(max_parallel=0), "max_parallel"),
    (lambda: Limits(max_parallel=-1), "max_parallel"),
    (lambda: Limits(max_parallel=True), "max_parallel"),
    (lambda: Limits(max_parallel=2.5), "max_parallel"),
    (lambda: Retry(max_attempts=0), "max_attempts"),
    (lambda: Retry(deadline=-1), "deadline"),
    (lambda: Hooks(redact="mask"), "redact"),
    (lambda: Hooks(codec=object()), "codec"),
])
def test_each_value_refuses_a_bad_field_when_made_naming_it(make, named):
    with pytest.raises(ValueError, match=named):
        make()


def test_clocks_refuse_what_is_not_callable_naming_it():
    with pytest.raises(TypeError, match=r"Clocks\(sleep=\.\.\.\)"):
        Clocks(sleep=0.5)


def test_retry_and_clocks_shape_the_wait_between_attempts():
    waited: list[float] = []
    calls = iter([TransientToolError("busy"), "ok"])

    def flaky():
        value = next(calls)
        if isinstance(value, Exception):
            raise value
        return value

    loop = AgentLoop([tool("a", handler=flaky)], ScriptedPolicy([intent("a")]), lambda o: True,
                     retry=Retry(max_attempts=2, base_delay=0.5), clocks=Clocks(sleep=waited.append, random=lambda: 1.0))
    assert loop.run("goal").reason == "verified_success"
    assert waited == [0.5]


def test_replace_with_a_flat_name_changes_only_that_field_of_its_group():
    class Seen(LoopObserver):
        def __init__(self) -> None:
            self.runs = 0

        def run_started(self, run) -> None:
            self.runs += 1

    def redact(tool_name, field, value):
        return value

    seen = Seen()
    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True, hooks=Hooks(redact=redact))
    with pytest.warns(DeprecationWarning, match="hooks=Hooks"):
        watched = loop.replace(observers=[seen])
    assert (watched.options.hooks.redact, watched.options.hooks.observers) == (redact, (seen,))
    watched.run("goal")
    assert seen.runs == 1


def test_replace_with_a_group_and_a_plain_argument_keeps_the_rest():
    loop = scripted_loop([tool("a")], [intent("a")], max_steps=3, limits=Limits(repeat_limit=2))
    changed = loop.replace(max_steps=5, retry=Retry(max_attempts=4))
    assert (changed.max_steps, changed.max_attempts, changed.repeat_limit) == (5, 4, 2)


def test_the_facts_a_stage_may_change_are_the_runs_facts_typed_as_there():
    from forge.machine.run import RunCounts, RunFacts
    from forge.records.outcome import CountChanges, FactChanges

    assert FactChanges.__optional_keys__ == {f.name for f in dataclasses.fields(RunFacts)}
    assert CountChanges.__optional_keys__ <= {f.name for f in dataclasses.fields(RunCounts)}
