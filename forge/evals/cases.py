"""What an eval case asks of an agent (`Conversation`) and what its run gave (`EvalRun`).

A case's inputs are a goal, or a `Conversation`: the goal, then the user's side of it —
scripted replies (each one answers the agent's question, when a turn ended asking one, or
is the next request, when a turn ended with an answer), the answers to approval requests
in order, or a model playing the user (`ModelUser`). Both are pydantic models, so a dataset
file (YAML or JSON, `pydantic_evals.Dataset.from_file`) holds them as plain data.

`EvalRun` is what the runner hands every evaluator as `ctx.output`: each turn's
`LoopResult` (trace, journal, usage), how the case ran (replayed from its cassette, live, or
live from where it departed from it) and what the user side used. Scorers read the run
through it; the runner writes it into the results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from forge.errors import UsageError, WrongType
from forge.result import LoopResult

__all__ = ["Conversation", "EvalRun", "ModelUser", "ToolCall", "conversation_of"]


class ModelUser(BaseModel):
    """A user played by a model (through `ChatPolicy`'s client, journaled on the case's
    tape so the conversation replays from its cassette): `persona` says who the user is and
    what they want; it replies to the agent's questions and answers until it says it is
    done, at most `max_replies` times."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    persona: str
    max_replies: int = 5


class Conversation(BaseModel):
    """A multi-turn case: `goal` starts it; `replies` are the scripted user's next messages,
    in order (or `user`, a model playing the user); `approvals` answer the approval requests
    of a loop with an approval state, in order (a request past the last waits:
    `approval_required`).

    Raises (when made):
        ValidationError: both `replies` and `user` are given, or the goal is blank.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    goal: str
    replies: tuple[str, ...] = ()
    approvals: tuple[bool, ...] = ()
    user: ModelUser | None = None

    @model_validator(mode="after")
    def _one_user(self) -> Conversation:
        if not self.goal.strip():
            raise UsageError("a conversation's goal must not be blank")
        if self.replies and self.user is not None:
            raise UsageError("a conversation has scripted replies or a model-played user, not both")
        return self


def conversation_of(inputs: Any) -> Conversation:
    """A case's inputs as a `Conversation` (a goal string is a conversation of one turn).

    Raises:
        TypeError: the inputs are neither a string nor a Conversation (nor a mapping of one).
    """
    if isinstance(inputs, Conversation):
        return inputs
    if isinstance(inputs, str):
        return Conversation(goal=inputs)
    if isinstance(inputs, Mapping):
        return Conversation.model_validate(inputs)
    raise WrongType(f"a forge eval case's inputs are a goal (a string) or a Conversation, got {type(inputs).__name__}")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call a run made to a tool (its retries are the same call): the tool's name and the
    arguments it was called with, in the turn and transition it was made in."""

    tool: str
    arguments: Mapping[str, Any]
    turn: int
    transition: int


@dataclass(frozen=True)
class EvalRun:
    """A case's run, every turn of it (see the module).

    `turns` are the turns' results in order; `modes` say how each ran (`replayed`, `live`,
    or `departed at K`: replayed up to transition K, where the agent first did otherwise,
    then live); `seconds` is the case's wall time; `side_effects` names the loop's tools
    with side effects (what path scorers check approvals of); `models` is the case's tape
    of model calls outside its runs (a judge's), for scorers that call a model."""

    turns: tuple[LoopResult, ...]
    modes: tuple[str, ...]
    seconds: float
    side_effects: frozenset[str] = frozenset()
    replies_used: int = 0
    approvals_used: int = 0
    models: Any = field(default=None, repr=False, compare=False)

    @property
    def last(self) -> LoopResult:
        return self.turns[-1]

    @property
    def reason(self) -> str:
        """The stop reason the conversation ended in (its last turn's)."""
        return self.last.reason

    @property
    def outcome(self) -> str | None:
        return self.last.outcome

    @property
    def answer(self) -> Any:
        """The last turn's verified answer (typed, with a loop's `output=`), else None."""
        return self.last.answer

    @property
    def steps(self) -> int:
        return sum(turn.steps for turn in self.turns)

    @property
    def tokens(self) -> int:
        return sum(turn.usage.total_tokens for turn in self.turns)

    @property
    def retries(self) -> int:
        return sum(turn.retries for turn in self.turns)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Every tool call of every turn, in order: a call's retries count once."""
        calls: list[ToolCall] = []
        for number, turn in enumerate(self.turns, 1):
            seen: set[tuple[int, str, str]] = set()
            for entry in turn.journal:
                key = (entry.transition, entry.name, entry.args_sha256)
                if entry.kind != "tool" or key in seen:
                    continue
                seen.add(key)
                arguments = entry.identity if isinstance(entry.identity, Mapping) else {}
                calls.append(ToolCall(entry.name, dict(arguments), number, entry.transition))
        return tuple(calls)

    @property
    def records(self) -> Sequence[Any]:
        """Every turn's transition records, one after another."""
        return [record for turn in self.turns for record in turn.trace]

    def __str__(self) -> str:
        return f"{self.reason} after {self.steps} steps in {len(self.turns)} turn{'s' if len(self.turns) != 1 else ''}"
