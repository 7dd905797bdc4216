"""The durable performer: a run's journal kept in the runs' database, so the run survives
the process.

A durable run is an ordinary run whose performer (`forge.machine.performers`) writes each
call to the world to the table `forge_journal` as it settles. When the workflow is recovered
after a crash, the run starts again from the beginning with the calls stored so far: those
are answered from the database without calling anything (as `AgentLoop.replay` does), and
from the first call not stored the run goes on live. The machine takes the same transitions,
so the trace comes out the same.

Writes are batched to what recovery needs, two commits per loop step:

- after the policy decides (with the previous step's verify), or, for a policy that asks a
  model through forge, after each request to the model (its decision is made again from
  the stored replies on recovery, and stored with the step's next write): a recovered run
  never asks the model again for a decision it made;
- after each tool attempt: a tool whose outcome was stored is never called again. A tool
  running at the crash is called again on recovery with the same idempotency key
  (`idempotency_key()`), unless it says `on_crash="ask"`: then a marker is stored before the
  call, and a recovered run that finds the marker with no outcome after it asks a person
  whether the call ran (the run waits in `in_doubt`).

A run waiting for a person asks here (`forge.machine.asking`): live, the workflow waits
for the answer (`ask`), which is stored at once as that call's outcome. On recovery a stored
answer is the run's again, and the workflow's wait is made again too (DBOS answers it from
what it recorded, so the run's DBOS operations come in the order they first did); an answer
among a fork's first rows (`seeded`, copied from the run it was forked from) was never
waited for by this workflow, and is only replayed.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from forge.durable.database import RunsDatabase
from forge.durable.serializer import from_row, row
from forge.errors import UsageError
from forge.machine.performers import Performer, Position, Recording, ReplayingPerformer
from forge.records.effects import Call
from forge.records.journal import WITHIN_CALLS, DecidedAsCode, Journal, JournalEntry, SharedRequests
from forge.tools import Tool

__all__ = ["DurableChild", "DurablePerformer", "ForkSeed", "InDoubt", "ProcessStopping", "StoredCalls", "WorkerHooks",
           "idempotency_key"]

_KEY: ContextVar[str | None] = ContextVar("forge_durable_key", default=None)

InDoubt = Callable[[Tool, Mapping[str, Any], str], tuple[bool, Any]]
"""`in_doubt(tool, arguments, key) -> (ran, value)`: asks whether a call running at a crash
ran (`(True, its result)`) or is to be called again (`(False, None)`)."""


def idempotency_key() -> str | None:
    """Inside a durable run's tool handler, the key of this call: the intent's own
    `idempotency_key`, else `RUN_ID/STEP/TOOL`. The same after a crash, so a handler that
    passes it on (an HTTP `Idempotency-Key`, a unique column) makes being called again
    harmless. None outside a durable tool call."""
    return _KEY.get()


class StoredCalls:
    """A run's journal as the database has it: its calls, and the call of an
    `on_crash="ask"` tool that was running at a crash (`in_flight`: transition, step and
    tool of a start marker with no outcome after it), if any. `part` reads one of the
    journals of a run stored by an earlier forge, one per answer. `codec` is the loop's
    (`AgentLoop(codec=...)`): without it a value it wrote is read as it was stored.

    A row is one JSON object in the wire form (`forge.durable.serializer`): a call
    (`JournalEntry.to_json`, with what it was asked), `{"type": "started", "transition",
    "step", "tool"}` (a start marker) or `{"type": "together", "transition", "index",
    "call"}` (a call of a batch, stored as it settled)."""

    def __init__(self, database: RunsDatabase, run_id: str, part: int = 1, codec: Any = None) -> None:
        self.database, self.run_id, self.codec = database, run_id, codec
        self.requests = SharedRequests()  # model requests share their messages with the one before (read, then written)
        self.calls: list[JournalEntry] = []
        self.in_flight: tuple[int, int, str] | None = None
        self.together: dict[tuple[int, int], list[JournalEntry]] = {}
        """The calls of a batch (`Together`) stored as each settled, by the batch's transition
        and the call's place in it: what a recovered run answers a batch from when the crash
        came before the batch's calls were stored in order."""
        self._lock = threading.Lock()  # the calls of a batch store from threads of their own
        rows = database.journal_of(run_id, part)
        for number, stored in enumerate(rows):
            item = self._item(from_row(stored), number)
            if isinstance(item, JournalEntry):
                self.calls.append(item)
                self.in_flight = None
            elif item[0] == "together":  # ("together", transition, index, entry): a batch's call, settled
                self.together.setdefault((item[1], item[2]), []).append(item[3])
            else:  # ("started", transition, step, tool): a start marker
                self.in_flight = item[1:]
        self.rows = len(rows)

    def _item(self, data: Any, number: int) -> JournalEntry | tuple[Any, ...]:
        """A row's call or marker; a row an earlier forge pickled is one already.

        Raises:
            UsageError: the row is neither."""
        if isinstance(data, JournalEntry) or (isinstance(data, tuple) and data[:1] in (("together",), ("started",))):
            return data
        if not isinstance(data, dict) or data.get("type") not in ("call", "together", "started"):
            raise UsageError(f"run {self.run_id!r}'s journal row {number} is neither a call nor a marker")
        if data.get("type") == "together":
            return ("together", data["transition"], data["index"], self._call(data["call"]))
        if data.get("type") == "started":
            return ("started", data["transition"], data["step"], data["tool"])
        return self._call(data)

    def _call(self, data: Any) -> JournalEntry:
        return data if isinstance(data, JournalEntry) else \
            JournalEntry.from_json(self.requests.read(data), self.codec, needs_codec=False)

    def append(self, items: Sequence[JournalEntry | tuple[Any, ...]], status: str | None = None) -> None:
        """Store `items` (calls and markers) after the rows stored so far, and `status` (the
        run's event, `forge_status`) with them: one commit.

        Raises:
            JournalEncodeError: a call's value has no wire form and the loop no codec for
                it; nothing is stored then.
        """
        if items or status is not None:
            rows = [row(self._data(item)) for item in items]
            with self._lock:
                self.database.append(self.run_id, self.rows, rows, status=status)
                self.rows += len(items)

    def _data(self, item: JournalEntry | tuple[Any, ...]) -> dict[str, Any]:
        if isinstance(item, JournalEntry):
            return self.requests.written(item.to_json(self.codec, identity=True))
        if item[0] == "together":
            return {"type": "together", "transition": item[1], "index": item[2],
                    "call": item[3].to_json(self.codec, identity=True)}
        return {"type": "started", "transition": item[1], "step": item[2], "tool": item[3]}


