"""Effects: how a stage action reaches the outside world, so one implementation serves
`run()` and `arun()`.

A stage action is a generator. Wherever it needs user code (the policy, a tool handler,
`verify`, an approver), a pause between retries, a side effect run once, or to tell the
observers about a tool attempt, it *yields* an effect; a driver performs it and sends the
result back in, or throws the exception in where the action can classify it. The action's
return value is its verdict. `run_sync` performs effects in the calling thread and refuses
anything that would need awaiting; `run_async` awaits what is awaitable and sleeps with
`asyncio.sleep`. The actions themselves never know which driver runs them.

Effects are NamedTuples rather than frozen dataclasses: one is made per call of user code,
on every step's path, and a tuple is built several times faster.

Observer failures are not the action's business: they leave the action as `ObserverFailed`,
a `BaseException`, so no `except Exception` in a stage can mistake one for a tool failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from forge.errors import ForgeError

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
    "complete",
    "run_async",
    "run_sync",
]

T = TypeVar("T")


class Call(NamedTuple):
    """Call user code, `fn(*args)`. `what` names it in errors ("the policy", "tool 'x'")."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    what: str


class Sleep(NamedTuple):
    """Wait `seconds` before the next attempt."""

    seconds: float


class Once(NamedTuple):
    """Run the effects of `body()` through `registry`, once per key + fingerprint; the
    result sent back is `(value, replayed)`, as `IdempotencyRegistry.execute_once` gives."""

    registry: IdempotencyRegistry
    key: str
    fingerprint: str
    body: Callable[[], Generator[Effect, Any, Any]]


class Notify(NamedTuple):
    """Call `fn(*args)`, an observer hook named `hook`; its failure aborts the action."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    hook: str


Effect = Call | Sleep | Once | Notify
Steps = Generator[Effect, Any, T]


class AsyncNotSupported(ForgeError, TypeError):
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


def _advance(steps: Steps[T], result: Any, error: Exception | None) -> tuple[bool, Any]:
    """Resume `steps` with a result or an error: `(True, verdict)` once it returned,
    `(False, effect)` while it asks for one."""
    try:
        return False, (steps.send(result) if error is None else steps.throw(error))
    except StopIteration as done:
        return True, done.value


async def _drive(steps: Steps[T], perform: Callable[[Effect], Any]) -> T:
    """The one driver: perform each effect (awaiting what `perform` leaves awaitable) and
    hand the result or the exception back to the action, until it returns its verdict."""
    result: Any = None
    error: Exception | None = None
    while True:
        finished, effect = _advance(steps, result, error)
        if finished:
            return effect  # type: ignore[no-any-return]
        try:
            result, error = perform(effect), None
            if isinstance(result, Awaitable):
                result = await result
        except Exception as failure:  # handed to the action, which classifies it
            result, error = None, failure


def complete(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its end, in this thread (how a driver
    written once as a coroutine serves synchronous callers)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a synchronous stage suspended; this is a bug in forge")  # pragma: no cover


def _notify(effect: Notify) -> Any:
    try:
        return effect.fn(*effect.args)
    except Exception as error:
        raise ObserverFailed(effect.hook, error) from error


def run_sync(steps: Steps[T], sleep: Callable[[float], Any]) -> T:
    """Perform `steps` synchronously and return the action's result.

    A `Call` whose result is awaitable is thrown back into the action as
    `AsyncNotSupported`. `sleep(seconds)` pauses between retries.
    """

    def perform(effect: Effect) -> Any:
        if type(effect) is Call:
            value = effect.fn(*effect.args)
            if isinstance(value, Awaitable):
                if isinstance(value, Coroutine):
                    value.close()  # never awaited on purpose: say so once, not as a RuntimeWarning
                raise AsyncNotSupported(effect.what)
            return value
        if isinstance(effect, Notify):
            return _notify(effect)
        if isinstance(effect, Sleep):
            return sleep(effect.seconds)
        assert isinstance(effect, Once)
        return effect.registry.execute_once(effect.key, effect.fingerprint, lambda: run_sync(effect.body(), sleep))

    return complete(_drive(steps, perform))


def run_async(steps: Steps[T], sleep: Callable[[float], Any] | None = None) -> Coroutine[Any, Any, T]:
    """Perform `steps`, awaiting awaitable results; `sleep` may be sync or async
    (default: asyncio.sleep)."""
    if sleep is None:
        import asyncio  # here, not at import: only arun pays for it

        sleep = asyncio.sleep

    def perform(effect: Effect) -> Any:
        if isinstance(effect, Call):
            return effect.fn(*effect.args)
        if isinstance(effect, Notify):
            return _notify(effect)
        if isinstance(effect, Sleep):
            return sleep(effect.seconds)
        return effect.registry.aexecute_once(effect.key, effect.fingerprint, lambda: run_async(effect.body(), sleep))

    return _drive(steps, perform)
