"""Fallbacks between models: a call the first model fails for a passing reason (it timed
out, the endpoint could not be reached, it was rate-limited or answered 5xx, after the
client's own retries) is asked of the next model instead, and so on (issue 51, item 3).

A `FallbackPolicy` is a model policy (`forge.policy.ModelPolicy`) over other ones (each a
`ChatPolicy` or a native one such as `AnthropicPolicy`, on endpoints of their own): the first
builds every request, and the request is sent to each in turn, with its own model name,
until one answers; a model whose provider's wire form is another's gets the request turned
into its form through the chat form (`as_chat`, `from_chat`), so Claude can stand in for
an OpenAI model and the other way round. The loop journals it
as one model call whose request is the first model's and whose reply says which model
answered (`usage.request_model`), so `result.usage`, the trace, OpenTelemetry and
`forge ui` show it, and a replay, a fork or a cassette answers it from the journal exactly.
A failure that is not passing (a 400, a refusal, a reply with no message) is not tried
again elsewhere: it ends the call as it would have. A call that succeeds at once costs
nothing more than the first model's.

Raises (when a `FallbackPolicy` is made):
    UsageError: fewer than two models, one that is not a model policy, or a timeout that is
        no number of seconds above 0.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from forge.agent.observations import LoopState
from forge.errors import UsageError
from forge.records.effects import can_await

__all__ = ["FallbackPolicy", "passing"]


def passing(error: BaseException) -> bool:
    """Whether the model call failed for a passing reason, worth asking another model:
    a timeout, no connection, a 429 or a 5xx (what is left after the client's retries), as
    any of the providers' SDKs in use raises it."""
    if isinstance(error, TimeoutError):
        return True
    for name in ("openai", "anthropic"):
        sdk = sys.modules.get(name)
        if sdk is None:
            continue  # not imported: none of its errors can have been raised
        if isinstance(error, sdk.APITimeoutError | sdk.APIConnectionError):
            return True
        if isinstance(error, sdk.APIStatusError):
            return bool(error.status_code == 429 or error.status_code >= 500)
    genai = sys.modules.get("google.genai.errors")
    if genai is not None and isinstance(error, genai.APIError):
        return bool(error.code == 429 or error.code >= 500)
    return any(isinstance(error, sys.modules[name].TransportError) for name in ("httpx2", "httpx")
               if name in sys.modules)  # (an SDK's HTTP client's own: google-genai lets them through)


@dataclass(frozen=True)
class FallbackPolicy:
    """`models[0]`, falling back on `models[1:]` in turn when a call fails for a `passing`
    reason (`on(error)` decides instead when given); `timeout` bounds each call in seconds
    (each model gets its own). See the module."""

    models: tuple[Any, ...]
    timeout: float | None = None
    on: Callable[[BaseException], bool] = field(default=passing, compare=False)

    def __init__(self, models: Iterable[Any], *, timeout: float | None = None,
                 on: Callable[[BaseException], bool] = passing) -> None:
        listed = tuple(models)
        if len(listed) < 2:
            raise UsageError(f"FallbackPolicy falls back from one model to another: give two or more, got {len(listed)}")
        odd = [model for model in listed if not (callable(getattr(model, "requests", None))
                                                 and callable(getattr(model, "send", None)))]
        if odd:
            raise UsageError(f"FallbackPolicy's models are model policies (ChatPolicy, …), got {odd[0]!r:.100}")
        if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
            raise UsageError(f"FallbackPolicy's timeout is a number of seconds above 0, got {timeout!r}")
        if not callable(on):
            raise UsageError(f"FallbackPolicy's on is a function of the error, got {on!r:.100}")
        object.__setattr__(self, "models", listed)
        object.__setattr__(self, "timeout", timeout)
        object.__setattr__(self, "on", on)

    @property
    def model(self) -> str:
        return str(getattr(self.models[0], "model", "model"))

    @property
    def provider(self) -> str:
        return str(getattr(self.models[0], "provider", "openai"))

    @property
    def tools(self) -> Sequence[Any]:
        return tuple(getattr(self.models[0], "tools", ()))

    def _each(self, method: str, *args: Any) -> FallbackPolicy:
        """This policy with `method(*args)` made of each model that has it."""
        made = tuple(getattr(model, method)(*args) if callable(getattr(model, method, None)) else model
                     for model in self.models)
        return replace(self, models=made)

    def with_tools(self, tools: Sequence[Any]) -> FallbackPolicy:
        return self._each("with_tools", tools)

    def with_output(self, output: Any) -> FallbackPolicy:
        return self._each("with_output", output)

    def with_token_budget(self, budget: int) -> FallbackPolicy:
        return self._each("with_token_budget", budget)

    def wrapping_up(self) -> FallbackPolicy:
        """Each model making the wrap-up call (`ChatPolicy.wrapping_up`)."""
        return self._each("wrapping_up")

    def as_chat(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """`request` (in the first model's form) in the chat-completions form."""
        return dict(self.models[0].as_chat(request))

    def from_chat(self, chat: Mapping[str, Any]) -> dict[str, Any]:
        """A chat-completions request in the first model's form (`send` turns it into each
        other model's in turn)."""
        return dict(self.models[0].from_chat(chat))

    def requests(self, goal: str, state: LoopState) -> Any:
        """The first model's requests (see `forge.policy.ModelPolicy`)."""
        return self.models[0].requests(goal, state)

    def __call__(self, goal: str, state: LoopState) -> Any:
        from forge.models.chat import decided

        return decided(self, goal, state)

    def send(self, request: Mapping[str, Any]) -> Any:
        """`request` sent to each model in turn until one answers (awaitable where the
        caller can await). What fails raises the last model's error, or the first error that
        is not passing."""
        if can_await():
            return self._asend(request)
        for number, model in enumerate(self.models):
            try:
                return model.send(self._for(number, model, request))
            except Exception as error:
                if number == len(self.models) - 1 or not self.on(error):
                    raise
        raise AssertionError("unreachable: the last model's failure is raised")

    async def _asend(self, request: Mapping[str, Any]) -> Any:
        for number, model in enumerate(self.models):
            try:
                reply = model.send(self._for(number, model, request))
                return await reply if inspect.isawaitable(reply) else reply
            except Exception as error:
                if number == len(self.models) - 1 or not self.on(error):
                    raise
        raise AssertionError("unreachable: the last model's failure is raised")

    def _for(self, number: int, model: Any, request: Mapping[str, Any]) -> dict[str, Any]:
        """`request` as `model` is sent it: its own model's name, and the timeout."""
        sent = dict(request)
        primary = self.models[0]
        if number and getattr(model, "WIRE", "chat") != getattr(primary, "WIRE", "chat"):
            sent = model.from_chat(primary.as_chat(request))
        if number:
            sent["model"] = getattr(model, "model", sent.get("model"))
        if self.timeout is not None:
            sent["timeout"] = self.timeout
        return sent
