"""Performers: the one seam through which a run's effects reach the world.

A stage action yields effects (`forge.records.effects`); `run_sync` and `run_async` drive it,
handing each effect to the run's performer and its result (or exception) back to the
action. Every call to the world goes through `Performer.call` and every retry wait through
`Performer.wait`, so the performer sees each one:

- `Performer`, the live one, calls the world and records each call to the world in the
  run's `Journal` (its identity and its outcome).
- `ReplayingPerformer` calls nothing in the world: it answers each call from a recorded
  journal, in order, and raises `JournalMiss` for a call that is not the one recorded
  there. Local code (user stages, `redact`, a policy that runs as code) and observers still
  run; a policy's decision made again is checked against the recorded one.
- `ForkingPerformer` replays the calls before a transition (and a patched one at it), then
  performs live: a fork (`AgentLoop.fork`).

A durable run's performer (`forge.durable.performer`) also keeps the journal in the runs'
database, and replays it when the run is recovered.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence, Sized
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from forge.errors import UsageError
from forge.events import sink
from forge.records.effects import (
    SYNCHRONOUS,
    AsyncNotSupported,
    Call,
    Effect,
    Once,
    Sleep,
    Steps,
    Together,
    tell,
)
from forge.records.journal import (
    WITHIN_CALLS,
    ContractRefused,
    DecidedAsCode,
    Journal,
    JournalEntry,
    JournalMiss,
    decided_as_code,
    same_decision,
)
from forge.records.recorded import revived

__all__ = ["AskingParent", "ForkingPerformer", "LiveRun", "Masking", "Performer", "Position", "Recording", "ReplayStopped",
           "ReplayingPerformer",
           "run_async", "run_sync"]

T = TypeVar("T")


class Position(Protocol):
    """What a performer reads of its run to place each call: the transitions so far and
    the loop step (a `forge.machine.run.Run`)."""

    @property
    def trace(self) -> Sized: ...

    @property
    def step(self) -> int: ...

    hook: str


class ReplayStopped(BaseException):
    """Carries a `JournalMiss` out of a replayed run. A BaseException, so that no stage's
    `except Exception` takes the miss for the policy's or a tool's failure: the replay
    stops where the run left its journal, and `AgentLoop.replay` raises the miss."""

    def __init__(self, miss: JournalMiss) -> None:
        super().__init__(str(miss))
        self.miss = miss


class Performer:
    """Performs effects for real and journals each call to the world.

    `journal` receives the entries; `run` is the run they are made for (held weakly: the
    run holds its performer), which says the transition and step firing; `sleep` waits
    under `run()`, `async_sleep` (default `asyncio.sleep`) under `arun()`. `marked` is what
    the transition firing now must say of a call this performer answered otherwise than the
    world would (a fork's patch); the engine takes it into the transition's record.
    """

    __slots__ = ("_run", "async_sleep", "journal", "marked", "sleep")

    def __init__(self, journal: Journal, run: Position, sleep: Callable[[float], Any],
                 async_sleep: Callable[[float], Any] | None = None) -> None:
        self.journal, self.sleep, self.async_sleep = journal, sleep, async_sleep
        self._run = weakref.ref(run)
        self.marked: Mapping[str, Any] | None = None

    def answers_decision(self) -> bool:
        """Whether the policy's next decision is answered without running the policy (a
        replay whose journal holds it as the world's answer): live, never."""
        return False

    def asks(self) -> bool:
        """Whether someone answers a run waiting in a needs-input state here (then `ask` is
        called, as a call of kind `answer`): live in memory nobody does, and the run ends
        in that state (`forge.machine.asking`)."""
        return False

    def ask(self, waiting: Any) -> Any:
        """The answer to `waiting` (`Answer.to_json()`), or None when its deadline passed;
        what a performer that `asks` waits for. Never called on this one.

        Raises:
            UsageError: always: nobody answers a live run in memory.
        """
        raise UsageError(f"nobody answers a run waiting in {waiting.state} here: it ends there")

    def with_tool(self, config: Any, name: str) -> Any:
        """The run's configuration with the tool `name` added, for an answer that adds it
        (`Answer.add_tool`).

        Raises:
            UsageError: this performer has no such tool to give (only a durable loop's
                `extra_tools` can be added).
        """
        raise UsageError(f"an answer adds the tool {name!r}, which only a durable loop that has it among its "
                         "extra_tools can give a run")

    def replayed_children(self, before: int) -> None:
        """Keep the recorded child runs made before transition `before` with the run's own;
        a live run has none (see `ReplayingPerformer`)."""

    def child_performer(self, path: str) -> Callable[[Journal, Any], Performer] | None:
        """What makes the performer of the child run at `path` that a tool of this run
        makes (`AgentLoop.as_tool`): None, a live one of its own; when someone answers this
        run's questions (`asks`: a durable run's person), one that asks them the child's too
        (`AskingParent`)."""
        if not self.asks():
            return None
        return lambda journal, run: AskingParent(journal, run, self, path)

    def where(self) -> tuple[int, int]:
        """The transition firing now (1-based) and the loop step it belongs to."""
        run = self._run()
        assert run is not None, "a performer performs only for a live run"
        return len(run.trace) + 1, run.step

    def call(self, effect: Call) -> Any:
        """`effect.fn(*effect.args)`, journaled when it is a call to the world. What it
        returns may be awaitable (the async driver awaits it, then calls `settled`)."""
        if not effect.kind:
            return self.local(effect)
        before = len(effect.conversation) if effect.conversation is not None else 0
        try:
            value = effect.fn(*effect.args)
        except Exception as error:
            self.settled(effect, before, None, error)
            raise
        if not _awaitable(value):
            value = as_observed(effect, value)
            self.settled(effect, before, value, None)
        return value

    def local(self, effect: Call) -> Any:
        """Local code (a user stage, `redact`): called, never journaled. One that names
        itself (`hook`) is named as what was running if it raises."""
        if not effect.hook:
            return effect.fn(*effect.args)
        run = self._run()
        assert run is not None, "a performer performs only for a live run"
        running, run.hook = run.hook, effect.hook
        value = effect.fn(*effect.args)
        run.hook = running
        return value

    def settled(self, effect: Call, before: int, value: Any, error: BaseException | None) -> None:
        """Journal `effect`'s outcome (`before`: its conversation's length when it began)."""
        transition, step = self.where()
        step = effect.step or step
        added = tuple(effect.conversation[before:]) if effect.conversation is not None else ()
        self.journal.add(transition, step, effect.kind, effect.name, effect.identity, value, error, added)

    def wait(self, seconds: float, asynchronous: bool = False) -> Any:
        """A retry's wait: journaled, then slept (`asynchronous`: with `async_sleep`,
        default `asyncio.sleep`, returning what the driver awaits)."""
        transition, step = self.where()
        self.journal.add(transition, step, "wait", "wait", seconds, None)
        if not asynchronous:
            return self.sleep(seconds)
        if self.async_sleep is None:
            import asyncio  # here, not at import: only arun pays for it

            return asyncio.sleep(seconds)
        return self.async_sleep(seconds)

    def branches(self, count: int) -> list[Performer] | None:
        """Performers for `count` calls made at the same time (`Together`), each journaling
        apart, so that `merge` can journal them in call order; None when they are to run
        one after another through this one (a replay: it calls nothing, and its journal
        is answered in order)."""
        run = self._run()
        assert run is not None, "a performer performs only for a live run"
        return [Performer(Journal(run_id=self.journal.run_id, codec=self.journal.codec), run, self.sleep,
                          self.async_sleep) for _ in range(count)]

    def merge(self, branches: Sequence[Performer]) -> None:
        """Journal what `branches` journaled, branch after branch (the order they were asked in)."""
        for branch in branches:
            for entry in branch.journal:
                self.journal.append(entry)


Masking = Callable[[JournalEntry, Sequence[JournalEntry]], JournalEntry]
"""`masked(entry, step_calls)`: `entry` as a file written with the loop's `redact` keeps
it, `step_calls` being the calls of its step with it among them
(`forge.machine.redaction.masked_entry`)."""


@dataclass(frozen=True, slots=True)
class Recording:
    """What a replaying performer answers a run from: the recorded `calls`, in order; in a
    fork, the index among them of the call a patch stands in for (`patched`) and what the
    patch said (`patch`: the record of the transition it is answered in gets
    `detail["patched"]` = `patch`); `masked`, how a call the run makes is masked to compare
    it with one a file written with the loop's `redact` keeps; and the recorded run's child
    runs (`children`, `forge.machine.child`), replayed as the run reaches them."""

    calls: Sequence[JournalEntry] = ()
    patched: int | None = None
    patch: Any = None
    masked: Masking | None = None
    children: Sequence[Any] = ()


class LiveRun(Position, Protocol):
    """A run a performer may go live for: it also says how the run waits (its
    `config.sleep` and `config.async_sleep`, a `forge.machine.run.RunConfig`)."""

    @property
    def config(self) -> Any: ...


class ReplayingPerformer(Performer):
    """Answers every call to the world from `recording` (a `Recording`), in order, calling
    nothing; the answers are journaled again, so the replayed run's journal equals the
    recorded one.

    Raises (inside the run, as `ReplayStopped`): `JournalMiss` when a call is not the next
    one recorded (another kind, name, transition, step or arguments) or the journal ended.
    """

    __slots__ = ("_next", "masked", "patch", "patched", "recorded", "recorded_children", "within")

    def __init__(self, recording: Recording, journal: Journal, run: Position) -> None:
        super().__init__(journal, run, _no_sleep)
        self.recorded, self._next = tuple(recording.calls), 0  # read once: a journal makes an entry each time it is read
        self.patched, self.patch = recording.patched, recording.patch
        self.masked = recording.masked
        self.recorded_children = list(recording.children)  # not yet replayed
        self.within: list[JournalEntry] = []
        """The recorded calls made inside the tool call under way (`WITHIN_CALLS`), not yet
        asked again: a tool call made again live is answered them in order."""

    def take_within(self) -> None:
        """Take the recorded calls made inside the tool call about to be answered or made
        (they come before it), journaled again; kept in `within` for a call made live."""
        transition = self.where()[0]
        self.within = []
        while (expected := self._expected()) is not None and expected.kind in WITHIN_CALLS \
                and expected.transition == transition:
            self._next += 1
            self.journal.append(expected)
            self.within.append(expected)

    def within_call(self, effect: Call) -> Any:
        """A call made inside a tool call made again: its recorded answer (`within_answer`),
        or, with none, the call made live."""
        taken = self.within_answer(effect)
        if taken is None:
            return Performer.call(self, effect)
        if taken.error is not None:
            raise taken.error
        return taken.value

    def within_answer(self, effect: Call) -> JournalEntry | None:
        """The recorded answer to `effect`, a call made inside a tool call made again (the
        next of `within`, when it is the same call), taken; None: it is made live (what
        was recorded after a call that differs is dropped)."""
        if not self.within:
            return None
        transition, step = self.where()
        made = JournalEntry(self.journal.run_id, transition, effect.step or step, effect.kind, effect.name,
                            effect.identity)
        if not self.within[0].same_call(made):
            self.within = []
            return None
        return self.within.pop(0)

    def replayed_children(self, before: int) -> None:
        """Keep the recorded child runs made before transition `before` with the run's own
        (`Journal.children`): their tool calls were answered from the journal, so the runs
        they stand for are the recorded ones, and a child run made live after them is
        numbered after them."""
        while self.recorded_children and self.recorded_children[0].transition < before:
            self.journal.children.append(self.recorded_children.pop(0))

    def _expected(self) -> JournalEntry | None:
        """The recorded call due next, or None when the journal is spent."""
        return self.recorded[self._next] if self._next < len(self.recorded) else None

    def asks(self) -> bool:
        """A replayed run waiting where the recorded one was answered takes that answer."""
        expected = self._expected()
        return expected is not None and expected.kind == "answer"

    def answers_decision(self) -> bool:
        expected = self._expected()
        return expected is not None and expected.kind == "policy" and \
            (not decided_as_code(expected) or self._next == self.patched)

    def _matches(self, expected: JournalEntry, made: JournalEntry, decided: bool = False) -> bool:
        """Whether `made` is the call `expected` records (`decided`: and the same decision),
        as made or as the loop's `redact` masks it (a file keeps masked values, which the
        run, running code again, does not)."""
        codec = self.journal.codec

        def fits(entry: JournalEntry) -> bool:
            return expected.same_call(entry) and \
                (not decided or same_decision(expected, entry.value, entry.error, codec))

        return fits(made) or (self.masked is not None and fits(self._masked(made)))

    def _masked(self, made: JournalEntry) -> JournalEntry:
        """`made` masked as `redact` masks it in a file, among the calls of its step (the
        journal's so far and the recorded ones after it: they name the step's tool)."""
        assert self.masked is not None
        before = []
        for index in range(len(self.journal) - 1, -1, -1):
            entry = self.journal[index]
            if entry.step != made.step:
                break
            before.append(entry)
        after = []
        for entry in self.recorded[self._next + 1:]:
            if entry.step != made.step:
                break
            after.append(entry)
        return self.masked(made, (*reversed(before), made, *after))

    def _answer(self, made: JournalEntry) -> JournalEntry:
        """The recorded call `made` stands for, taken and journaled again."""
        expected = self._take(made)
        self.journal.add(made.transition, made.step, made.kind, made.name,
                         made.identity if made.identity is not None else expected.identity,
                         expected.value, expected.error, expected.messages)
        return expected

    def _take(self, made: JournalEntry) -> JournalEntry:
        """The recorded call due next, which `made` must be: taken (a fork's patched one
        marks its transition's record), not yet journaled.

        Raises:
            ReplayStopped: `made` is not that call, or the journal is spent.
        """
        expected = self._expected()
        if expected is None or not self._matches(expected, made):
            raise ReplayStopped(JournalMiss(expected, made))
        if self._next == self.patched:  # a fork's patched call: its transition's record says so
            self.marked = self.patch
        self._next += 1
        return expected

    def replaying(self) -> bool:
        """Whether calls are answered from the recorded journal now (not live)."""
        return True

    def settled(self, effect: Call, before: int, value: Any, error: BaseException | None) -> None:
        if type(effect.identity) is DecidedAsCode and self.replaying():
            self._check_decision(effect, before, value, error)
        else:
            super().settled(effect, before, value, error)

    def _check_decision(self, effect: Call, before: int, value: Any, error: BaseException | None) -> None:
        """A decision the policy made again, as code: it must be the recorded one (else the
        replay diverged, `_diverged`); journaled as made."""
        transition, step = self.where()
        added = tuple(effect.conversation[before:]) if effect.conversation is not None else ()
        made = JournalEntry(self.journal.run_id, transition, effect.step or step, "policy", "policy", effect.identity,
                            value, error, added)
        expected = self._expected()
        if expected is None or not self._matches(expected, made, decided=True):
            self._diverged(expected, made)
            return
        self._next += 1
        self.journal.append(made)

    def _diverged(self, expected: JournalEntry | None, made: JournalEntry) -> None:
        """The run made `made` where the journal records `expected`: a replay stops."""
        raise ReplayStopped(JournalMiss(expected, made))

    def call(self, effect: Call) -> Any:
        if not effect.kind:
            return self.local(effect)
        if type(effect.identity) is DecidedAsCode:  # the policy runs again; `settled` checks its decision
            return Performer.call(self, effect)
        if effect.kind in WITHIN_CALLS:
            return self.within_call(effect)
        if effect.kind == "tool":
            self.take_within()
        transition, step = self.where()
        step = effect.step or step
        entry = self._answer(JournalEntry(self.journal.run_id, transition, step, effect.kind, effect.name,
                                          effect.identity))
        if entry.messages and effect.conversation is not None:
            effect.conversation.extend(entry.messages)
        if entry.error is not None:
            raise self._revived(effect, entry.error)
        if effect.check is not None:
            try:
                effect.check(*effect.args)
            except Exception as refused:  # today's contract refuses what the journal says was made
                raise ReplayStopped(ContractRefused(entry, refused)) from None
        return entry.value

    def _revived(self, effect: Call, error: BaseException) -> BaseException:
        """A recorded tool error as the class its tool declares (`Tool.raises`), when the
        recorded type names one (`forge.records.recorded.revived`)."""
        run: Any = self._run()
        tool = run.config.tools.get(effect.name) if effect.kind == "tool" and run is not None else None
        return error if tool is None or not tool.raises else revived(error, tool.raises)

    def wait(self, seconds: float, asynchronous: bool = False) -> Any:
        transition, step = self.where()
        self._answer(JournalEntry(self.journal.run_id, transition, step, "wait", "wait", seconds))
        return None

    @property
    def remaining(self) -> int:
        """Recorded calls not yet replayed."""
        return len(self.recorded) - self._next

    def branches(self, count: int) -> list[Performer] | None:
        return None if self.replaying() else super().branches(count)


class ForkingPerformer(ReplayingPerformer):
    """Replays `recording` (a fork's calls before transition `at`, then the patched call at
    `at`, see `forge.machine.fork`), then performs live from transition `at` on, waiting as
    its run's configuration says.

    Before `at` it is as strict as a replay: a call that is not the next recorded one, or
    any call once the recorded ones are spent, stops the run with `JournalMiss`, so nothing
    before `at` ever reaches the world. `recording.patched` is the index of the patched
    call; answering it marks the firing transition's trace record (`detail["patched"]`:
    `patch`, what the patch said). With `at` None it replays as long as the run makes the
    recorded calls and goes live at the first it does not (`went_live`: that transition).
    """

    __slots__ = ("at", "child_fork", "pending", "went_live")

    def __init__(self, recording: Recording, journal: Journal, run: LiveRun, at: int | None,
                 pending: Any = None) -> None:
        super().__init__(recording, journal, run)
        self.sleep, self.async_sleep, self.at = run.config.sleep, run.config.async_sleep, at
        self.went_live: int | None = None
        self.pending = pending  # a Patch for the first call of its kind at `at`, past the recorded calls
        self.child_fork: Any = None  # a fork inside a child run: made by the child's tool at `at` (forge.machine.child)

    def answers_decision(self) -> bool:
        if self.went_live is not None or (self.at is not None and not self.remaining):
            return self.pending is not None and self.pending.kind == "policy"
        return super().answers_decision()

    def asks(self) -> bool:
        """Before the fork goes live, as a replay; live, only a pending answer patch answers."""
        if self.went_live is not None or (self.at is not None and not self.remaining):
            return self.pending is not None and self.pending.kind == "answer"
        return super().asks()

    def replaying(self) -> bool:
        return self.went_live is None

    def replayed_children(self, before: int) -> None:
        """As a replay's, up to where the fork went live (a child run there or after is the fork's own)."""
        live = self.went_live if self.went_live is not None else self.at
        super().replayed_children(before if live is None else min(before, live))

    def _diverged(self, expected: JournalEntry | None, made: JournalEntry) -> None:
        """Before `at`, a divergence stops the fork as it stops a replay; with `at` None the
        fork goes live at the decision that differs, which is journaled as made."""
        if self.at is not None:
            super()._diverged(expected, made)
        self.went_live, self.recorded = made.transition, self.recorded[:self._next]
        self.journal.append(made)

    def _live(self, made: JournalEntry | None = None) -> bool:
        if self.went_live is not None:
            return True
        transition = self.where()[0]
        if self.at is None:  # live from the first call that is not the next recorded one
            expected = self.recorded[self._next] if self.remaining else None
            if made is not None and made.kind == "tool":  # the calls made inside it come first
                ahead = self._next
                while expected is not None and expected.kind in WITHIN_CALLS:
                    ahead += 1
                    expected = self.recorded[ahead] if ahead < len(self.recorded) else None
            live = expected is None or made is None or not expected.same_call(made)
        else:
            live = not self.remaining and transition >= self.at
        if live:
            self.went_live, self.recorded = transition, self.recorded[:self._next]
        return live

    def _made(self, effect: Call) -> JournalEntry | None:
        if self.at is not None:
            return None
        transition, step = self.where()
        return JournalEntry(self.journal.run_id, transition, effect.step or step, effect.kind, effect.name,
                            effect.identity)

    def call(self, effect: Call) -> Any:
        if effect.kind and self._live(self._made(effect)):
            if self.pending is not None and self.pending.kind == effect.kind:
                return self._patched(effect)
            return Performer.call(self, effect)
        return super().call(effect)

    def _patched(self, effect: Call) -> Any:
        """Answer `effect` with the pending patch (journaled as its outcome, and marked in
        the firing transition's record)."""
        patch, self.pending = self.pending, None
        before = len(effect.conversation) if effect.conversation is not None else 0
        self.settled(effect, before, patch.value, patch.error)
        self.marked = patch.to_json()
        if patch.error is not None:
            raise patch.error
        return patch.value

    def wait(self, seconds: float, asynchronous: bool = False) -> Any:
        transition, step = self.where()
        made = JournalEntry(self.journal.run_id, transition, step, "wait", "wait", seconds) if self.at is None else None
        if self._live(made):
            return Performer.wait(self, seconds, asynchronous)
        return super().wait(seconds, asynchronous)


class AskingParent(Performer):
    """A child run's performer that performs its calls live and asks what the child waits
    for of the parent's performer, naming the child (`Waiting.run`, its path): so a child's
    approval or question reaches the parent's person, bound to the child's exact call, and
    the answer goes on in the same child run, journaled as the child's."""

    __slots__ = ("_parent", "_path")

    def __init__(self, journal: Journal, run: Any, parent: Performer, path: str) -> None:
        super().__init__(journal, run, run.config.sleep, run.config.async_sleep)
        self._parent, self._path = parent, path

    def asks(self) -> bool:
        return True

    def ask(self, waiting: Any) -> Any:
        return self._parent.ask(waiting if waiting.run is not None else replace(waiting, run=self._path))


_ATOMS = frozenset({str, int, float, bool, bytes, type(None), complex})


def as_observed(effect: Call, value: Any) -> Any:
    """What a tool returned, as it was when it returned: the run's observation, its journal
    and its trace keep this, so a handler that later changes the object it returned (a
    dict of its own database) changes nothing the run recorded. Plain data is copied by
    hand (fast: strings and numbers are shared), anything else with `copy.deepcopy`; a
    value that cannot be copied (a lock, an open file) is kept as it is. Other calls'
    values are kept as they are."""
    if effect.kind != "tool" or type(value) in _ATOMS:
        return value
    return _copied(value)


def _copied(value: Any) -> Any:
    kind = type(value)
    if kind in _ATOMS:
        return value
    atoms = _ATOMS  # strings and numbers are shared, not copied: most of a record's values
    if kind is dict:
        return {key: item if type(item) in atoms else _copied(item) for key, item in value.items()}
    if kind is list:
        return [item if type(item) in atoms else _copied(item) for item in value]
    if kind is tuple:
        return tuple([item if type(item) in atoms else _copied(item) for item in value])
    try:
        return copy.deepcopy(value)
    except Exception:  # cannot be copied: the run keeps the object itself
        return value


def _no_sleep(seconds: float) -> None:
    return None


def _advance(steps: Steps[T], result: Any, error: Exception | None) -> tuple[bool, Any]:
    """Resume `steps` with a result or an error: `(True, verdict)` once it returned,
    `(False, effect)` while it asks for one."""
    try:
        return False, (steps.send(result) if error is None else steps.throw(error))
    except StopIteration as done:
        return True, done.value


_TURN_BEFORE = frozenset({"tool", "model"})
"""The calls before which a streamed run under `arun` gives its consumer a turn (`_drive`):
a consumer that leaves on reading what came before a call stops the run before it (a plain
tool's handler starts in its thread as soon as it is handed over, before the consumer's
next turn, so the turn is kept for it too)."""


async def _drive(steps: Steps[T], perform: Callable[[Effect], Any]) -> T:
    """The one driver: perform each effect (awaiting what `perform` leaves awaitable) and
    hand the result or the exception back to the action, until it returns its verdict.

    While a stream listens (`forge.events.sink`), each call of a tool or a model first yields
    to the event loop once, so that the stream's consumer reads what the run told before it
    (the attempt's start, the last tool's result). A consumer that left during that turn
    stops the run before the call (the sink's `before_call`)."""
    result: Any = None
    error: Exception | None = None
    while True:
        finished, effect = _advance(steps, result, error)
        if finished:
            return effect  # type: ignore[no-any-return]
        if type(effect) is Call and effect.kind in _TURN_BEFORE and (listener := sink()) is not None:
            import asyncio

            await asyncio.sleep(0)
            check = getattr(listener, "before_call", None)
            if check is not None:  # the consumer may have left during its turn: no call after it has
                tell("before_call", check, effect.kind, effect.name)
        try:
            result, error = perform(effect), None
            if _awaitable(result):
                result = await result
        except Exception as failure:  # handed to the action, which classifies it
            result, error = None, failure


def _awaitable(value: Any) -> bool:
    """Whether `value` must be awaited: what an `async def` returns (a check cheaper than
    `isinstance(value, Awaitable)`, made on every call of every step)."""
    return hasattr(value, "__await__")


def run_sync(steps: Steps[T], performer: Performer) -> T:
    """Perform `steps` synchronously through `performer` and return the action's result.

    A `Call` whose result is awaitable is thrown back into the action as
    `AsyncNotSupported` (and journaled as that call's error). The same driver as
    `run_async`'s, written as a plain loop: nothing here ever needs awaiting."""
    if SYNCHRONOUS.get():  # already so (a nested call): a get is cheaper than a set and reset
        return _drive_sync(steps, performer)
    synchronous = SYNCHRONOUS.set(True)  # user code that could await blocks instead (can_await)
    try:
        return _drive_sync(steps, performer)
    finally:
        SYNCHRONOUS.reset(synchronous)


def _drive_sync(steps: Steps[T], performer: Performer) -> T:
    send, throw = steps.send, steps.throw
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            effect = send(result) if error is None else throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            result, error = _perform_sync(effect, performer), None
        except Exception as failure:  # handed to the action, which classifies it
            result, error = None, failure


def _perform_sync(effect: Effect, performer: Performer) -> Any:
    if type(effect) is Call:
        before = len(effect.conversation) if effect.kind and effect.conversation is not None else 0
        value = performer.call(effect)
        if _awaitable(value):
            if isinstance(value, Coroutine):
                value.close()  # never awaited on purpose: say so once, not as a RuntimeWarning
            refused = AsyncNotSupported(effect.what)
            if effect.kind:
                performer.settled(effect, before, None, refused)
            raise refused
        return value
    if type(effect) is Sleep:
        return performer.wait(effect.seconds)
    if type(effect) is Together:
        return _together_sync(effect, performer)
    assert isinstance(effect, Once)
    return effect.registry.execute_once(effect.key, effect.fingerprint, lambda: run_sync(effect.body(), performer))


def _together_sync(effect: Together, performer: Performer) -> list[Any]:
    """Each branch in a worker thread of its own (at most `limit` at once), under a copy
    of this thread's context (a stream's listener, `run()`'s refusal to await)."""
    branches = performer.branches(len(effect.branches))
    if branches is None:
        return [run_sync(make(), performer) for make in effect.branches]
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(effect.limit, len(branches)), thread_name_prefix="forge-call") as pool:
        started = [pool.submit(contextvars.copy_context().run, run_sync, make(), branch)
                   for make, branch in zip(effect.branches, branches, strict=True)]
        results = [future.result() for future in started]
    performer.merge(branches)
    return results


