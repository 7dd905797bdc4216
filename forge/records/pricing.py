"""What a run's model calls cost in money, and the budget that stops a run before it spends
more (issue 51, item 4).

A call's price comes from the loop's own table first (`Limits(prices={"my-model":
Price(input=..., output=...)})`, in USD per million tokens: for a model `genai-prices` does
not know, or a negotiated price), else from `genai-prices`' offline table of public prices
(the `llm` extra's companion, `pip install genai-prices`; it is never updated from the
network here), found by the call's provider and the model that answered (or the one asked
for). Cached prompt tokens are priced as cached input.

`Limits(cost_budget=USD)` stops a run in `budget_exhausted` before a model call that would
certainly take it past the budget: what it has spent, plus a lower bound on the next call
(the last call's prompt and reply again, at the input price: the next request holds them),
as the token budget does (`forge.records.usage`). A run whose calls include one no table prices
cannot be held to a money budget: it ends in `fatal_error`, naming the model and how to
price it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from forge.errors import ForgeError, UsageError

__all__ = ["CostBudgetExhausted", "Price", "Spending", "cost_of", "spending"]

MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """A model's price in USD per million tokens: `input` (prompt tokens not read from a
    cache), `output` (completion tokens) and `cached_input` (prompt tokens read from the
    provider's cache; default: as `input`).

    Raises:
        ValueError: a price that is not a number of dollars, 0 or more.
    """

    input: float
    output: float
    cached_input: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input"):
            value = getattr(self, name)
            if value is None and name == "cached_input":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != value:
                raise UsageError(f"Price.{name} is USD per million tokens, 0 or more, got {value!r}")

    def of(self, call: Any) -> float:
        """What `call` cost at this price, in USD."""
        cached = min(call.cached_tokens, call.prompt_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        return float((call.prompt_tokens - cached) * self.input + cached * cached_price
                     + call.completion_tokens * self.output) / MILLION


def cost_of(call: Any, prices: Mapping[str, Price] | None = None) -> float | None:
    """What `call` (a `forge.records.usage.ModelCall`) cost in USD: by `prices` (the model that answered, else the one asked
    for), else by genai-prices' offline table; None when neither knows the model."""
    names = [name for name in (call.model, call.request_model) if name]
    for name in names:
        if prices and name in prices:
            return prices[name].of(call)
    for name in names:
        found = _listed(name, call.provider or "openai", call.prompt_tokens, call.completion_tokens, call.cached_tokens)
        if found is not None:
            return found
    return None


@functools.lru_cache(maxsize=4096)
def _listed(model: str, provider: str, prompt: int, completion: int, cached: int) -> float | None:
    """genai-prices' offline price of a call (None: the table has no such model, or the
    package is not installed)."""
    try:
        from genai_prices import Usage as Counted
        from genai_prices import calc_price
    except ModuleNotFoundError:
        return None
    try:
        priced = calc_price(Counted(input_tokens=prompt, output_tokens=completion, cache_read_tokens=cached or None),
                            model, provider_id=provider)
    except LookupError:
        try:  # the provider as named by the policy may not be genai-prices' name for it
            priced = calc_price(Counted(input_tokens=prompt, output_tokens=completion,
                                        cache_read_tokens=cached or None), model)
        except LookupError:
            return None
    return float(priced.total_price)


@dataclass(frozen=True, slots=True)
class Spending:
    """What a conversation's calls cost (`spent`, USD), a lower bound on its next call's
    (`next_at_least`), and the models no table prices (`unpriced`)."""

    spent: float
    next_at_least: float
    unpriced: tuple[str, ...]


def spending(usage: Any, prices: Mapping[str, Price] | None = None) -> Spending:
    """The whole conversation's spending (a `forge.records.usage.Usage`: its earlier turns' calls
    too, as a budget counts them): each call at its price, and the next call at least the
    last one's prompt and reply again, at the last call's input price."""
    calls = usage.conversation.calls
    spent, unpriced = 0.0, []
    for call in calls:
        cost = cost_of(call, prices)
        if cost is None:
            unpriced.append(str(call.model or call.request_model or "a model"))
        else:
            spent += cost
    next_at_least = 0.0
    if calls:
        last = calls[-1]
        again = cost_of(replace(last, prompt_tokens=last.total_tokens, completion_tokens=0, cached_tokens=0), prices)
        next_at_least = again or 0.0
    return Spending(spent, next_at_least, tuple(dict.fromkeys(unpriced)))


class CostBudgetExhausted(ForgeError, RuntimeError):
    """The next model call would take the run past its money budget: the run ends in
    `budget_exhausted` (the reason in the trace), not in an error."""

    def __init__(self, spent: float, budget: float, next_at_least: float) -> None:
        super().__init__(f"the cost budget is ${budget:.4f}: ${spent:.4f} spent, and the next model call costs at "
                         f"least ${next_at_least:.4f} more")
        self.spent, self.budget, self.next_at_least = spent, budget, next_at_least
