"""The parts a generated coverage test runs a loop with: tools that return or raise in a
scripted order, and scripted answers for verify and the approver. Plain, so a generated
test reads as what it does."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

from forge.agent.execution import SchemaViolation
from forge.agent.retry import PermanentToolError, ToolError, TransientToolError
from forge.errors import ForgeError, UsageError
from forge.output import AnswerInvalid, Output
from forge.tools import Tool

__all__ = ["DONE", "OUTCOMES", "Answers", "ScriptSpent", "ScriptedFailure", "Spending", "Stub", "perform", "spend"]

OUTCOMES = ("ok", "retryable", "fatal", "transient")
"""What a stub's call does: return, raise ToolError (the policy replans), raise
PermanentToolError (the run fails), raise TransientToolError (the loop retries)."""


class ScriptSpent(ForgeError, AssertionError):
    """A stub or answer list was called more often than scripted."""


class ScriptedFailure(ForgeError, RuntimeError):
    """What a verify or an approver scripted to answer "raise" raises."""


class Stub:
    """A tool named `name` with `capabilities` whose calls do `outcomes` in turn (see
    `OUTCOMES`); it takes one optional argument, `n`. `side_effect` as for `Tool`."""

    def __init__(self, name: str, capabilities: Iterable[str], outcomes: Sequence[str], side_effect: bool = False) -> None:
        unknown = [o for o in outcomes if o not in OUTCOMES]
        if unknown:
            raise UsageError(f"stub {name!r}: unknown outcome {unknown[0]!r} (expected one of {', '.join(OUTCOMES)})")
        self.name, self.outcomes, self.calls = name, list(outcomes), 0
        self.tool = Tool(name, frozenset(capabilities), self, optional={"n"}, side_effect=side_effect)
        self._lock = threading.Lock()  # calls made together come from several threads

    def __call__(self, n: int = 0) -> str:
        with self._lock:
            if self.calls >= len(self.outcomes):
                raise ScriptSpent(f"stub {self.name!r} was called {self.calls + 1} times; {len(self.outcomes)} "
                                  "scripted")
            outcome = self.outcomes[self.calls]
            self.calls += 1
        return perform(self.name, outcome, n)


def perform(tool: str, outcome: str, n: int) -> str:
    """What a call of stub `tool` with `n` does when scripted to do `outcome`."""
    if outcome == "retryable":
        raise ToolError(f"{tool} failed, try another way")
    if outcome == "fatal":
        raise PermanentToolError(f"{tool} failed for good")
    if outcome == "transient":
        raise TransientToolError(f"{tool} is busy")
    return f"{tool} {n} done"


def _done(answer: Any) -> Any:
    if answer != "done":
        raise AnswerInvalid("done", answer, (SchemaViolation("(answer)", "must be 'done'"),))
    return answer


DONE = Output("done", {"const": "done"}, True, _done)
"""The output of a loop whose only valid answer is "done" (no extra needed): what makes a
`Finish` of anything else take a definition's `answer_invalid` edge."""


class Answers:
    """A verify or an approver that answers `answers` in turn; the answer "raise" raises."""

    def __init__(self, what: str, answers: Sequence[Any]) -> None:
        self.what, self.answers, self.calls = what, list(answers), 0

    def __call__(self, *asked: Any) -> Any:
        if self.calls >= len(self.answers):
            raise ScriptSpent(f"{self.what} was asked {self.calls + 1} times; {len(self.answers)} answers scripted")
        answer = self.answers[self.calls]
        self.calls += 1
        if answer == "raise":
            raise ScriptedFailure(f"{self.what} raised, as scripted")
        return answer


def spend(state: Any, tokens: int) -> None:
    """Record `tokens` of model usage on the conversation, as a policy that called a model
    does (`forge.records.usage`): what brings a run to its token budget."""
    state.messages.append({"role": "assistant", "content": None,
                           "_usage": {"prompt_tokens": tokens, "completion_tokens": 0}})


class Spending:
    """A policy: `policy`'s decisions, with `tokens` of model usage spent (`spend`) before
    each decision whose index is in `at`."""

    def __init__(self, policy: Any, at: Sequence[int], tokens: int) -> None:
        self.policy, self.at, self.tokens, self.asked = policy, frozenset(at), tokens, 0

    def __call__(self, goal: str, state: Any) -> Any:
        if self.asked in self.at:
            spend(state, self.tokens)
        self.asked += 1
        return self.policy(goal, state)
