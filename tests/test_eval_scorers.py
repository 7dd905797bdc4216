"""forge's trajectory scorers, each on hand-made runs that should and should not pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("pydantic_evals")

from pydantic_evals.evaluators import EvaluationReason, EvaluatorContext
from pydantic_evals.otel._errors import SpanTreeRecordingError

from forge import AgentLoop, Finish, Intent, LoopState, Tool
from forge.agent.retry import TransientToolError
from forge.errors import UsageError
from forge.evals import (
    AnswerMatches,
    Budget,
    EndState,
    EvalRun,
    MaxRetries,
    NoSideEffectBeforeApproval,
    ToolCalls,
    Visits,
    run_case,
)
from forge.options import Retry


def scored(scorer: Any, run: EvalRun, inputs: Any = "the goal", expected: Any = None) -> EvaluationReason:
    context = EvaluatorContext(name="case", inputs=inputs, metadata=None, expected_output=expected, output=run,
                               duration=run.seconds, _span_tree=SpanTreeRecordingError("not recorded"),
                               attributes={}, metrics={})
    verdict = scorer.evaluate(context)
    assert isinstance(verdict, EvaluationReason)
    return verdict


def lookup(name: str = "lookup", side_effect: bool = False, fails: int = 0) -> Tool:
    failures = [fails]

    def handler(q: str) -> str:
        if failures[0]:
            failures[0] -= 1
            raise TransientToolError("busy")
        return q.upper()

    return Tool(name, {name}, handler, required={"q"}, side_effect=side_effect)


def run_of(calls: list[tuple[str, str]], answer: Any = "done", tools: list[Tool] | None = None,
           **options: Any) -> EvalRun:
    """A run that calls `calls` ((tool, q) pairs) one a step, then finishes with `answer`."""

    def policy(goal: str, state: LoopState) -> Any:
        done = len(state.observations)
        if done < len(calls):
            return Intent.call(calls[done][0], q=calls[done][1])
        return Finish(answer)

    names = sorted({name for name, _ in calls}) or ["lookup"]
    loop = AgentLoop(tools or [lookup(name) for name in names], policy, verify=lambda o: o.tool_name == "finish",
                     retry=Retry(base_delay=0, max_delay=0), **options)
    return run_case(loop, "case", "the goal")


def test_end_state_passes_on_the_reason_the_run_ended_in() -> None:
    verdict = scored(EndState("verified_success"), run_of([("lookup", "a")]))
    assert verdict.value is True
    assert "ended in verified_success" in str(verdict.reason)


def test_end_state_fails_on_another_reason_and_says_both() -> None:
    verdict = scored(EndState(reason="fatal_error", outcome="failure"), run_of([("lookup", "a")]))
    assert verdict.value is False
    assert verdict.reason == ("ended in verified_success (success); expected reason fatal_error, outcome failure")


def test_end_state_needs_a_reason_or_an_outcome() -> None:
    with pytest.raises(UsageError, match="reason, an outcome"):
        EndState()


def test_answer_matches_the_expected_output_exactly() -> None:
    run = run_of([], answer={"total": 3})
    assert scored(AnswerMatches(), run, expected={"total": 3}).value is True
    assert scored(AnswerMatches(), run, expected={"total": 4}).value is False


def test_answer_matches_fails_when_there_is_no_answer() -> None:
    loop = AgentLoop([lookup()], lambda goal, state: Intent.call("nothing", q="x"), verify=lambda o: False)
    verdict = scored(AnswerMatches("x"), run_case(loop, "case", "goal"))
    assert verdict.value is False
    assert str(verdict.reason).startswith("no answer: the conversation ended in capability_gap")


@dataclass
class Total:
    total: int
    items: list[str]


def test_answer_matches_a_typed_answer_given_as_plain_data() -> None:
    run = run_of([], answer={"total": 2, "items": ["a", "b"]}, output=Total)
    assert run.answer == Total(2, ["a", "b"])
    assert scored(AnswerMatches({"total": 2, "items": ["a", "b"]}, match="typed"), run).value is True
    assert scored(AnswerMatches({"total": 2, "items": ["a", "b"]}), run).value is False  # exact: a dict is no Total
    assert scored(AnswerMatches({"total": 2, "items": ["a"]}, match="typed"), run).value is False


def test_answer_matches_by_containing_the_expected_text() -> None:
    run = run_of([], answer="the index lists 3 notes")
    assert scored(AnswerMatches("3 notes", match="contains"), run).value is True
    assert scored(AnswerMatches("4 notes", match="contains"), run).value is False


def test_answer_matches_by_a_function_of_yours_which_may_score() -> None:
    run = run_of([], answer="abc")
    assert scored(AnswerMatches("abd", check=lambda answer, expected: sum(
        a == b for a, b in zip(answer, expected, strict=True)) / 3), run).value == pytest.approx(2 / 3)


def test_answer_matches_refuses_an_unknown_match() -> None:
    with pytest.raises(UsageError, match="exact, typed, contains"):
        AnswerMatches("x", match="fuzzy")


def test_tool_calls_as_a_set_score_one_for_exactly_the_tools_expected() -> None:
    run = run_of([("lookup", "a"), ("search", "b"), ("lookup", "c")])
    verdict = scored(ToolCalls(["search", "lookup"]), run)
    assert verdict.value == 1.0
    assert verdict.reason == "every tool expected was called, and no other"


def test_tool_calls_as_a_set_score_what_is_shared_over_all() -> None:
    run = run_of([("lookup", "a"), ("search", "b")])
    verdict = scored(ToolCalls(["lookup", "fetch"]), run)
    assert verdict.value == pytest.approx(1 / 3)  # {lookup} of {lookup, search, fetch}
    assert verdict.reason == "never called fetch; called search too"


def test_tool_calls_in_sequence_score_the_longest_common_order() -> None:
    run = run_of([("lookup", "a"), ("search", "b"), ("lookup", "c")])
    assert scored(ToolCalls(["lookup", "search", "lookup"], match="sequence"), run).value == 1.0
    verdict = scored(ToolCalls(["search", "lookup", "lookup", "fetch"], match="sequence"), run)
    assert verdict.value == pytest.approx(2 / 4)
    assert "called lookup → search → lookup" in str(verdict.reason)


def test_tool_calls_with_arguments_score_the_share_of_expected_calls_made() -> None:
    run = run_of([("lookup", "a"), ("lookup", "b")])
    full = scored(ToolCalls([{"tool": "lookup", "arguments": {"q": "b"}}], match="arguments"), run)
    assert full.value == 1.0
    half = scored(ToolCalls([{"tool": "lookup", "arguments": {"q": "a"}},
                             {"tool": "lookup", "arguments": {"q": "a"}}], match="arguments"), run)
    assert half.value == 0.5  # one call cannot match two expected ones
    assert half.reason == 'no call matched lookup({"q": "a"})'


def test_a_call_retried_is_one_tool_call() -> None:
    run = run_of([("lookup", "a")], tools=[lookup(fails=2)])
    assert run.retries == 2
    assert [call.tool for call in run.tool_calls] == ["lookup"]
    assert scored(ToolCalls(["lookup"], match="sequence"), run).value == 1.0


def test_tool_calls_refuse_an_expected_call_without_a_tool() -> None:
    with pytest.raises(UsageError, match="a tool name or"):
        ToolCalls([{"arguments": {}}], match="arguments")


def test_a_side_effect_run_after_its_approval_passes() -> None:
    run = run_of([("write", "a")], tools=[lookup("write", side_effect=True)], definition="approval",
                 approver=lambda request: True)
    assert scored(NoSideEffectBeforeApproval(), run).value is True


def test_a_side_effect_run_without_an_approval_fails_naming_it() -> None:
    run = run_of([("lookup", "a"), ("write", "b")], tools=[lookup(), lookup("write", side_effect=True)])
    verdict = scored(NoSideEffectBeforeApproval(), run)
    assert verdict.value is False
    assert verdict.reason == "ran without an approval: write at turn 1, transition 6"


def test_a_side_effect_refused_by_the_approver_never_ran() -> None:
    run = run_of([("write", "a")], tools=[lookup("write", side_effect=True)], definition="approval",
                 approver=lambda request: None)
    assert run.reason == "approval_required"
    assert scored(NoSideEffectBeforeApproval(), run).value is True


def test_max_retries_bounds_the_retries_of_every_call() -> None:
    run = run_of([("lookup", "a")], tools=[lookup(fails=2)])
    assert scored(MaxRetries(2), run).value is True
    verdict = scored(MaxRetries(1), run)
    assert verdict.value is False
    assert verdict.reason == "at most 2 retries of a call (lookup at turn 1, transition 2); allowed 1"


def test_visits_bound_how_often_the_path_enters_a_state() -> None:
    run = run_of([("lookup", "a"), ("lookup", "b")])
    assert scored(Visits("execute", at_least=2, at_most=2), run).value is True
    verdict = scored(Visits("execute", at_most=1), run)
    assert verdict.value is False
    assert verdict.reason == "entered execute 2 times; expected at most 1"


def test_budget_passes_within_its_bounds_and_names_what_went_over() -> None:
    def spending(goal: str, state: LoopState) -> Any:
        state.messages.append({"role": "assistant", "content": None,
                               "_usage": {"prompt_tokens": 40, "completion_tokens": 10}})
        return Intent.call("lookup", q="a") if not state.observations else Finish("ok")

    run = run_case(AgentLoop([lookup()], spending, verify=lambda o: o.tool_name == "finish"), "case", "goal")
    assert (run.steps, run.tokens) == (2, 100)
    assert scored(Budget(max_steps=2, max_tokens=100), run).value is True
    verdict = scored(Budget(max_steps=1, max_tokens=99), run)
    assert verdict.value is False
    assert verdict.reason == "over budget: steps 2 > 1; tokens 100 > 99"


def test_budget_needs_a_bound() -> None:
    with pytest.raises(UsageError, match="max_steps"):
        Budget()
