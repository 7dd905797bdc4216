"""select_tool: ask the policy for an intent (`select_action` picks the one tool that fits), its
final answer, or its question to the user; stop first when the run's token budget is spent.
Several intents at once are calls to make together where they have no side effects
(`_batched`). Verdicts: `Selection`."""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import replace
from enum import StrEnum
from functools import lru_cache
from typing import Any

from forge.agent.actions import (
    Action,
    AmbiguousToolChoice,
    NoMatchingTool,
    ToolSpec,
    UnknownTool,
    select_action,
    select_named,
)
from forge.agent.stopping import StopController, StopReason
from forge.bounded import TooLarge, checked
from forge.errors import UsageError, WrongType
from forge.machine.catalog import ActionSpec, GuardSpec
from forge.machine.run import Run
from forge.machine.stages.call_tool import CallOutcome
from forge.machine.stages.record_observation import repeat_key
from forge.output import AnswerInvalid
from forge.policy import ASK, FINISH, Ask, Finish, Handoff, Intent
from forge.records.abstract import AbstractRun
from forge.records.effects import Call, Steps
from forge.records.journal import DecidedAsCode
from forge.records.outcome import CountChanges, FactChanges, StageOutcome
from forge.records.tally import TimeBudgetExhausted, WorkingTime
from forge.records.trace import ARGUMENTS_LIMIT, PAYLOAD_LIMIT, capped, error_text, quoted, redacted_messages, summary
from forge.records.usage import BudgetExhausted, usage_of

__all__ = ['GUARDS', 'SPEC', 'Selection', 'chosen_tool', 'dropped_calls']


class Selection(StrEnum):
    """select_tool's verdicts."""

    SELECTED = "selected"
    FINISHED = "finished"
    AMBIGUOUS = "ambiguous"
    NO_TOOL = "no_tool"
    POLICY_ERROR = "policy_error"
    ASKED = "asked"
    BUDGET_EXHAUSTED = "budget_exhausted"
    ANSWER_INVALID = "answer_invalid"
    BATCHED = "batched"


OPTIONAL = frozenset({Selection.ASKED, Selection.BUDGET_EXHAUSTED, Selection.ANSWER_INVALID, Selection.BATCHED})
"""The verdicts only a loop that opts in meets (a policy that asks, a token budget, an
output shape, calls asked for at once): a
definition written before them need not handle them (see `ActionSpec.optional`)."""


def _select_tool(run: Run) -> Steps[StageOutcome]:
    planned = run.facts.plan
    outcome = yield from (_selected(run) if run.facts.pinned is None else _pinned(run))
    if not planned and not outcome.facts.get("plan"):
        return outcome
    return (yield from _kept_to_plan(run, planned, outcome))


_ENDS_RUN = frozenset({Selection.AMBIGUOUS, Selection.NO_TOOL, Selection.POLICY_ERROR, Selection.BUDGET_EXHAUSTED})
"""select_tool's verdicts after which the run makes no further call: a plan's calls left are dropped."""


def _kept_to_plan(run: Run, planned: tuple[Intent, ...], outcome: StageOutcome) -> Steps[StageOutcome]:
    """`outcome` with the plan it leaves (the calls of the policy's list not made yet) and,
    in the trace, the planned calls it dropped: those a model policy's new decision did not
    ask for again, and every call left when the verdict ends the run."""
    facts = outcome.facts
    rest: tuple[Intent, ...] = facts.get("plan", ())
    chosen = facts.get("intent")
    taken = [intent for intent, _ in facts.get("batch", ())] or ([chosen] if chosen is not None else [])
    dropped = [intent for intent in planned if intent not in taken and intent not in rest]
    if outcome.verdict in _ENDS_RUN:
        dropped.extend(rest)
        rest = ()
    if not dropped:
        return replace(outcome, facts={**facts, "plan": rest})
    shown = yield from dropped_calls(run, dropped)
    return replace(outcome, facts={**facts, "plan": rest}, detail={**outcome.detail, "dropped": shown})


def dropped_calls(run: Run, intents: Sequence[Intent]) -> Steps[list[dict[str, Any]]]:
    """What the trace keeps of planned calls that will not be made: each one's tool (or
    capabilities) and its arguments as the trace keeps arguments (through `redact`)."""
    shown = []
    for intent in intents:
        tool = chosen_tool(intent, run.config.specs) or ""
        arguments = yield from _arguments_text(run, tool, intent)
        shown.append({"tool": tool or sorted(intent.capabilities),
                      "arguments": arguments if isinstance(arguments, str) else summary(arguments, ARGUMENTS_LIMIT)})
    return shown