class ProcessStopping(BaseException):
    """Ends a run's thread when its process shuts down: a waiting run's, or one under way
    at its next call to the world. Not an Exception, so neither a stage nor DBOS records it:
    the run stays pending, for recovery."""


Ask = Callable[[Any, Any], Any]
"""`ask(waiting, run)`: wait for a person's answer to what `run` waits for (`Waiting`); the
answer as the journal keeps it (`Answer.to_json()`), None when the deadline passed; under
`arun`, a coroutine of that."""


@dataclass(frozen=True, slots=True)
class WorkerHooks:
    """What the process running a durable run gives its performer: how to ask about a call
    found in flight at a crash (`in_doubt`), how to wait for a person's answer (`ask`), the
    run's configuration with the tools an answer adds (`configure(extra_tools)`), and the
    event set when the process stops (no call is made after it)."""

    in_doubt: InDoubt | None = None
    ask: Ask | None = None
    configure: Callable[[tuple[str, ...]], Any] | None = None
    stopping: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True, slots=True)
class ForkSeed:
    """What a fork's run was seeded with: how many of its stored calls were copied from the
    run it was forked from (`count`), and the patched call among them (`patched`, its
    index, and the `patch`), marked as `ReplayingPerformer` marks it."""

    count: int = 0
    patched: int | None = None
    patch: Any = None


