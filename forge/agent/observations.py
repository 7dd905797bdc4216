"""Stage 2, observe: ordered observations with ok / retryable_error / fatal_error.

A transient failure (an HTTP 503) must never end the loop; only a fatal one does. So the
status is one of three explicit values, and only `fatal_error` sets the terminal flag.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast, overload

from forge.errors import UsageError

__all__ = ["OBSERVATION_STATUSES", "ActionHistory", "LoopState", "Observation", "Reached", "Status"]

Status = Literal["ok", "retryable_error", "fatal_error"]
"""An observation's status: the seed's three values."""

OBSERVATION_STATUSES: frozenset[str] = frozenset({"ok", "retryable_error", "fatal_error"})


@dataclass(frozen=True, slots=True)
class Observation:
    """One tool call's outcome. `sequence` counts from 1 in call order.

    `repeat_of` is set when the call was not run again: a side effect decided again with
    the same arguments (or idempotency key) is answered from the idempotency registry with
    what it returned the first time, and `repeat_of` is the step that ran it (0 when an
    earlier run, or an earlier turn of this conversation, did). None: the call ran now.
    """

    sequence: int
    tool_name: str
    status: Status
    payload: Any
    repeat_of: int | None = None

    @property
    def answer(self) -> Any:
        """The policy's final answer when this observation is one (a `Finish`, recorded as the
        pseudo-tool `finish`), else None: `verify=lambda o: "Paris" in str(o.answer)`."""
        return getattr(self.payload, "answer", None) if self.tool_name == "finish" else None


class ActionHistory(Sequence[str]):
    """A live, read-only view of the tool names recorded so far, in call order.

    It compares equal to any sequence of the same names, and `count` is O(1), so asking
    "how often was the last action taken?" every step keeps a long run linear.
    """

    __slots__ = ("_counts", "_names")

    def __init__(self, names: list[str], counts: dict[str, int]) -> None:
        self._names, self._counts = names, counts

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return tuple(self._names[index]) if isinstance(index, slice) else self._names[index]

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def count(self, value: Any) -> int:
        return self._counts.get(value, 0)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, bytes)) or not isinstance(other, Sequence):
            return NotImplemented
        return len(other) == len(self._names) and all(a == b for a, b in zip(self._names, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ActionHistory({self._names!r})"


class Reached(Protocol):
    """The furthest a state got, as `LoopState.move_to` takes from it: its observations, the
    action each recorded and its conversation (a `forge.machine.run.Furthest`)."""

    @property
    def observations(self) -> Sequence[Observation]: ...

    @property
    def actions(self) -> Sequence[str]: ...

    @property
    def messages(self) -> Sequence[dict[str, Any]]: ...


@dataclass
class LoopState:
    """The run's ordered record of what happened, and whether it may go on.

    It records; it never decides what to do next. `messages` is the policy's conversation
    (an LLM policy's chat history), kept with the run so the debugger shows it, the trace
    records it and a conversation can continue from it; `turn_start` is how many
    observations earlier turns of the conversation left (0 in a first run).
    """

    observations: list[Observation] = field(default_factory=list)
    terminal: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list, compare=False)
    turn_start: int = field(default=0, compare=False)
    _names: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    _counts: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for observation in self.observations:
            self._note(observation.tool_name)

    @classmethod
    def restored(cls, observations: list[Observation], actions: Sequence[str], terminal: bool,
                 messages: list[dict[str, Any]], turn_start: int) -> LoopState:
        """A state as it was written down (`forge.records.wire`): its observations, the
        action each recorded (`action_history`, which may name whole calls), and the rest.

        Raises:
            ValueError: `actions` are not one per observation.
        """
        if len(actions) != len(observations):
            raise UsageError(f"a state has one action per observation: got {len(actions)} actions for "
                             f"{len(observations)} observations")
        state = cls(observations, terminal, messages, turn_start)
        state._names[:] = actions
        state._counts.clear()
        for name in actions:
            state._counts[name] = state._counts.get(name, 0) + 1
        return state

    def move_to(self, observations: int, messages: int, terminal: bool, furthest: Reached) -> None:
        """Make this state what it was after its first `observations` observations and
        `messages` messages, cutting back or taking the missing ones from what the run
        recorded at its `furthest`. The cost is what changes, not the length of the run:
        the debugger steps back and forth with it."""
        history, actions, conversation = furthest.observations, furthest.actions, furthest.messages
        have = len(self.observations)
        if observations < have:
            for name in self._names[observations:]:
                self._counts[name] -= 1
                if not self._counts[name]:
                    del self._counts[name]
            del self.observations[observations:], self._names[observations:]
        else:
            self.observations.extend(history[have:observations])
            for name in actions[have:observations]:
                self._note(name)
        if messages < len(self.messages):
            del self.messages[messages:]
        else:
            self.messages.extend(conversation[len(self.messages):messages])
        self.terminal = terminal

    def continued(self) -> LoopState:
        """A new state that goes on from this one, for a conversation's next turn: the same
        observations, messages and action history (kept as recorded, call keys included).

        Raises:
            ValueError: this state is terminal (a fatal error ended it).
        """
        if self.terminal:
            raise UsageError("the previous run ended in a fatal error; a conversation cannot go on from it")
        state = LoopState(list(self.observations), messages=list(self.messages), turn_start=len(self.observations))
        state._names[:] = self._names
        state._counts.clear()
        state._counts.update(self._counts)
        return state

    def _note(self, tool_name: str) -> None:
        self._names.append(tool_name)
        self._counts[tool_name] = self._counts.get(tool_name, 0) + 1

    def record(self, tool_name: str, status: str, payload: Any, *, action: str | None = None,
               repeat_of: int | None = None) -> Observation:
        """Append the next observation and return it.

        `fatal_error` sets `terminal`; `retryable_error` and `ok` never do. `action` is what
        `action_history` records for it (default: `tool_name`); the machine passes a key of
        the whole call, so that repetition counts identical calls. `repeat_of` is the
        observation's (see `Observation`).

        Raises:
            ValueError: the state is already terminal, or `status` is not one of `ok`,
                `retryable_error`, `fatal_error`. Nothing is recorded then.
        """
        if self.terminal:
            raise UsageError("loop state is terminal; no further observations are accepted")
        if status not in OBSERVATION_STATUSES:
            allowed = ", ".join(sorted(OBSERVATION_STATUSES))
            raise UsageError(f"unknown observation status {status!r}; expected one of {allowed}")
        observation = Observation(len(self.observations) + 1, tool_name, cast(Status, status), payload, repeat_of)
        self.observations.append(observation)
        self._note(tool_name if action is None else action)
        if status == "fatal_error":
            self.terminal = True
        return observation

    @property
    def action_history(self) -> ActionHistory:
        """Tool names of every observation, in call order (a live read-only view)."""
        return ActionHistory(self._names, self._counts)

    @property
    def turn_history(self) -> ActionHistory:
        """The actions of this turn of the conversation only (since `turn_start`): what
        repetition counts, as the step budget counts this turn's steps. A first run's is its
        whole `action_history`; a later turn's is made afresh (a turn is at most `max_steps`
        long)."""
        if not self.turn_start:
            return self.action_history
        names = self._names[self.turn_start:]
        counts: dict[str, int] = {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        return ActionHistory(names, counts)

    @property
    def step_count(self) -> int:
        """How many observations have been recorded."""
        return len(self.observations)