def _pinned(run: Run) -> Steps[StageOutcome]:
    """The decision a person's answer made (`forge.machine.asking`), taken once."""
    outcome = yield from _selected(run)
    return replace(outcome, facts={**outcome.facts, "pinned": None})


def _unwrapped(run: Run, step: int, intent: Any
               ) -> Steps[tuple[Any, tuple[tuple[Intent, Action], ...], tuple[Intent, ...], str | None]]:
    """What the policy answered, other than one `Intent`: a handoff taken, a list split into
    its first intent or batch and the plan's rest; returns (intent, batch, rest, handed to).

    Raises:
        WrongType: the answer is none of the things a policy may answer.
    """
    handed: str | None = None
    batch: tuple[tuple[Intent, Action], ...] = ()
    rest: tuple[Intent, ...] = ()
    if isinstance(intent, Handoff):
        handed = intent.to
        intent = yield from _handed_off(run, step, intent)
    if isinstance(intent, (list, tuple)):
        intent, batch, rest = _batched(run, intent)
    if not isinstance(intent, (Intent, Finish, Ask)):
        raise WrongType(f"policy returned {intent!r}, not an Intent, a Finish, an Ask, a Handoff or a list of Intents")
    return intent, batch, rest, handed


def _selected(run: Run) -> Steps[StageOutcome]:
    step = run.loop_state.step_count + 1
    over = _over_budget(run, step)
    if over is not None:
        return over
    decision = yield from _decision(run, step)
    if isinstance(decision, StageOutcome):
        return decision
    intent, batch, rest, handed = decision
    detail, seen = _new_messages(run)
    counts: CountChanges = {"messages_seen": seen} if seen else _NONE
    if isinstance(intent, Ask):
        detail["ask"] = quoted(intent.question, 200)
        return StageOutcome(Selection.ASKED, detail, counts=counts,
                            facts={"step": step, "intent": None, "question": intent.question,
                                   "action": Action(ASK, "the policy asked the user")},
                            observe=(ASK, "ok", intent, None))
    if isinstance(intent, Finish):
        return _finished(run, intent, handed, detail, counts)
    if batch:
        return (yield from _batched_outcome(run, batch, rest, detail, counts))
    return (yield from _single(run, intent, rest, detail, counts))


def _over_budget(run: Run, step: int) -> StageOutcome | None:
    """The outcome of a run that has spent a budget (tokens, money, working time) before its
    policy is asked again; None while none is spent (a policy may stop sooner: BudgetExhausted)."""
    config = run.config
    budget = config.token_budget
    if budget is not None:
        used = usage_of(run.loop_state.messages)  # the whole conversation's, every turn: all its messages are this "turn"
        if used.total_tokens >= budget:
            return _out_of_budget(BudgetExhausted(used.total_tokens, budget, used.next_call_at_least), step, {}, _NONE)
    if config.cost_budget is not None:  # … nor past its money budget (`forge.records.pricing`)
        spent = _spent(run, config.cost_budget, step)
        if spent is not None:
            return spent
    if config.time_budget is not None:  # … nor past its working time (`forge.records.tally`)
        worked = _worked(run)
        if worked >= config.time_budget:
            return StageOutcome(Selection.BUDGET_EXHAUSTED,
                                {"time_worked_s": round(worked, 3), "time_budget_s": config.time_budget},
                                facts={"step": step, "action": None,
                                       "error": TimeBudgetExhausted(worked, config.time_budget)})
    return None


_Decision = tuple[Any, tuple[tuple[Intent, Action], ...], tuple[Intent, ...], str | None]
"""What the policy decided, unwrapped: the intent (or Finish, Ask), the batch made of a list
of intents with the plan's rest, and the loop it handed off to."""


