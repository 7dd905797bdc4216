"""Running a dataset's cases on a loop: each case a conversation of one or more runs,
replayed from its cassette, recorded into it, or live; concurrently, bounded.

A case's cassette is a folder, `CASSETTES/CASE/`: `turn-N.jsonl` for each turn (a cassette
as forge's pytest plugin writes one: `forge.machine.cassette`) and `calls.jsonl`, the tape
of its model calls outside runs (`forge.evals.tape`). How a turn runs:

- `record=True`: live, and written to its cassette (the case's old files go first).
- a cassette exists: replayed from it (`AgentLoop.replay`, calling nothing); where the agent
  does otherwise than recorded (a changed prompt, policy or tool), the turn goes on live
  from that transition (`AgentLoop.fork(at=None)`) and is marked `departed at K` — unless
  `offline=True`, where a departure fails the case, naming the first diverging call.
- no cassette: live (`offline=True`: the case fails, saying to record it).

The loop is given as an `AgentLoop`, or as a function of no arguments that makes one per
case (or a context manager yielding one, closed after the case): a loop whose tools work on
a workspace wants a fresh one for every case.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge.errors import ForgeError, UsageError
from forge.evals.cases import EvalRun, conversation_of
from forge.evals.tape import ModelTape
from forge.evals.users import UserSide
from forge.loop import AgentLoop
from forge.machine.cassette import write_cassette
from forge.machine.diff import diff
from forge.observe import TransitionCallback
from forge.records.journal import JournalMiss
from forge.records.trace import TransitionRecord
from forge.result import LoopResult

__all__ = ["CaseFailed", "EvalSettings", "LoopSource", "TAPE", "case_folder", "loop_for_case", "run_case"]

LoopSource = AgentLoop | Callable[[], Any]
"""What the runner runs cases on: a loop, or a function making one per case (see the module)."""

TAPE = "calls.jsonl"
"""The file in a case's cassette folder that holds its tape."""


class CaseFailed(ForgeError, RuntimeError):
    """A case could not be run as asked: offline without a cassette, or departing from it."""


@dataclass(frozen=True, slots=True)
class EvalSettings:
    """How a dataset is run: `cassettes`, the folder of its cases' cassettes (None: every
    case live, nothing recorded); `record`, run live and record; `offline`, never go live;
    `client`, the `openai.OpenAI` a model-played user and a judge talk through (default:
    made from OPENAI_BASE_URL and OPENAI_API_KEY)."""

    cassettes: Path | None = None
    record: bool = False
    offline: bool = False
    client: Any = None

    def __post_init__(self) -> None:
        if self.record and self.offline:
            raise UsageError("a dataset cannot be recorded offline: record=True runs every case live")
        if self.record and self.cassettes is None:
            raise UsageError("record=True needs a cassettes folder to record into")


def case_folder(cassettes: Path, name: str) -> Path:
    """The folder of case `name`'s cassette: its name, with what a file name cannot hold
    replaced, so that no case name writes outside `cassettes`."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.") or "case"
    return cassettes / safe


@contextmanager
def loop_for_case(source: LoopSource) -> Iterator[AgentLoop]:
    """The loop a case runs on (see the module), closed after it when it was made so.

    Raises:
        TypeError: `source` is not a loop, nor makes one.
    """
    if isinstance(source, AgentLoop):
        yield source
        return
    if not callable(source):
        raise UsageError(f"an eval runs on an AgentLoop or a function making one, got {type(source).__name__}")
    made = source()
    if isinstance(made, AgentLoop):
        yield made
        return
    if hasattr(made, "__enter__") and hasattr(made, "__exit__"):
        with made as loop:
            if not isinstance(loop, AgentLoop):
                raise UsageError(f"the eval's loop factory yielded a {type(loop).__name__}, not an AgentLoop")
            yield loop
        return
    raise UsageError(f"the eval's loop factory returned a {type(made).__name__}: return an AgentLoop, or a "
                     "context manager that yields one")


_ANSWERED = frozenset({"approved", "rejected", "no_answer"})
"""An approval state's verdicts that answer a request (`not_needed` asks nothing)."""


class _ScriptedApprover:
    """A case's answers to approval requests, in order; past the last, no answer. The
    request being answered is the conversation's next: the approval records seen so far
    (`saw`, told of every transition, replayed ones too) count the requests before it, so
    a turn replayed up to a departure and live after it answers each request with its own
    answer."""

    def __init__(self, answers: Sequence[bool]) -> None:
        self.answers, self.asked = tuple(answers), 0

    @property
    def used(self) -> int:
        return min(self.asked, len(self.answers))

    def saw(self, record: TransitionRecord) -> None:
        if record.verdict in _ANSWERED:
            self.asked += 1

    def __call__(self, request: Any) -> bool | None:
        return self.answers[self.asked] if self.asked < len(self.answers) else None


