"""Token usage: what each model call of a run cost, and the budget that stops a run.

A policy that calls a model (`forge.models.chat.ChatPolicy`) keeps each response's usage on the
assistant message it adds to `LoopState.messages`, under the key `_usage` (keys starting
with `_` are never sent to the model). The conversation already lives there, is recorded
in the trace and is restored by a replay, so usage needs no channel of its own: any policy
that keeps messages the same way is counted the same way.

Why the budget can stop a run *before* a call that would exceed it: a chat conversation
only grows, so the next request holds the whole of the last one and the reply to it; it
costs at least the last call's prompt plus completion tokens (`Usage.next_call_at_least`).
A run stops in `budget_exhausted` when what it has used plus that lower bound would go past
`AgentLoop(token_budget=N)`. What it has used is the whole conversation's: every turn's
calls (`loop.run(reply, state=...)` goes on with the same budget), not this turn's alone.
The bound is also the next prompt's own size — counted by `ChatPolicy(count_tokens=...)`
(the model's own tokenizer), else estimated as `ContextLimit` estimates it (its JSON text's
length over four) — so a request whose prompt alone would pass the budget is never sent, the
first one included. A call can still cost more than the
bound (its own reply, which no one can count before it is made); then the run stops before
the call after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from forge.errors import ForgeError, UsageError

__all__ = ["USAGE_KEY", "BudgetExhausted", "ModelCall", "Usage", "check_budget", "usage_of", "with_children", "with_sampled"]

USAGE_KEY = "_usage"
"""Where an assistant message keeps its call's usage."""


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call's usage: `prompt_tokens` (input, cached ones included, as providers
    count them), `completion_tokens` (output), `cached_tokens` (the part of the prompt read
    from the provider's cache), the `model` that answered, and, when the policy knows
    them, the call's `started` wall-clock time (seconds since the epoch) and `seconds`, why
    the model stopped (`finish_reason`), the model asked for (`request_model`) and the
    `provider` (for OpenTelemetry's `gen_ai.*` attributes)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    model: str | None = None
    started: float | None = None
    seconds: float | None = None
    finish_reason: str | None = None
    request_model: str | None = None
    provider: str | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cached_tokens": self.cached_tokens, "model": self.model, "started": self.started,
                "seconds": self.seconds, "finish_reason": self.finish_reason, "request_model": self.request_model,
                "provider": self.provider}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelCall:
        """Read what `to_json` wrote (a message's `_usage`).

        Raises:
            ValueError: a token count that is not a non-negative integer.
        """
        counts = []
        for name in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            value = data.get(name) or 0
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UsageError(f"a model call's {name} must be a non-negative integer, got {value!r}")
            counts.append(value)
        return cls(counts[0], counts[1], counts[2], data.get("model"), data.get("started"), data.get("seconds"),
                   data.get("finish_reason"), data.get("request_model"), data.get("provider"))


@dataclass(frozen=True, slots=True)
class Usage:
    """The usage of a run's model calls, one `ModelCall` each, in order, and their totals.

    `calls` are this turn's (what `LoopResult.usage` counts); `earlier` the calls of the
    conversation's earlier turns (`state=`), and `conversation` all of them: what a token
    budget counts."""

    calls: tuple[ModelCall, ...] = ()
    earlier: tuple[ModelCall, ...] = ()

    @property
    def conversation(self) -> Usage:
        """The whole conversation's usage: earlier turns' calls, then this turn's."""
        return Usage(self.earlier + self.calls)

    @property
    def prompt_tokens(self) -> int:
        return sum(call.prompt_tokens for call in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(call.completion_tokens for call in self.calls)

    @property
    def cached_tokens(self) -> int:
        return sum(call.cached_tokens for call in self.calls)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def next_call_at_least(self) -> int:
        """A lower bound on the next call's cost: the last call's prompt and its reply, which
        the next request holds again (0 before any call)."""
        return self.calls[-1].total_tokens if self.calls else 0

    @property
    def cost(self) -> float | None:
        """What these calls cost in USD at public prices (`forge.records.pricing`: genai-prices'
        offline table); None when a call's model is not in it (price it with `cost_at`)."""
        return self.cost_at(None)

    def cost_at(self, prices: Mapping[str, Any] | None) -> float | None:
        """What these calls cost in USD at `prices` (model name to `forge.records.pricing.Price`, a
        loop's `Limits(prices=...)`), else at public prices; None when a call's model has
        neither."""
        from forge.records.pricing import cost_of

        costs = [cost_of(call, prices) for call in self.calls]
        return None if any(cost is None for cost in costs) else sum(cost for cost in costs if cost is not None)

    def __bool__(self) -> bool:
        return bool(self.calls)

    def __str__(self) -> str:
        cached = f", {self.cached_tokens} cached" if self.cached_tokens else ""
        cost = self.cost if self.calls else None
        return (f"{self.total_tokens} tokens in {len(self.calls)} model call{'s' if len(self.calls) != 1 else ''} "
                f"({self.prompt_tokens} prompt{cached}, {self.completion_tokens} completion)"
                + (f", ${cost:.4f}" if cost is not None else ""))


def usage_of(messages: Sequence[Mapping[str, Any]], turn_start: int = 0) -> Usage:
    """The usage recorded on `messages` (each one's `_usage`), in order: the calls from
    message `turn_start` on as the turn's, those before as `earlier`."""
    def calls(part: Sequence[Mapping[str, Any]]) -> tuple[ModelCall, ...]:
        return tuple(ModelCall.from_json(m[USAGE_KEY]) for m in part if USAGE_KEY in m)

    return Usage(calls(messages[turn_start:]), calls(messages[:turn_start]))


class BudgetExhausted(ForgeError, RuntimeError):
    """The next model call would take the run past its token budget. A policy raises it
    before the call (`check_budget`); the run ends in `budget_exhausted`, not in an error."""

    def __init__(self, used: int, budget: int, next_at_least: int) -> None:
        super().__init__(f"the token budget is {budget}: {used} used, and the next model call costs at least "
                         f"{next_at_least} more")
        self.used, self.budget, self.next_at_least = used, budget, next_at_least


def check_budget(usage: Usage, budget: int | None, prompt_tokens: int = 0) -> None:
    """Refuse the next model call when it would certainly take the conversation past
    `budget` (see the module); `prompt_tokens` is the next request's prompt, counted, when
    its size is known (else 0).

    Raises:
        BudgetExhausted: the conversation's usage has reached the budget, or its lower bound
            on the next call would take it past.
    """
    if budget is None:
        return
    whole = usage.conversation
    used, next_at_least = whole.total_tokens, max(whole.next_call_at_least, prompt_tokens)
    if used >= budget or used + next_at_least > budget:
        raise BudgetExhausted(used, budget, next_at_least)


def with_sampled(usage: Usage, journal: Sequence[Any]) -> Usage:
    """`usage` with the model calls MCP servers asked of the run's model (`sampling` calls
    of its `journal`, `forge.mcp.asking`), after its own."""
    sampled = tuple(ModelCall.from_json(entry.value["usage"]) for entry in journal
                    if entry.kind == "sampling" and isinstance(entry.value, Mapping) and "usage" in entry.value)
    return Usage(usage.calls + sampled, usage.earlier) if sampled else usage


def with_children(usage: Usage, children: Sequence[Any]) -> Usage:
    """`usage` with the model calls of a run's child runs after its own (`forge.machine.child`:
    a parent's usage rolls its children's up), each child's with its own children's."""
    if not children:
        return usage
    return Usage(usage.calls + tuple(call for child in children for call in child.result.usage.calls), usage.earlier)