async def _together_async(effect: Together, performer: Performer) -> list[Any]:
    """Each branch as a task (an `async def` call awaited, a plain one in a worker thread),
    at most `limit` at once."""
    import asyncio

    branches = performer.branches(len(effect.branches))
    if branches is None:
        return [await run_async(make(), performer) for make in effect.branches]
    gate = asyncio.Semaphore(effect.limit)

    async def one(make: Callable[[], Steps[Any]], branch: Performer, asynchronous: bool) -> Any:
        async with gate:
            if asynchronous:
                return await run_async(make(), branch)
            return await asyncio.to_thread(run_sync, make(), branch)

    results = await asyncio.gather(*(one(make, branch, asynchronous) for make, branch, asynchronous
                                     in zip(effect.branches, branches, effect.asynchronous, strict=True)))
    performer.merge(branches)
    return list(results)


TOOL_THREADS = 128
"""The most plain tool handlers `arun` runs at once in worker threads (one pool per process,
its threads made as they are needed): enough that 100 concurrent runs each in a slow
plain tool wait for none of the others; more calls queue for a thread."""

_TOOL_POOL: list[Any] = []


def _in_a_thread(call: Callable[[Call], Any], effect: Call) -> Awaitable[Any]:
    """`call(effect)` in a worker thread of forge's tool pool, under a copy of this context
    (a stream's sink, a durable call's idempotency key), as an awaitable of its result."""
    import asyncio
    import contextvars

    if not _TOOL_POOL:
        from concurrent.futures import ThreadPoolExecutor

        _TOOL_POOL.append(ThreadPoolExecutor(max_workers=TOOL_THREADS, thread_name_prefix="forge-tool"))
    context = contextvars.copy_context()
    return asyncio.get_running_loop().run_in_executor(_TOOL_POOL[0], context.run, call, effect)