def run_case(source: LoopSource, name: str, inputs: Any, settings: EvalSettings = EvalSettings()) -> EvalRun:
    """Run case `name` (its `inputs`: a goal or a `Conversation`) on `source`'s loop, turn
    by turn until the user side has nothing more to say (see the module).

    Raises:
        CaseFailed: offline, and a turn has no cassette or departs from it.
        TapeMiss: offline, and a model-played user's call is not on the tape.
        TypeError: the inputs or the loop source are of the wrong kind.
    """
    conversation = conversation_of(inputs)
    folder = case_folder(settings.cassettes, name) if settings.cassettes is not None else None
    if settings.record and folder is not None and folder.exists():
        shutil.rmtree(folder)
    tape = (ModelTape.read(folder / TAPE, offline=settings.offline) if folder is not None and not settings.record
            else ModelTape())
    user = UserSide(conversation, tape, settings.client)
    approver = _ScriptedApprover(conversation.approvals)
    started = time.perf_counter()
    with loop_for_case(source) as given:
        loop = given.replace(approver=approver) if conversation.approvals else given
        side_effects = frozenset(tool.name for tool in loop.tools if tool.side_effect)
        turns: list[LoopResult] = []
        modes: list[str] = []
        goal: str | None = conversation.goal
        while goal is not None:
            turn = _Turn(name, len(turns) + 1, goal, turns[-1].state if turns else None)
            result, mode = _turn(loop, turn, folder, settings, approver)
            turns.append(result)
            modes.append(mode)
            goal = user.next(turns)
    return EvalRun(tuple(turns), tuple(modes), time.perf_counter() - started, side_effects,
                   replies_used=user.used, approvals_used=approver.used, models=_Models(tape, settings.client))


@dataclass(frozen=True, slots=True)
class _Turn:
    """One turn of a case's conversation: the case's `name`, the turn's `number` (from 1),
    its `goal` and the `state` it goes on from (None for the first)."""

    name: str
    number: int
    goal: str
    state: Any


def _turn(loop: AgentLoop, turn: _Turn, folder: Path | None, settings: EvalSettings,
          approver: _ScriptedApprover) -> tuple[LoopResult, str]:
    """The turn's run and how it was made: replayed from its cassette in `folder`, departed
    from it (a fork going live where the loop first differs), recorded, or live."""
    name, number, goal, state = turn.name, turn.number, turn.goal, turn.state
    run_id = f"{name}-{number}"
    observers = (TransitionCallback(approver.saw),)
    asked_before = approver.asked
    cassette = folder / f"turn-{number}.jsonl" if folder is not None else None
    if cassette is not None and not settings.record and cassette.exists():
        try:
            return loop.replay(cassette, goal=goal, state=state, observers=observers), "replayed"
        except JournalMiss as miss:
            if settings.offline:
                raise CaseFailed(f"case {name!r}, turn {number}, departs from its cassette {cassette}: {miss} "
                                 "(record it again with --record, or run without --offline to go live from there)"
                                 ) from None
            approver.asked = asked_before  # the fork replays again what the replay saw
            forked = loop.fork(cassette, at=None, goal=goal, state=state, run_id=run_id, observers=observers)
            return forked, f"departed at {diff(cassette, forked).first}"
    if settings.offline:
        raise CaseFailed(f"case {name!r}, turn {number}, has no cassette at {cassette} and the eval is offline: "
                         "record it with --record")
    result = loop.run(goal, state=state, run_id=run_id, observers=observers)
    if settings.record and cassette is not None:
        write_cassette(cassette, result, loop.codec, loop.options.hooks.redact)
        return result, "recorded"
    return result, "live"


class _Models:
    """A case's model calls outside its runs: its tape, and the client a live call goes
    through (what `forge.evals.scorers.Judge` sends its request by)."""

    def __init__(self, tape: ModelTape, client: Any) -> None:
        self.tape, self.client = tape, client

    def send(self, kind: str, model: str, request: dict[str, Any]) -> dict[str, Any]:
        from forge.models.chat import ChatPolicy

        return self.tape.send(kind, ChatPolicy(model, client=self.client, ask=False), request)