def _decision(run: Run, step: int) -> Steps[_Decision | StageOutcome]:
    """The policy's decision (the plan's rest, when it planned), unwrapped; the outcome of a
    policy that failed or spent the token budget instead."""
    config = run.config
    batch: tuple[tuple[Intent, Action], ...] = ()
    rest: tuple[Intent, ...] = ()
    handed: str | None = None
    intent: Any
    try:
        if run.facts.plan and run.facts.pinned is None and config.policy_replays != "model":
            intent = list(run.facts.plan)  # the rest of the policy's list, made in order without asking it again
        else:
            intent = yield from decided(run, step)
        if type(intent) is not Intent:  # one Intent, the common answer, needs none of these checks
            intent, batch, rest, handed = yield from _unwrapped(run, step, intent)
        if isinstance(intent, Ask) and not config.can_ask:
            raise UsageError(f"the policy asked the user {intent.question!r:.200}, but definition {config.machine!r} "
                             "has no input_required state to wait in: add a transition from the policy's state "
                             "guarded by policy_asked (as machines/single_agent.toml has)")
    except BudgetExhausted as error:
        if config.token_budget is None:
            return _policy_failed(error, step)
        detail, seen = _new_messages(run)
        return _out_of_budget(error, step, detail, {"messages_seen": seen} if seen else _NONE)
    except Exception as error:  # the policy is user code: any failure ends the run, recorded
        return _policy_failed(error, step)
    return intent, batch, rest, handed


def _finished(run: Run, intent: Finish, handed: str | None, detail: dict[str, Any], counts: CountChanges
              ) -> StageOutcome:
    """The outcome of the policy's answer: finished, or refused by the loop's `output`."""
    step = run.loop_state.step_count + 1
    if handed is not None:
        detail["handoff"] = handed
    detail["finish"] = quoted(_shown(intent.answer), 200)
    output = run.config.output
    if output is not None:
        try:
            intent = Finish(output.validated(intent.answer))
        except AnswerInvalid as invalid:
            detail["answer_invalid"] = error_text(invalid)
            return StageOutcome(Selection.ANSWER_INVALID, detail, counts=counts,
                                facts={"step": step, "intent": None, "status": "retryable_error", "payload": invalid,
                                       "action": Action(FINISH, "the policy's answer is not a valid output")})
    return StageOutcome(Selection.FINISHED, detail, counts=counts,
                        facts={"step": step, "intent": None, "action": Action(FINISH, "the policy gave its answer"),
                               "status": "ok", "payload": intent})


def _batched_outcome(run: Run, batch: tuple[tuple[Intent, Action], ...], rest: tuple[Intent, ...],
                     detail: dict[str, Any], counts: CountChanges) -> Steps[StageOutcome]:
    """The outcome of calls to make together, each with its arguments in words."""
    step = run.loop_state.step_count + 1
    detail["tools"] = [chosen.tool_name for _, chosen in batch]
    if any(each.call_id is not None for each, _ in batch):
        detail["call_ids"] = [each.call_id for each, _ in batch]
    subjects = []
    for each, chosen in batch:
        subjects.append((yield from _arguments_text(run, chosen.tool_name, each)))
    batched: FactChanges = {"step": step, "intent": None, "action": None, "batch": batch}
    if rest:
        batched["plan"] = rest
        detail["planned"] = len(rest)
    return StageOutcome(Selection.BATCHED, detail, subjects, batched, counts)


def _single(run: Run, intent: Intent, rest: tuple[Intent, ...], detail: dict[str, Any], counts: CountChanges
            ) -> Steps[StageOutcome]:
    """The outcome of one intent: the one tool that answers it, or why none does."""
    step = run.loop_state.step_count + 1
    action: Action | None = None
    refused: UnknownTool | AmbiguousToolChoice | NoMatchingTool | None = None
    try:
        action = _action_for(run, intent)
    except (UnknownTool, AmbiguousToolChoice, NoMatchingTool) as error:
        refused = error
    subject = yield from _arguments_text(run, action.tool_name if action else intent.tool or "", intent)
    facts: FactChanges = {"step": step, "intent": intent, "action": action}
    if rest:
        facts["plan"] = rest
        detail["planned"] = len(rest)
    if refused is not None:
        facts["error"] = refused
        return _refused(refused, detail, subject, facts, counts)
    assert action is not None
    detail["tool"] = action.tool_name
    if intent.call_id is not None:  # the model's id of the call: its result goes back paired with it
        detail["call_id"] = intent.call_id
    return StageOutcome(Selection.SELECTED, detail, subject, facts, counts)


_NONE: CountChanges = {}