class DurablePerformer(ReplayingPerformer):
    """Answers the calls `stored` has (calling nothing), then performs live, storing each
    call as described in the module: its run's, whose id is `stored.run_id`, the run's own
    tools (for `on_crash`) and sleep. `hooks` are what the process running it gives it;
    `seed`, for a fork, what its journal was seeded with.
    """

    __slots__ = ("_added", "_asked_at", "_children", "_flush_settled", "_kept", "_pending", "asker", "asks_later",
                 "configure",
                 "in_doubt", "key_prefix", "run_id", "seeded", "shown", "status_later", "stopping", "stored", "tools")

    def __init__(self, stored: StoredCalls, journal: Journal, run: Any, hooks: WorkerHooks | None = None,
                 seed: ForkSeed | None = None) -> None:
        hooks, seed = hooks or WorkerHooks(), seed or ForkSeed()
        super().__init__(Recording(stored.calls, seed.patched, seed.patch), journal, run)
        self.stopping = hooks.stopping
        self.sleep = run.config.sleep
        self.stored, self.run_id, self.tools = stored, stored.run_id, run.config.tools
        self.key_prefix = stored.run_id  # a tool call's key is `KEY_PREFIX/STEP/TOOL` (`idempotency_key()`)
        self.in_doubt, self.asker, self.configure, self.seeded = hooks.in_doubt, hooks.ask, hooks.configure, seed.count
        self._added: tuple[str, ...] = ()
        self._kept = len(stored.calls)  # journal entries already in the database
        self._pending: list[tuple[Any, ...]] = []
        self._children: list[DurableChild] = []  # the child runs of the tool call under way, stored with it
        self._flush_settled = False  # under arun: store the call that is awaited once it settles
        self._asked_at: int | None = None  # the step of the last request to a model
        self.shown = 0  # transitions fired before the latest live call began: what a follower may read
        self.asks_later = False
        """Whether an approver's "ask a person" is stored with the question it leads to, and a
        person's answer with the step's next write (a run in a program: its question is in
        `forge_status`, written with its journal; an answer lost to a crash before that write
        is taken again from `forge_answers`)."""
        self.status_later: str | None = None  # the run's status, stored with the next write

    @property
    def database(self) -> RunsDatabase:
        return self.stored.database

    def transitions(self, first: int, count: int) -> list[Any]:
        """Records `first` (0-based) up to `count` of the run's trace (`forge.durable.live`)."""
        run: Any = self._run()
        return [] if run is None else list(run.trace[first:count])

    def flush(self, status: str | None = None) -> None:
        """Store the calls settled since the last write, with `status` (or one left to go
        with the next write, `status_later`): one commit; none when nothing is new."""
        for child in self._children:  # what a child settled after its last write (its last verify)
            child.flush()
        items: list[JournalEntry | tuple[Any, ...]] = [*self._pending, *self.journal[self._kept:]]
        kept = max(self._kept, len(self.journal))  # while it replays, the journal is behind what is stored
        status = status if status is not None else self.status_later
        self.stored.append(items, status)
        self._kept, self._pending, self.status_later = kept, [], None

    def journal_ahead(self) -> bool:
        """Whether calls are settled and not stored that a recovery could not make again
        as they were: any but a person's answer (taken again from `forge_answers`) and a
        decision made from stored model replies (made again from them)."""
        return any(entry.kind != "answer" and not (entry.kind == "policy" and type(entry.identity) is DecidedAsCode)
                   for entry in self.journal[self._kept:])

    def answers_decision(self) -> bool:
        """A recovered run takes every stored decision from the database (recovery resumes
        the run; it does not test the policy)."""
        expected = self._expected()
        return expected is not None and expected.kind == "policy"

    def asks(self) -> bool:
        """A durable run waiting for input is always answered: by a person, or on recovery
        by the answer stored."""
        return self.asker is not None

    def ask(self, waiting: Any) -> Any:
        assert self.asker is not None, "asks() is True only with an asker"
        return self.asker(waiting, self._run())

    def child_performer(self, path: str) -> Callable[[Journal, Any], Performer] | None:
        """A child run's performer keeps its calls as this one does, under the child's path,
        asks this run's person, and keys its tool calls by this call's key (`DurableChild`)."""
        key = _KEY.get() or path

        def made(journal: Journal, run: Any) -> DurableChild:
            child = DurableChild(journal, run, self, path, key)
            self._children.append(child)
            return child

        return made

    def with_tool(self, config: Any, name: str) -> Any:
        if self.configure is None:
            return super().with_tool(config, name)
        self._added = (*self._added, name)
        return self.configure(self._added)

    def replaying(self) -> bool:
        return bool(self.remaining)

    def call(self, effect: Call) -> Any:
        if effect.kind == "answer" and self.remaining and self._next >= self.seeded:
            return self._answered_again(effect)
        if effect.kind in WITHIN_CALLS and (taken := self.within_answer(effect)) is not None:
            if taken.error is not None:
                raise taken.error
            return taken.value
        if effect.kind == "tool" and self.remaining:
            self.take_within()  # a tool call cut short: the calls made inside it are stored, its outcome is not
        if not effect.kind or self.remaining:
            return super().call(effect)
        if self.stopping.is_set():
            raise ProcessStopping(self.run_id)
        self.shown = len(self._run().trace)  # type: ignore[union-attr]
        if effect.kind == "tool":
            return self._tool(effect)
        return self._stored_when_made(effect)

    def _stored_when_made(self, effect: Call) -> Any:
        """`effect` (not a tool's) made live and stored at once when recovery could not make
        it again as it was: what a model, a guard, an approver, a person, a handoff or an MCP
        server's sample said (a decision made from stored replies is stored with the step's
        next write)."""
        value = Performer.call(self, effect)
        if effect.kind == "model":
            self._asked_at = effect.step
        elif effect.kind == "policy" and type(effect.identity) is DecidedAsCode and self._asked_at == effect.step:
            return value  # made again from the stored requests on recovery: stored with the step's next write
        if effect.kind in ("model", "policy", "guard", "approver", "answer", "handoff", "sampling"):
            if self.asks_later and (effect.kind == "answer" or (effect.kind == "approver" and value is None)):
                return value  # stored with the question it leads to, or the step's next write (`asks_later`)
            if inspect.isawaitable(value):
                self._flush_settled = True
            else:
                self.flush()
        return value

    def _answered_again(self, effect: Call) -> Any:
        """A stored answer, on recovery: the workflow's wait is made again (DBOS answers it
        from its record), and the run takes the stored answer."""
        transition, step = self.where()
        value = self._take(JournalEntry(self.journal.run_id, transition, effect.step or step, effect.kind,
                                        effect.name, effect.identity)).value
        waited = effect.fn(*effect.args)
        if inspect.isawaitable(waited):
            return _after(waited, value)
        self.settled(effect, 0, value, None)
        return value

    def settled(self, effect: Call, before: int, value: Any, error: BaseException | None) -> None:
        super().settled(effect, before, value, error)
        if self._flush_settled:  # an awaited call (arun) is stored as it settles, as a sync one is
            self._flush_settled = False
            self.flush()

    def _tool(self, effect: Call) -> Any:
        self._children.clear()  # the last call's: stored with it
        transition, step = self.where()
        run: Any = self._run()
        intent = getattr(run, "intent", None)
        key = intent.idempotency_key if intent is not None and intent.idempotency_key else \
            f"{self.key_prefix}/{step}/{effect.name}"
        tool = self.tools.get(effect.name)
        if tool is not None and tool.on_crash == "ask":
            if self.stored.in_flight == (transition, step, effect.name) and self.in_doubt is not None:
                self.stored.in_flight = None
                ran, value = self.in_doubt(tool, effect.identity, key)
                if ran:
                    self.settled(effect, 0, value, None)
                    self.flush()
                    return value
            self._pending.append(("started", transition, step, effect.name))
        if self._pending or self.journal_ahead():  # what the call must find stored if it is cut short
            self.flush()
        token = _KEY.set(key)
        try:
            value = Performer.call(self, effect)
        except BaseException:
            self.flush()  # the call's error is its outcome
            raise
        finally:
            _KEY.reset(token)
        if inspect.isawaitable(value):  # an async handler runs when awaited: under its key, stored once settled
            self._flush_settled = True
            return _keyed(value, key)
        self.flush()
        return value

    def branches(self, count: int) -> list[Performer] | None:
        """Live, calls made together journal apart, each stored as it settles
        (`_TogetherCall`), and are stored again in call order once all have (`merge`): on
        recovery a call whose outcome was stored is answered from it, and only a call running
        at the crash is made again, under the same idempotency key."""
        if self.replaying():  # a replay runs them one after another through this performer
            return None
        if self.stopping.is_set():
            raise ProcessStopping(self.run_id)
        run: Any = self._run()
        self.shown = len(run.trace)
        where = self.where()
        return [_TogetherCall(self, run, where, index) for index in range(count)]

    def merge(self, branches: Sequence[Performer]) -> None:
        super().merge(branches)
        self.flush()

    def wait(self, seconds: float, asynchronous: bool = False) -> Any:
        if self.remaining:
            return super().wait(seconds, asynchronous)
        if self.stopping.is_set():
            raise ProcessStopping(self.run_id)
        self.shown = len(self._run().trace)  # type: ignore[union-attr]
        return Performer.wait(self, seconds, asynchronous)


