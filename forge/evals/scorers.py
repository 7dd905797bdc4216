"""forge's scorers of a run's trajectory, as pydantic-evals evaluators.

Each reads the case's `EvalRun` (`ctx.output`) — the conversation's results, traces and
journals — and returns a pass (a bool: an assertion in the report) or a score in [0, 1]
(partial matches), always with a reason that says what it found. They are dataclasses, so
a dataset file names them with their arguments (`- EndState: {reason: verified_success}`);
`SCORERS` lists them for `Dataset.from_file(..., custom_evaluator_types=SCORERS)`.

- `EndState`: the conversation ended in this stop reason and/or outcome.
- `AnswerMatches`: the answer equals the expected one (exactly, as the typed value, or
  containing it), or a function of yours accepts it.
- `ToolCalls`: the tools called, as a set, a sequence, or calls with given arguments;
  scored for partial matches.
- `NoSideEffectBeforeApproval`, `MaxRetries`, `Visits`: properties of the path.
- `Budget`: steps, tokens and wall time within bounds.
- `Judge`: a model judges a free-text answer against a rubric, through `ChatPolicy`'s
  client; its call is on the case's tape, so a judged case replays offline.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_evals.evaluators import EvaluationReason, Evaluator, EvaluatorContext

from forge.errors import UsageError
from forge.evals.cases import EvalRun, ToolCall

__all__ = ["AnswerMatches", "Budget", "EndState", "Judge", "MaxRetries", "NoSideEffectBeforeApproval", "SCORERS",
           "ToolCalls", "Visits"]


def _run(ctx: EvaluatorContext[Any, Any, Any]) -> EvalRun:
    if not isinstance(ctx.output, EvalRun):
        raise UsageError(f"forge's scorers score an EvalRun (what forge.evals runs a case into), got "
                         f"{type(ctx.output).__name__}")
    return ctx.output


@dataclass(repr=False)
class EndState(Evaluator[Any, Any, Any]):
    """Passes when the conversation ended in `reason` (a stop reason: `verified_success`,
    `fatal_error`, …) and/or with `outcome` (success, failure, needs_input).

    Raises (when made):
        ValueError: neither is given.
    """

    reason: str | None = None
    outcome: str | None = None

    def __post_init__(self) -> None:
        if self.reason is None and self.outcome is None:
            raise UsageError("EndState needs a reason, an outcome or both")

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluationReason:
        run = _run(ctx)
        wanted = [(what, value) for what, value in (("reason", self.reason), ("outcome", self.outcome)) if value]
        ok = all(getattr(run, what) == value for what, value in wanted)
        expected = ", ".join(f"{what} {value}" for what, value in wanted)
        return EvaluationReason(ok, f"ended in {run.reason} ({run.outcome}); expected {expected}")


_UNSET: Any = object()
MATCHES = ("exact", "typed", "contains")


@dataclass(repr=False)
class AnswerMatches(Evaluator[Any, Any, Any]):
    """Passes when the conversation's answer matches `expected` (default: the case's
    `expected_output`): `match="exact"` compares with ==; `"typed"` first makes `expected`
    the answer's own type (a dict becomes the loop's `output=` dataclass or model, by
    pydantic) and compares the typed values; `"contains"` passes when the answer's text
    contains `expected`'s. `check`, a function or `"module:function"`, replaces the
    comparison: `check(answer, expected)` returns a bool, or a score in [0, 1].

    Raises (when made):
        ValueError: an unknown match.
    """

    expected: Any = _UNSET
    match: str = "exact"
    check: Any = None

    def __post_init__(self) -> None:
        if self.match not in MATCHES:
            raise UsageError(f"AnswerMatches: match must be one of {', '.join(MATCHES)}, got {self.match!r}")

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluationReason:
        run = _run(ctx)
        expected = ctx.expected_output if self.expected is _UNSET else self.expected
        answer = run.answer
        if self.check is not None:
            verdict = _function(self.check)(answer, expected)
            if not isinstance(verdict, (bool, int, float)):
                raise UsageError(f"AnswerMatches: check returned a {type(verdict).__name__}; return a bool or a score")
            return EvaluationReason(verdict, f"check said {verdict} of the answer {_shown(answer)}")
        if answer is None:
            return EvaluationReason(False, f"no answer: the conversation ended in {run.reason}")
        if self.match == "contains":
            ok = _text(expected) in _text(answer)
        elif self.match == "typed":
            ok = _typed(expected, answer) == answer
        else:
            ok = answer == expected
        return EvaluationReason(ok, f"answer {_shown(answer)}; expected {'to contain ' if self.match == 'contains' else ''}"
                                    f"{_shown(expected)}")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)


def _shown(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _typed(expected: Any, answer: Any) -> Any:
    """`expected` as a value of `answer`'s type, as pydantic makes one (unchanged when
    `answer` is plain data, or when pydantic refuses it: then it compares unequal)."""
    if isinstance(answer, (str, int, float, bool, list, dict)) or answer is None:
        return expected
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(type(answer)).validate_python(expected)
    except ValidationError:
        return expected


def _function(check: Any) -> Callable[..., Any]:
    if callable(check):
        return check  # type: ignore[no-any-return]
    if isinstance(check, str):
        from forge.machine.catalog import import_reference

        found = import_reference(check, "check", "myagent.checks:same_total")
        if callable(found):
            return found  # type: ignore[no-any-return]
    raise UsageError(f"a check is a function or 'module:function', got {check!r}")


CALL_MATCHES = ("set", "sequence", "arguments")


@dataclass(repr=False)
class ToolCalls(Evaluator[Any, Any, Any]):
    """Scores the tool calls of the conversation against `expected`, in [0, 1]:

    - `match="set"`: the tools called, as a set (`expected` are tool names): shared over
      all (|E ∩ M| / |E ∪ M|);
    - `"sequence"`: in order: the longest common subsequence over the longer sequence;
    - `"arguments"`: `expected` are `{"tool": NAME, "arguments": {…}}`; each matches a
      distinct call of that tool, in order, whose arguments include the given ones: the
      share of expected calls matched (calls beyond them cost nothing).

    1.0 only for a full match; the reason names what is missing and what was not expected.

    Raises (when made):
        ValueError: an unknown match, or an expected call without a tool.
    """

    expected: list[Any] = field(default_factory=list)
    match: str = "set"

    def __post_init__(self) -> None:
        if self.match not in CALL_MATCHES:
            raise UsageError(f"ToolCalls: match must be one of {', '.join(CALL_MATCHES)}, got {self.match!r}")
        for item in self.expected:
            if not isinstance(item, str) and not (isinstance(item, Mapping) and isinstance(item.get("tool"), str)):
                raise UsageError(f"ToolCalls: an expected call is a tool name or {{'tool': NAME, 'arguments': {{…}}}}, "
                                 f"got {item!r}")

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluationReason:
        made = _run(ctx).tool_calls
        if self.match == "arguments":
            return _arguments_score([_expected_call(item) for item in self.expected], made)
        names = [_expected_call(item)[0] for item in self.expected]
        called = [call.tool for call in made]
        if self.match == "set":
            wanted, got = set(names), set(called)
            union = wanted | got
            score = len(wanted & got) / len(union) if union else 1.0
            return EvaluationReason(score, _missing_and_extra(sorted(wanted - got), sorted(got - wanted)))
        common = _common_subsequence(names, called)
        longer = max(len(names), len(called))
        score = common / longer if longer else 1.0
        return EvaluationReason(score, f"{common} of {longer} calls in order; called {' → '.join(called) or 'nothing'}")


def _expected_call(item: Any) -> tuple[str, Mapping[str, Any]]:
    if isinstance(item, str):
        return item, {}
    return str(item["tool"]), dict(item.get("arguments") or {})


def _missing_and_extra(missing: Sequence[str], extra: Sequence[str]) -> str:
    if not missing and not extra:
        return "every tool expected was called, and no other"
    parts = ([f"never called {', '.join(missing)}"] if missing else []) + \
        ([f"called {', '.join(extra)} too"] if extra else [])
    return "; ".join(parts)


def _common_subsequence(a: Sequence[str], b: Sequence[str]) -> int:
    lengths = [0] * (len(b) + 1)
    for x in a:
        previous = 0
        for j, y in enumerate(b, 1):
            current = lengths[j]
            lengths[j] = previous + 1 if x == y else max(lengths[j], lengths[j - 1])
            previous = current
    return lengths[-1]


def _arguments_score(expected: Sequence[tuple[str, Mapping[str, Any]]], made: Sequence[ToolCall]) -> EvaluationReason:
    if not expected:
        return EvaluationReason(1.0, "no call expected")
    taken: set[int] = set()
    unmatched = []
    for tool, arguments in expected:
        found = next((i for i, call in enumerate(made) if i not in taken and call.tool == tool
                      and all(call.arguments.get(k, _UNSET) == v for k, v in arguments.items())), None)
        if found is None:
            unmatched.append(f"{tool}({json.dumps(dict(arguments), sort_keys=True, default=str)})")
        else:
            taken.add(found)
    score = (len(expected) - len(unmatched)) / len(expected)
    return EvaluationReason(score, "every expected call was made" if not unmatched
                            else f"no call matched {', '.join(unmatched)}")


@dataclass(repr=False)
class NoSideEffectBeforeApproval(Evaluator[Any, Any, Any]):
    """Passes when every call that ran a tool with side effects (a tool call of the
    journal) was made right after its approval: the transition before the call's is an
    approval's `approved`. What a loop on the approval definition promises, checked on the
    path it took; a call refused or answered from the idempotency registry never ran."""

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluationReason:
        run = _run(ctx)
        unapproved = []
        for call in run.tool_calls:
            if call.tool not in run.side_effects:
                continue
            records = run.turns[call.turn - 1].trace
            before = records[call.transition - 2] if call.transition >= 2 else None
            if before is None or before.verdict != "approved":
                unapproved.append(f"{call.tool} at turn {call.turn}, transition {call.transition}")
        return EvaluationReason(not unapproved, "every side effect ran after its approval" if not unapproved
                                else f"ran without an approval: {'; '.join(unapproved)}")


@dataclass(repr=False)
class MaxRetries(Evaluator[Any, Any, Any]):
    """Passes when no tool call was retried more than `retries` times."""

    retries: int = 0

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluationReason:
        run = _run(ctx)
        worst, where = 0, ""
        for number, turn in enumerate(run.turns, 1):
            for record in turn.trace:
                attempts = record.detail.get("attempts")
                if isinstance(attempts, int) and attempts - 1 > worst:
                    worst, where = attempts - 1, f" ({record.detail.get('tool')} at turn {number}, transition {record.sequence})"
        return EvaluationReason(worst <= self.retries, f"at most {worst} retries of a call{where}; allowed {self.retries}")


@dataclass(repr=False)
class Visits(Evaluator[Any, Any, Any]):
    """Passes when the path entered `state` at least `at_least` and at most `at_most`
    times (either may be left out): a bound on replanning, on approvals asked, …

    Raises (when made):
        ValueError: neither bound is given.
    """

    state: str = ""
    at_least: int | None = None
    at_most: int | None = None

    def __post_init__(self) -> None:
        if not self.state or (self.at_least is None and self.at_most is None):
            raise UsageError("Visits needs a state and at_least, at_most or both")

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluationReason:
        count = sum(1 for record in _run(ctx).records if record.dest == self.state)
        ok = (self.at_least is None or count >= self.at_least) and (self.at_most is None or count <= self.at_most)
        bounds = " and ".join(f"{word} {value}" for word, value in (("at least", self.at_least), ("at most", self.at_most))
                              if value is not None)
        return EvaluationReason(ok, f"entered {self.state} {count} times; expected {bounds}")


@dataclass(repr=False)
class Budget(Evaluator[Any, Any, Any]):
    """Passes when the conversation took at most `max_steps` steps, `max_tokens` tokens of
    model calls and `max_seconds` of wall time (a replay takes far less than the live run
    it replays: bound seconds on live runs). Only the bounds given are checked.

    Raises (when made):
        ValueError: no bound is given.
    """

    max_steps: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.max_steps is None and self.max_tokens is None and self.max_seconds is None:
            raise UsageError("Budget needs max_steps, max_tokens, max_seconds or several")

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluationReason:
        run = _run(ctx)
        used = {"steps": run.steps, "tokens": run.tokens, "seconds": round(run.seconds, 3)}
        bounds = {"steps": self.max_steps, "tokens": self.max_tokens, "seconds": self.max_seconds}
        over = [f"{what} {used[what]} > {bound}" for what, bound in bounds.items() if bound is not None and used[what] > bound]
        within = ", ".join(f"{what} {used[what]}" for what, bound in bounds.items() if bound is not None)
        return EvaluationReason(not over, f"over budget: {'; '.join(over)}" if over else f"within budget: {within}")


_JUDGE_SYSTEM = (
    "You grade an AI agent's final answer against a rubric. Read the user's request, the answer and the rubric; "
    "answer with a JSON object: {\"pass\": true or false, \"reason\": one sentence saying why}."
)
_VERDICT = {"type": "json_schema", "json_schema": {"name": "verdict", "strict": True, "schema": {
    "type": "object", "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["pass", "reason"], "additionalProperties": False}}}


@dataclass(repr=False)
class Judge(Evaluator[Any, Any, Any]):
    """A model judges the answer against `rubric` and passes or fails it, with its reason.
    The request goes through the case's tape (`forge.evals.tape`) and the eval's client:
    recorded with the case, answered from the tape on replay (the same answer and rubric
    ask the same request), live otherwise.

    Raises (when evaluated):
        TapeMiss: offline, and the judge's call is not on the tape.
        ValueError: the model's reply is not the verdict asked for.
    """

    rubric: str = ""
    model: str = ""

    def __post_init__(self) -> None:
        if not self.rubric.strip() or not self.model.strip():
            raise UsageError("Judge needs a rubric and a model")

    async def evaluate_async(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluationReason:
        """`evaluate`, in a worker thread: the call waits on the endpoint, not the event loop."""
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.evaluate, ctx)

    def evaluate(self, ctx: EvaluatorContext[Any, Any, Any]) -> EvaluationReason:
        run = _run(ctx)
        goal = _goal(ctx)
        answer = run.answer
        request = {"model": self.model, "response_format": _VERDICT, "messages": [
            {"role": "system", "content": _JUDGE_SYSTEM},
            {"role": "user", "content": f"Request: {goal}\n\nAnswer: {_text(answer) if answer is not None else '(none)'}"
                                        f"\n\nRubric: {self.rubric}"}]}
        reply = run.models.send("judge", self.model, request)
        content = (reply.get("message") or {}).get("content")
        try:
            verdict = json.loads(content) if isinstance(content, str) else None
        except json.JSONDecodeError:
            verdict = None
        if not isinstance(verdict, dict) or not isinstance(verdict.get("pass"), bool):
            raise UsageError(f"the judge's reply is not a verdict {{\"pass\": bool, \"reason\": str}}: {_shown(content)}")
        return EvaluationReason(verdict["pass"], str(verdict.get("reason", "")))


def _goal(ctx: EvaluatorContext[Any, Any, Any]) -> str:
    from forge.evals.cases import conversation_of

    return conversation_of(ctx.inputs).goal


SCORERS: tuple[type[Evaluator[Any, Any, Any]], ...] = (
    EndState, AnswerMatches, ToolCalls, NoSideEffectBeforeApproval, MaxRetries, Visits, Budget, Judge)
"""forge's scorers, for `Dataset.from_file(..., custom_evaluator_types=SCORERS)`."""