def _refused(refused: UnknownTool | AmbiguousToolChoice | NoMatchingTool, detail: dict[str, Any], subject: Any,
             facts: FactChanges, counts: CountChanges) -> StageOutcome:
    """The outcome of an intent no single tool answers: named, tied or missing."""
    if isinstance(refused, UnknownTool):
        detail.update(unknown_tool=refused.name, suggestions=list(refused.suggestions))
        return StageOutcome(Selection.NO_TOOL, detail, subject, facts, counts)
    if isinstance(refused, AmbiguousToolChoice):
        detail["tied"] = list(refused.tied)
        return StageOutcome(Selection.AMBIGUOUS, detail, subject, facts, counts)
    detail["capabilities"] = sorted(refused.required)
    return StageOutcome(Selection.NO_TOOL, detail, subject, facts, counts)


def _shown(answer: Any) -> str:
    """The answer's repr, or what is wrong with it where it nests too deep to show."""
    try:
        return repr(checked(answer, "the answer"))
    except TooLarge as too_large:
        return f"<{too_large}>"


def _handed_off(run: Run, step: int, handoff: Handoff) -> Steps[Finish]:
    """The other loop's answer to the conversation the policy handed it (`forge.Handoff`),
    as this run's final answer: the handoff is a call of the journal (kind `handoff`, its
    value that answer), so a replay runs the other loop no more than a tool.

    Raises:
        UsageError: the loop has no handoff of that name.
        ToolError: the other loop did not end in success (its reason, its error or question).
    """
    from forge.machine.child import hand_off

    target = run.config.handoffs.get(handoff.to)
    if target is None:
        allowed = ", ".join(sorted(run.config.handoffs)) or "none ([handoffs] to, and loop.with_handoffs(...))"
        raise UsageError(f"the policy handed the conversation to {handoff.to!r}, which this loop cannot hand off to; "
                         f"its handoffs are: {allowed}")
    goal = handoff.note or run.facts.goal or run.goal
    answer = yield Call(hand_off, (target, handoff.to, goal, run.loop_state), f"the handoff to {handoff.to!r}",
                        "handoff", handoff.to, {"to": handoff.to, "goal": goal}, step=step)
    return Finish(answer)


def _action_for(run: Run, intent: Intent) -> Action:
    """The tool `intent` selects: the one it names, or the one its capabilities rank first.

    Raises:
        UnknownTool, AmbiguousToolChoice, NoMatchingTool: it selects none.
    """
    config = run.config
    if intent.tool is not None:
        return select_named(intent.tool, config.specs)
    action = config.chosen.get(intent.capabilities)
    if action is None:  # failures are not kept: they end the run
        action = config.chosen[intent.capabilities] = _ranked(intent.capabilities, config.specs)
    return action


def _batched(run: Run, decided: list[Any] | tuple[Any, ...]
             ) -> tuple[Intent, tuple[tuple[Intent, Action], ...], tuple[Intent, ...]]:
    """Intents the policy asked for at once (a plan: its calls are made in order): the
    first, the calls to make together, if any, and the calls left for later steps. Made
    together are the leading calls whose tools have no side effect, two at least, no more
    than the steps left and none past the repeat limit (the batch ends with the call that
    reaches it, as single calls would); a side effect is made alone, in its turn. Nothing is
    made together where the loop runs one call at a time (`Limits(max_parallel=1)`, or a
    definition without a `tools_batched` edge). A model policy is asked again after each
    step and answers its calls still pending; any other policy's calls left are made without
    asking it (`_select_tool`).

    Raises:
        WrongType: the list is empty or holds anything but Intents.
    """
    if not decided:
        raise WrongType("policy returned an empty list: return an Intent, a Finish, an Ask or a list of Intents")
    odd = next((each for each in decided if not isinstance(each, Intent)), None)
    if odd is not None:
        raise WrongType(f"policy returned a list holding {odd!r:.200}: a list holds Intents only (a Finish or an "
                        "Ask is returned alone)")
    config, state = run.config, run.loop_state
    room = config.controller.max_steps - (state.step_count - state.turn_start)
    if len(decided) < 2 or room < 2 or config.max_parallel < 2 or not config.can_batch:
        return decided[0], (), tuple(decided[1:])
    batch = []
    history = state.turn_history
    made: dict[str, int] = {}
    for intent in decided[:room]:
        try:
            action = _action_for(run, intent)
        except (UnknownTool, AmbiguousToolChoice, NoMatchingTool):
            break  # met on its own, in its turn
        if config.tools[action.tool_name].side_effect:
            break
        batch.append((intent, action))
        key = repeat_key(run, action.tool_name, None, intent.arguments)
        made[key] = made.get(key, 0) + 1
        if history.count(key) + made[key] >= config.controller.repeat_limit:
            break  # the run stops after this call: nothing past it is made
    if len(batch) < 2:
        return decided[0], (), tuple(decided[1:])
    return decided[0], tuple(batch), tuple(decided[len(batch):])


