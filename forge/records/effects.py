"""Effects: how a stage action reaches the outside world, so one implementation serves
`run()` and `arun()`.

A stage action is a generator. Wherever it needs user code (the policy, a tool handler,
`verify`, an approver), a pause between retries, calls made together, or a side effect run
once, it *yields* an effect; a driver performs it and sends the
result back in, or throws the exception in where the action can classify it. The action's
return value is its verdict. A performer (`forge.machine.performers`) performs them: the
live one calls the world and journals each call, the replaying one answers from a journal.
`run_sync` drives an action in the calling thread and refuses anything that would need
awaiting; `run_async` awaits what is awaitable. The actions never know which runs them.

Effects are NamedTuples rather than frozen dataclasses: one is made per call of user code,
on every step's path, and a tuple is built several times faster.

Observers are told where the action is (a hook is no call to the world, so no effect: the
round trip through the driver cost a streamed run a tenth of its time). Their failures are
not the action's business: they leave the action as `ObserverFailed`, a `BaseException`, so
no `except Exception` in a stage can mistake one for a tool failure.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from forge.errors import ForgeError

if TYPE_CHECKING:
    from forge.agent.idempotency import IdempotencyRegistry

__all__ = [
    "AsyncNotSupported",
    "Call",
    "Effect",
    "ObserverFailed",
    "Once",
    "Sleep",
    "Steps",
    "Together",
    "complete",
    "can_await",
    "SYNCHRONOUS",
    "tell",
]

T = TypeVar("T")

SYNCHRONOUS: ContextVar[bool] = ContextVar("forge_synchronous", default=False)
"""True while `run_sync` performs an action's effects: the run is `run()`, which cannot await,
even when the thread has a running event loop (a Jupyter cell)."""


def can_await() -> bool:
    """Whether user code called now may return an awaitable: only inside a running event
    loop, and not from `run()` (a sync run in a thread whose loop runs, as in Jupyter). What
    `ChatPolicy` and MCP tools ask to choose between blocking and returning a coroutine."""
    if SYNCHRONOUS.get():
        return False
    import asyncio  # here: a loop that is never awaited never pays for importing asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Call(NamedTuple):
    """Call user code, `fn(*args)`. `what` names it in errors ("the policy", "tool 'x'").

    A call to the world has a `kind` (one of `forge.records.journal.JOURNAL_KINDS`), a
    `name` and an `identity` (what it is asked, the journal's argument hash): the performer
    journals it. `conversation` is a list the call may add to (the policy's messages): what
    it adds is journaled with its outcome and put back on replay. A call without a kind is
    local code (a user stage, `redact`), run the same on replay and not journaled.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    what: str
    kind: str = ""
    name: str = ""
    identity: Any = None
    conversation: list[Any] | None = None
    step: int = 0  # the loop step it is made for, when the run's own is not yet it (the policy's)
    hook: str = ""  # local code that names itself when it fails (`redact`)
    check: Callable[..., Any] | None = None  # what a replay asks of the call, `check(*args)`, before answering it
    # from the journal, as a live call would be asked it: a tool's argument contract, today's (raises when it refuses)
    threaded: bool = False  # under the async driver, made in a worker thread (a plain tool's handler)


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


class Together(NamedTuple):
    """Run each of `branches()` (the effects of one call each) at the same time, at most
    `limit` at once; the result sent back is what each returned, in their order. Their
    calls are journaled in that order too, whatever order they finish in, so a replay
    (which runs them one after another, calling nothing) meets them as recorded. A branch
    must not raise: it returns its call's outcome. `asynchronous[i]` says branch i calls an
    `async def` (under `arun` it is awaited; a plain one runs in a worker thread)."""

    branches: tuple[Callable[[], Generator[Effect, Any, Any]], ...]
    limit: int
    asynchronous: tuple[bool, ...]


Effect = Call | Sleep | Once | Together
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



def complete(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its end, in this thread (how a driver
    written once as a coroutine serves synchronous callers)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a synchronous stage suspended; this is a bug in forge")  # pragma: no cover


def tell(hook: str, fn: Callable[..., Any], *args: Any) -> None:
    """Tell an observer, calling `fn(*args)` (its hook `hook`, or the dispatcher of it): its
    failure leaves the action as `ObserverFailed`."""
    try:
        fn(*args)
    except Exception as error:
        raise ObserverFailed(hook, error) from error
