"""Effects: how a stage action reaches the outside world, so one implementation serves
`run()` and `arun()`.

A stage action is a generator. Wherever it needs user code (the policy, a tool handler,
`verify`, an approver), a pause between retries, a side effect run once, or to tell the
observers about a tool attempt, it *yields* an effect; a driver performs it and sends the
result back in, or throws the exception in where the action can classify it. The action's
return value is its verdict. `run_sync` performs effects in the calling thread and refuses
anything that would need awaiting; `run_async` awaits what is awaitable and sleeps with
`asyncio.sleep`. The actions themselves never know which driver runs them.

Observer failures are not the action's business: they leave the action as `ObserverFailed`,
a `BaseException`, so no `except Exception` in a stage can mistake one for a tool failure.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from forge.agent.idempotency import IdempotencyRegistry

__all__ = [
    "AsyncNotSupported",
    "Call",
    "Effect",
    "Notify",
    "ObserverFailed",
    "Once",
    "Sleep",
    "Steps",
    "run_async",
    "run_sync",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """Call user code, `fn(*args)`. `what` names it in errors ("the policy", "tool 'x'")."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    what: str


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait `seconds` before the next attempt."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Once:
    """Run the effects of `body()` through `registry`, once per key + fingerprint; the
    result sent back is `(value, replayed)`, as `IdempotencyRegistry.execute_once` gives."""

    registry: IdempotencyRegistry
    key: str
    fingerprint: str
    body: Callable[[], Generator[Effect, Any, Any]]


@dataclass(frozen=True, slots=True)
class Notify:
    """Call `fn(*args)`, an observer hook named `hook`; its failure aborts the action."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    hook: str


Effect = Call | Sleep | Once | Notify
Steps = Generator[Effect, Any, T]


class AsyncNotSupported(TypeError):
    """User code returned an awaitable under `run()`, which cannot await it."""

    def __init__(self, what: str, declared: bool = False) -> None:
        problem = "is an `async def`" if declared else "returned an awaitable (is it an `async def`?)"
        super().__init__(f"{what} {problem}; run() cannot await it: use `await loop.arun(goal)`")
        self.what = what


class ObserverFailed(BaseException):
    """An observer hook raised inside a stage action; `error` is what it raised, `hook`
    names it. A BaseException so that no stage's `except Exception` swallows it."""

    def __init__(self, hook: str, error: BaseException) -> None:
        super().__init__(f"{hook} raised {type(error).__name__}")
        self.hook, self.error = hook, error


class _Performer:
    """Performs one effect; `run_sync` and `run_async` differ only here."""

    def __init__(self, sleep: Callable[[float], Any]) -> None:
        self.sleep = sleep

    async def call(self, effect: Call) -> Any:
        raise NotImplementedError

    async def once(self, effect: Once) -> Any:
        raise NotImplementedError

    async def perform(self, effect: Effect) -> Any:
        if isinstance(effect, Call):
            return await self.call(effect)
        if isinstance(effect, Notify):
            try:
                return effect.fn(*effect.args)
            except Exception as error:
                raise ObserverFailed(effect.hook, error) from error
        if isinstance(effect, Sleep):
            pause = self.sleep(effect.seconds)
            return await pause if inspect.isawaitable(pause) else pause
        return await self.once(effect)

    async def drive(self, steps: Steps[T]) -> T:
        """Run `steps` to completion, performing each effect it yields."""
        result: Any = None
        error: Exception | None = None
        while True:
            try:
                effect = steps.send(result) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            result, error = None, None
            try:
                result = await self.perform(effect)
            except Exception as failure:  # handed to the action, which classifies it
                error = failure


class _SyncPerformer(_Performer):
    """Never suspends: a coroutine of it completes in one `send(None)`."""

    async def call(self, effect: Call) -> Any:
        value = effect.fn(*effect.args)
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()  # never awaited on purpose: say so once, not as a RuntimeWarning
            raise AsyncNotSupported(effect.what)
        return value

    async def once(self, effect: Once) -> Any:
        return effect.registry.execute_once(effect.key, effect.fingerprint,
                                            lambda: _complete(self.drive(effect.body())))


class _AsyncPerformer(_Performer):
    async def call(self, effect: Call) -> Any:
        value = effect.fn(*effect.args)
        return await value if inspect.isawaitable(value) else value

    async def once(self, effect: Once) -> Any:
        return await effect.registry.aexecute_once(effect.key, effect.fingerprint,
                                                   lambda: self.drive(effect.body()))


def _complete(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its end, in this thread."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a synchronous stage suspended; this is a bug in forge")  # pragma: no cover


def run_sync(steps: Steps[T], sleep: Callable[[float], Any]) -> T:
    """Perform `steps` synchronously and return the action's result.

    A `Call` whose result is awaitable is thrown back into the action as
    `AsyncNotSupported`. `sleep(seconds)` pauses between retries.
    """
    return _complete(_SyncPerformer(sleep).drive(steps))


def run_async(steps: Steps[T], sleep: Callable[[float], Awaitable[Any] | Any] = asyncio.sleep) -> Awaitable[T]:
    """Perform `steps`, awaiting awaitable results; `sleep` may be sync or async."""
    return _AsyncPerformer(sleep).drive(steps)