def decided(run: Run, step: int, policy: Any = None) -> Steps[Any]:
    """The decision of `policy` (default: the loop's; `forge.machine.stages.wrap_up` gives
    its wrap-up), or the one a person's answer made, calling nothing, journaled as a call
    whose replay the policy's kind says
    (`forge.policy`): answered from the journal (a `RecordedPolicy`, or a decision the
    journal holds as the world's answer); the policy run as code, its decision checked on
    replay; or, for a `ModelPolicy`, its code run with each request to the model a call."""
    if run.facts.pinned is not None:
        return run.facts.pinned
    config, state, goal = run.config, run.loop_state, run.facts.goal or run.goal
    policy = config.policy if policy is None else policy
    performer = run.performer
    if config.policy_replays == "journal" or (performer is not None and performer.answers_decision()):
        return (yield Call(policy, (goal, state), "the policy", "policy", "policy", (goal, state.step_count),
                           state.messages, step=step))
    identity = DecidedAsCode(goal, state.step_count)
    if config.policy_replays == "code":
        return (yield Call(policy, (goal, state), "the policy", "policy", "policy", identity, state.messages,
                           step=step))
    outcome: Any = None
    failure: Exception | None = None
    try:
        requests = policy.requests(goal, state)
        reply: Any = None
        error: Exception | None = None
        while True:
            try:
                request = requests.send(reply) if error is None else requests.throw(error)
            except StopIteration as done:
                outcome = done.value
                break
            try:
                reply, error = (yield Call(policy.send, (request,), "the model", "model",
                                           str(request.get("model") or "model"), request, step=step)), None
            except Exception as failed:  # the policy may handle its model's failure (or let it end the run)
                reply, error = None, failed
    except Exception as failed:
        failure = failed
    return (yield Call(_outcome, (outcome, failure), "the policy", "policy", "policy", identity, None, step=step))


def _outcome(value: Any, error: Exception | None) -> Any:
    """What a model policy decided, or raised: its decision as a call a replay checks."""
    if error is not None:
        raise error
    return value


def _policy_failed(error: Exception, step: int) -> StageOutcome:
    return StageOutcome(Selection.POLICY_ERROR, {"error": error_text(error)},
                        facts={"step": step, "action": None, "error": error})


def _out_of_budget(error: BudgetExhausted, step: int, detail: dict[str, Any], counts: CountChanges) -> StageOutcome:
    detail.update(tokens_used=error.used, token_budget=error.budget, next_call_at_least=error.next_at_least)
    return StageOutcome(Selection.BUDGET_EXHAUSTED, detail, counts=counts,
                        facts={"step": step, "action": None, "error": error})


_WORKING: weakref.WeakKeyDictionary[Run, WorkingTime] = weakref.WeakKeyDictionary()
"""Each run's working time, kept up as its trace grows (a run with a time budget)."""


def _worked(run: Run) -> float:
    """The seconds `run` has worked so far (its trace's, by the wall clock its records keep)."""
    working = _WORKING.get(run)
    if working is None:
        working = _WORKING[run] = WorkingTime(run.config.waiting_states)
    return working.of(run.trace, time.time())


def _spent(run: Run, budget: float, step: int) -> StageOutcome | None:
    """The run's end when its next model call would certainly take it past its money
    budget, or when a call's cost is unknown (a budget nothing prices holds nothing); None:
    it may go on."""
    from forge.records.pricing import CostBudgetExhausted, spending

    spend = spending(usage_of(run.loop_state.messages), run.config.prices)
    if spend.unpriced:
        error = UsageError(f"the run has a cost_budget, but no price is known for {', '.join(spend.unpriced)}: give "
                           "Limits(prices={name: forge.records.pricing.Price(input=..., output=...)}) in USD per million tokens")
        return _policy_failed(error, step)
    if spend.spent < budget and spend.spent + spend.next_at_least <= budget:
        return None
    exhausted = CostBudgetExhausted(spend.spent, budget, spend.next_at_least)
    detail = {"cost_spent": round(spend.spent, 6), "cost_budget": budget,
              "next_call_at_least_usd": round(spend.next_at_least, 6)}
    return StageOutcome(Selection.BUDGET_EXHAUSTED, detail, facts={"step": step, "action": None, "error": exhausted})