class _TogetherCall(ReplayingPerformer):
    """The performer of one call of a durable run's batch (`Together`): it answers what the
    database stored of this call before a crash (its attempts' outcomes and waits), then
    performs live, storing each outcome as it settles (a `("together", transition, index,
    entry)` row), so a crash in the middle of the batch loses no outcome already had. Its
    handler's `idempotency_key()` is `RUN/STEP/TOOL/N`, N its place in the batch (1-based).
    `where` is the batch's transition and step; `index`, the call's place in it (0-based)."""

    __slots__ = ("_index", "_key", "_parent", "_stored", "_transition")

    def __init__(self, parent: DurablePerformer, run: Position, where: tuple[int, int], index: int) -> None:
        transition, step = where
        stored = parent.stored.together.get((transition, index), ())
        super().__init__(Recording(stored), Journal(run_id=parent.journal.run_id, codec=parent.journal.codec), run)
        self.sleep, self.async_sleep = parent.sleep, parent.async_sleep
        self._parent, self._transition, self._index, self._key = parent, transition, index, f"{parent.run_id}/{step}"
        self._stored = len(stored)

    def replaying(self) -> bool:
        return bool(self.remaining)

    def call(self, effect: Call) -> Any:
        if not effect.kind or self.remaining:
            return super().call(effect)
        if self._parent.stopping.is_set():
            raise ProcessStopping(self._parent.run_id)
        return _under_key(f"{self._key}/{effect.name}/{self._index + 1}", lambda: Performer.call(self, effect))

    def settled(self, effect: Call, before: int, value: Any, error: BaseException | None) -> None:
        super().settled(effect, before, value, error)
        self._store()

    def wait(self, seconds: float, asynchronous: bool = False) -> Any:
        if self.remaining:
            return super().wait(seconds, asynchronous)
        waited = Performer.wait(self, seconds, asynchronous)
        self._store()
        return waited

    def _store(self) -> None:
        """Store what this call journaled since the last time: one commit."""
        fresh = self.journal[self._stored:]
        self._stored = len(self.journal)
        self._parent.stored.append([("together", self._transition, self._index, entry) for entry in fresh])