def run_async(steps: Steps[T], performer: Performer) -> Coroutine[Any, Any, T]:
    """Perform `steps` through `performer`, awaiting awaitable results (a journaled call is
    journaled once its awaitable settles)."""

    async def settle(effect: Call, before: int, pending: Awaitable[Any]) -> Any:
        try:
            value = await pending
        except Exception as error:
            performer.settled(effect, before, None, error)
            raise
        value = as_observed(effect, value)
        performer.settled(effect, before, value, None)
        return value

    async def threaded(effect: Call) -> Any:
        value = await _in_a_thread(performer.call, effect)
        if effect.kind and _awaitable(value):  # a plain handler that gave an awaitable
            return await settle(effect, 0, value)
        return value

    def perform(effect: Effect) -> Any:
        if type(effect) is Call:
            if effect.threaded:
                return threaded(effect)
            before = len(effect.conversation) if effect.kind and effect.conversation is not None else 0
            value = performer.call(effect)
            if effect.kind and _awaitable(value):
                return settle(effect, before, value)
            return value
        if type(effect) is Sleep:
            return performer.wait(effect.seconds, asynchronous=True)
        if type(effect) is Together:
            return _together_async(effect, performer)
        assert isinstance(effect, Once)
        return effect.registry.aexecute_once(effect.key, effect.fingerprint, lambda: run_async(effect.body(), performer))

    return _drive(steps, perform)