def chosen_tool(intent: Intent, specs: tuple[ToolSpec, ...]) -> str | None:
    """The tool `intent` selects among `specs` (the one it names, else the one its
    capabilities rank first), or None when it selects none: what select_tool would call."""
    if intent.tool:
        return intent.tool
    try:
        return _ranked(intent.capabilities, specs).tool_name
    except (NoMatchingTool, AmbiguousToolChoice, ValueError):
        return None


@lru_cache(maxsize=1024)
def _ranked(capabilities: frozenset[str], specs: tuple[ToolSpec, ...]) -> Action:
    """`select_action`'s choice, shared by every loop with these tools: a pure function of
    the capabilities and the tools (the goal only has to be non-blank, as every run's is)."""
    return select_action("(any goal)", capabilities, specs)


def _arguments_text(run: Run, tool: str, intent: Intent) -> Steps[Any]:
    """What the trace keeps of the intent's arguments: JSON text capped at ARGUMENTS_LIMIT,
    after the loop's `redact` hook (user code: its failure ends the run, named "redact").
    Without a redact hook, the arguments themselves (the journal holds them already): the
    trace makes their text only when a record is read."""
    redact = run.config.redact
    if redact is None:
        return intent.arguments
    arguments = yield Call(redact, (tool, "arguments", intent.arguments), "redact", hook="redact")
    return summary(arguments, ARGUMENTS_LIMIT)


def _new_messages(run: Run) -> tuple[dict[str, Any], int]:
    """The policy's messages added since the last step, for the trace (JSON-safe, through
    the loop's `redact`), and how many they are."""
    messages = run.loop_state.messages
    seen = run.counts.messages_seen
    if len(messages) <= seen:
        return {}, 0
    fresh = messages[seen:]
    redact = run.config.redact
    kept = fresh if redact is None else redacted_messages(fresh, redact, messages[:seen])
    return {"messages": capped(json.loads(json.dumps(kept, default=str)), PAYLOAD_LIMIT)}, len(fresh)


def _select_model(run: AbstractRun, controller: StopController) -> Iterator[tuple[str, AbstractRun]]:
    for verdict in (Selection.AMBIGUOUS, Selection.NO_TOOL, Selection.POLICY_ERROR, Selection.ASKED,
                    Selection.BUDGET_EXHAUSTED):
        yield verdict, run
    for made in range(min(run.steps, controller.repeat_limit - 1) + 1):  # a new call, or one made `made` times
        yield Selection.SELECTED, replace(run, pick=made)
        yield Selection.FINISHED, replace(run, pick=made, status=CallOutcome.OK)  # an answer is recorded like a call
        yield Selection.ANSWER_INVALID, replace(run, pick=made, status=CallOutcome.RETRYABLE_ERROR)
        left = controller.max_steps - run.steps  # a batch never takes a run past its step budget
        for together in sorted({2, left}) if left >= 2 else ():
            # the smallest and the largest batch: every step count between is reached by single calls
            # already, and a batch only shortens a path, so these two keep the search linear in max_steps
            yield Selection.BATCHED, replace(run, pick=made, batch=together)


SPEC = ActionSpec("select_tool", _select_tool, frozenset(Selection),
                  "ask the policy for an intent (select_action picks the one tool that fits), its final answer "
                  "or its question to the user", _select_model, optional=OPTIONAL,
                  failures=frozenset({Selection.POLICY_ERROR}), unwarned=frozenset({Selection.BATCHED}))
GUARDS = (
    GuardSpec("tool_selected", "select_tool", Selection.SELECTED),
    GuardSpec("policy_finished", "select_tool", Selection.FINISHED),
    GuardSpec("tool_choice_ambiguous", "select_tool", Selection.AMBIGUOUS, "clarification_required"),
    GuardSpec("no_tool_fits", "select_tool", Selection.NO_TOOL, "capability_gap"),
    GuardSpec("policy_raised", "select_tool", Selection.POLICY_ERROR, StopReason.FATAL_ERROR.value),
    GuardSpec("policy_asked", "select_tool", Selection.ASKED, "input_required"),
    GuardSpec("token_budget_exhausted", "select_tool", Selection.BUDGET_EXHAUSTED, "budget_exhausted"),
    GuardSpec("answer_invalid", "select_tool", Selection.ANSWER_INVALID),
    GuardSpec("tools_batched", "select_tool", Selection.BATCHED),
)