class DurableChild(DurablePerformer):
    """The performer of a durable run's child run (`AgentLoop.as_tool`, a `CodeTool`'s
    program): the child's journal is kept as its parent's is, as each call settles, under
    the child's path (`RUN/TOOL.N`), so a child cut short by a crash, or parked for a
    person's answer and taken on by another worker, replays the calls it made and goes on
    live where they end: a read before the wait is not made again. Its questions reach the
    parent's person, naming the child (`Waiting.run`), its calls stored first. Each tool call
    of the child runs under an idempotency key of its own (`idempotency_key()`), made from
    the key of the call that runs the child: `CALL_KEY/STEP/TOOL` (or the intent's own key).
    """

    __slots__ = ("_parent",)

    def __init__(self, journal: Journal, run: Any, parent: DurablePerformer, path: str, key: str) -> None:
        super().__init__(StoredCalls(parent.database, path, codec=parent.stored.codec), journal, run,
                         WorkerHooks(stopping=parent.stopping))
        self._parent, self.key_prefix = parent, key

    def asks(self) -> bool:
        return True

    def ask(self, waiting: Any) -> Any:
        self.flush()  # what led to the question, stored before the run parks or waits
        return self._parent.ask(waiting if waiting.run is not None else replace(waiting, run=self.run_id))


async def _after(pending: Any, value: Any) -> Any:
    """`value`, once `pending` (a wait DBOS answers from its record) is done."""
    await pending
    return value


def _under_key(key: str, call: Callable[[], Any]) -> Any:
    """`call()` (a handler's call) under the idempotency key `key` (`idempotency_key()`); an
    async handler runs when awaited, so what it returns is awaited under the key too."""
    token = _KEY.set(key)
    try:
        value = call()
    finally:
        _KEY.reset(token)
    return _keyed(value, key) if inspect.isawaitable(value) else value


async def _keyed(pending: Any, key: str) -> Any:
    """Await an async handler's call with its idempotency key set (`idempotency_key()`)."""
    token = _KEY.set(key)
    try:
        return await pending
    finally:
        _KEY.reset(token)
