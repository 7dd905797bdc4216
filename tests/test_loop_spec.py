"""A loop is one value (issue 49, item 1): `AgentLoop` is a face over a frozen `LoopSpec`,
checked once when made; replays and forks work on any loop through a protocol (its spec),
and a run is started from one `RunStart` value and driven on the spec alone
(`forge.running`)."""

import dataclasses
import warnings

import pytest
from builders import intent, scripted_loop, tool

from forge import AgentLoop, Finish, Intent, ScriptedPolicy
from forge.errors import UsageError, WrongType
from forge.options import Grouped, Limits
from forge.running import RunStart, complete, finish, started
from forge.running.replaying import ForkPoint, fork, replay
from forge.spec import LoopSpec


def _shape(result):
    return [(r.source, r.trigger, r.dest) for r in result.trace]


def _copying():
    def copy(goal, state):
        done = len(state.observations)
        return Intent.call("read", path="ab"[done]) if done < 2 else Finish("done")

    return AgentLoop([tool("read", required={"path"})], copy, lambda o: o.tool_name == "finish")


def test_a_loops_spec_is_frozen():
    loop = _copying()
    assert isinstance(loop.spec, LoopSpec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        loop.spec.tools = ()  # type: ignore[misc]


def test_a_loop_made_of_a_spec_runs_as_the_loop_made_of_its_arguments():
    steps = [intent("a"), intent("b")]
    spec = LoopSpec.of([tool("a"), tool("b")], ScriptedPolicy(steps), lambda o: o.tool_name == "b", 4)
    made = AgentLoop.of(spec).run("goal")
    given = scripted_loop([tool("a"), tool("b")], steps, verify=lambda o: o.tool_name == "b", max_steps=4).run("goal")
    assert (made.reason, _shape(made)) == (given.reason, _shape(given)) == ("verified_success", _shape(given))


@pytest.mark.parametrize(("arguments", "words"), [
    ({"tools": []}, "AgentLoop needs at least one tool"),
    ({"approver": lambda request: True}, "never asks for approvals"),
    ({"max_steps": 0}, "max_steps"),
    ({"verify": "yes"}, "verify must be callable"),
])
def test_a_spec_refuses_what_a_loop_refuses_in_the_same_words(arguments, words):
    given = {"tools": [tool("a")], "policy": ScriptedPolicy([intent("a")]), "verify": lambda o: True, **arguments}
    with pytest.raises(UsageError, match=words) as from_spec:
        LoopSpec.of(**given)
    with pytest.raises(UsageError) as from_loop:
        AgentLoop(**given)
    assert str(from_spec.value) == str(from_loop.value)


def test_replacing_makes_a_new_spec_and_leaves_the_loops_own_as_it_was():
    loop = _copying()
    shorter = loop.replace(max_steps=2, limits=Limits(repeat_limit=5))
    assert (loop.max_steps, loop.repeat_limit) == (8, 3)
    assert (shorter.max_steps, shorter.repeat_limit) == (2, 5)
    assert shorter.spec.given["policy"] is loop.spec.given["policy"]
    assert shorter.run("copy").reason == "step_budget_exhausted"


def test_a_spec_made_again_keeps_what_was_given_and_checks_it_again():
    spec = _copying().spec
    with pytest.raises(UsageError, match="max_steps"):
        spec.replaced(max_steps=0)
    assert spec.replaced(options=Grouped(limits=Limits(repeat_limit=1))).config.controller.repeat_limit == 1


def test_a_lowered_budget_is_the_runs_and_a_larger_one_the_loops():
    spec = _copying().spec
    assert spec.lowered(3, None).controller.max_steps == 3
    assert spec.lowered(30, None).controller.max_steps == 8
    assert (spec.lowered(None, 100).token_budget, spec.config.token_budget) == (100, None)


def test_a_handoff_to_something_with_no_spec_is_refused():
    from forge.machine.loader import load_definition

    handing = load_definition("single_agent").with_handoffs("billing")
    with pytest.raises(UsageError, match=r"handoffs\['billing'\] must be an AgentLoop, got object"):
        LoopSpec.of([tool("a")], ScriptedPolicy([]), lambda o: True, definition=handing, handoffs={"billing": object()})


class _Face:
    """A loop of someone else's making: a spec, nothing else of AgentLoop's."""

    def __init__(self, loop):
        self.spec = loop.spec


def test_a_replay_and_a_fork_work_on_anything_with_a_spec():
    loop = _copying()
    recorded = loop.run("copy")
    again = replay(_Face(loop), recorded.journal, RunStart(None))
    assert (again.reason, _shape(again)) == (recorded.reason, _shape(recorded))
    forked = fork(_Face(loop), ForkPoint(recorded, 3), RunStart(None))
    assert forked.journal.forked_from.transition == 3 and forked.reason == recorded.reason


def test_a_run_is_driven_on_the_spec_alone():
    loop = _copying()
    run = started(loop.spec, RunStart("copy"))
    complete(loop.spec, run)
    result = finish(loop.spec, run)
    assert (result.reason, _shape(result)) == ("verified_success", _shape(loop.run("copy")))


def test_a_runs_plumbing_is_one_value_the_loops_methods_hand_on():
    loop = _copying()
    run = started(loop.spec, RunStart("copy", run_id="r-1", max_steps=2))
    assert (run.trace.run_id, run.config.controller.max_steps, run.goal) == ("r-1", 2, "copy")
    by_method = loop.start(RunStart("copy", run_id="r-1", max_steps=2))
    assert (by_method.trace.run_id, by_method.config.controller.max_steps) == ("r-1", 2)


def test_a_loop_runs_a_run_start_as_it_runs_a_goal():
    loop = _copying()
    assert _shape(loop.run(RunStart("copy"))) == _shape(loop.run("copy"))
    assert loop.run(RunStart("copy", max_steps=1)).reason == "step_budget_exhausted"


def test_a_stream_runs_a_run_start_as_run_does():
    events = list(_copying().stream(RunStart("copy", max_steps=1)))
    assert events[-1].result.reason == "step_budget_exhausted"


def test_the_plumbing_keywords_of_an_earlier_forge_are_taken_with_a_deprecation_warning():
    loop = _copying()
    with pytest.warns(DeprecationWarning, match=r"AgentLoop.run\(max_steps=...\) is deprecated.*RunStart"):
        result = loop.run("copy", max_steps=1)
    assert result.reason == "step_budget_exhausted"


def test_a_goal_observers_state_and_run_id_are_no_plumbing_and_warn_of_nothing():
    loop = _copying()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loop.start("copy", (), None, "r-2").trace.run_id == "r-2"


def test_a_run_start_with_arguments_beside_it_is_refused_naming_them():
    loop = _copying()
    with pytest.raises(UsageError, match="run_id, max_steps given beside it: put them in the RunStart"):
        loop.run(RunStart("copy"), run_id="r-3", max_steps=2)


def test_a_keyword_that_is_no_part_of_a_runs_start_is_refused_naming_it():
    with pytest.raises(WrongType, match=r"AgentLoop.run\(\) got an unexpected keyword argument 'max_step'"):
        _copying().run("copy", max_step=2)


def test_a_run_start_is_checked_when_the_run_is_started_naming_what_is_wrong():
    loop = _copying()
    with pytest.raises(UsageError, match="goal must be a non-blank string"):
        started(loop.spec, RunStart(None))
    with pytest.raises(UsageError, match="run_id must be a non-blank string, got ' '"):
        started(loop.spec, RunStart("copy", run_id=" "))
