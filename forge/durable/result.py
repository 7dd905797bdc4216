"""`DurableResult`: a durable run as its database has it now, what every reader of stored
runs returns (`forge.durable.runs.StoredRuns`, and a loop's durability, which reads through it).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from forge.agent.observations import LoopState
from forge.durable.answers import Waiting
from forge.records.journal import ForkOrigin
from forge.records.trace import TransitionRecord
from forge.records.wire import decode
from forge.result import verified_answer

__all__ = ["DurableResult", "StoredChild", "settled", "wait_for"]


@dataclass(frozen=True, slots=True)
class StoredChild:
    """A child run (`AgentLoop.as_tool`) as its durable parent's stored run keeps it, for
    the inspector and `forge ui`: its path, the parent's tool and transition that made it,
    how it ended (`summary`), its trace and its own children."""

    path: str
    tool: str
    transition: int
    summary: str
    trace: tuple[TransitionRecord, ...] = ()
    children: tuple[StoredChild, ...] = ()

    @classmethod
    def of(cls, child: Any) -> StoredChild:
        """From a `forge.ChildRun`."""
        result = child.result
        return cls(child.path, child.tool, child.transition, result.summary, tuple(result.trace),
                   tuple(cls.of(grandchild) for grandchild in result.children))

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "tool": self.tool, "transition": self.transition, "summary": self.summary,
                "trace": [record.to_json() for record in self.trace],
                "children": [child.to_json() for child in self.children]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoredChild:
        return cls(str(data["path"]), str(data.get("tool", "")), int(data.get("transition", 0)),
                   str(data.get("summary", "")), tuple(TransitionRecord.from_json(r) for r in data.get("trace", ())),
                   tuple(cls.from_json(c) for c in data.get("children", ())))


@dataclass(frozen=True, slots=True)
class DurableResult:
    """A durable run as its database has it now.

    `status` is `queued` (for a worker), `running`, `waiting` (see `waiting` for what for),
    `finished`, `cancelled` or `error` (the workflow itself failed: `error` says why): the
    one vocabulary `forge runs list` and `show` use too; when finished, `reason`,
    `outcome` and `summary` are the run's. `trace` is the run's trace, answers and all (a
    person's answer is a transition of the run); `traces` holds it as one list, or, for a
    run stored by an earlier forge (`legacy`), one trace per answer (`trace` then the last
    one's, and `records` all of them numbered on)."""

    run_id: str
    status: str
    traces: Sequence[tuple[TransitionRecord, ...]] = ()
    reason: str | None = None
    outcome: str | None = None
    summary: str | None = None
    waiting: Waiting | None = None
    error: str | None = None
    answers: int = 0
    goal: str | None = None
    loop: str | None = None
    forked_from: ForkOrigin | None = None
    """Where a fork came from (`fork`); None for a run that is not one."""
    state: LoopState | None = field(default=None, compare=False, repr=False)
    """The conversation as the run left it, once it has finished or waits: what another
    run goes on from (`durable.run(reply, state=result)`)."""
    continues: str | None = None
    """The run whose conversation this run goes on from (`state=` a `DurableResult`)."""
    legacy: bool = field(default=False, compare=False, repr=False)
    """Stored by an earlier forge, one trace per answer (`traces`), with a journal per
    answer too (its parts, `forge.durable.database`)."""
    children: tuple[StoredChild, ...] = field(default=(), compare=False, repr=False)
    """The child runs its tools made (`AgentLoop.as_tool`), as far as it went when it last
    waited or ended."""
    answered: bool = field(default=False, compare=False)
    """A waiting run whose question has its answer, not yet taken up by the run (it goes on
    in its program, or when its program runs again)."""

    @property
    def turns(self) -> Sequence[tuple[TransitionRecord, ...]]:
        """`traces`, by the name of an earlier release (deprecated)."""
        warnings.warn("DurableResult.turns is deprecated: a durable run is one run; read trace, or traces for one "
                      "stored by an earlier forge", DeprecationWarning, stacklevel=2)
        return self.traces

    @property
    def trace(self) -> tuple[TransitionRecord, ...]:
        return self.traces[-1] if self.traces else ()

    @property
    def records(self) -> list[TransitionRecord]:
        """The whole run: its traces' records one after another, numbered on."""
        whole = [record for each in self.traces for record in each]
        return [replace(record, sequence=number) for number, record in enumerate(whole, start=1)]

    @property
    def answer(self) -> Any:
        """The verified `Finish` answer, when the run finished in success on one; else None."""
        return verified_answer(self.state, self.outcome) if self.status == "finished" else None

    @property
    def answer_text(self) -> str | None:
        """The answer as a person reads it (`forge runs show`, `forge ui`): text as it is, any
        other answer as JSON (a typed answer read where its class is not loaded is its JSON
        already); None without an answer."""
        answer = self.answer
        if answer is None or isinstance(answer, str):
            return answer
        import json

        return json.dumps(answer, ensure_ascii=False, default=str)

    @property
    def question(self) -> str | None:
        """The policy's question, when the run waits for the user's reply (`Answer.text`)."""
        return self.waiting.prompt if self.waiting is not None and self.waiting.state == "input_required" else None

    @classmethod
    def of(cls, run_id: str, workflow_status: str | None, event: Mapping[str, Any] | None,
           error: str | None = None, inputs: Any = None) -> DurableResult:
        """From DBOS's status of the workflow and the run's last published event; `inputs`
        (the workflow's stored arguments) name the loop and goal of a run that has published
        nothing yet (killed before it first waited or ended, or still queued). Its `state` is
        read apart (`has_state`, `with_state`)."""
        event = dict(event or {})
        arguments = list(inputs.get("args") or ()) if isinstance(inputs, dict) else []
        if len(arguments) >= 2:
            event.setdefault("loop", arguments[0])
            event.setdefault("goal", arguments[1])
        if len(arguments) >= 3 and isinstance(arguments[2], dict):
            event.setdefault("forked_from", {k: v for k, v in arguments[2].items() if k not in ("patched", "seeded")})
        legacy = "turns" in event  # stored by an earlier forge: one trace per answer
        traces = _Traces(event["turns"] if legacy else [event["trace"]] if event.get("trace") else ())
        status = str(event.get("status", "queued" if workflow_status == "ENQUEUED" else "running"))
        if workflow_status == "CANCELLED":
            status = "cancelled"
        elif workflow_status == "ERROR":
            status = "error"
        elif workflow_status in ("ENQUEUED", "PENDING") and status == "finished":
            status = "running"
        waiting = Waiting.from_json(event["waiting"]) if status == "waiting" and event.get("waiting") else None
        if len(arguments) >= 4 and isinstance(arguments[3], dict):
            event.setdefault("continues", arguments[3].get("continues"))
        return cls(run_id, status, traces, event.get("reason"), event.get("outcome"), event.get("summary"), waiting,
                   error or event.get("error"), int(event.get("answers", 0)), event.get("goal"), event.get("loop"),
                   ForkOrigin.from_json(event["forked_from"]) if event.get("forked_from") else None,
                   None, event.get("continues"), legacy,
                   tuple(StoredChild.from_json(child) for child in event.get("children", ())),
                   status == "waiting" and bool(event.get("answered")))

    @property
    def has_state(self) -> bool:
        """Whether the run has a state to read (`STATE_EVENT`): it finished, or it waits."""
        return self.status in ("finished", "waiting")

    def with_state(self, value: Any, codec: Any = None) -> DurableResult:
        """This result with its `STATE_EVENT`'s value as its state: the wire form, read with
        the loop's `codec` (`forge.records.wire`; a run stored by an earlier forge has a
        `LoopState` there already). A value that is not a state is not kept.

        Raises:
            UsageError: the stored state is not in the wire form."""
        state = decode(value, codec) if isinstance(value, dict) else value
        return replace(self, state=state) if self.has_state and isinstance(state, LoopState) else self


class _Traces(Sequence[tuple[TransitionRecord, ...]]):
    """A stored run's traces, read from their JSON when first looked at: waiting for a run
    polls its status, and most polls never look at the records."""

    def __init__(self, data: Sequence[Sequence[Mapping[str, Any]]]) -> None:
        self._data: Sequence[Sequence[Mapping[str, Any]]] | None = data
        self._traces: tuple[tuple[TransitionRecord, ...], ...] = ()

    def _read(self) -> tuple[tuple[TransitionRecord, ...], ...]:
        if self._data is not None:
            self._traces = tuple(tuple(TransitionRecord.from_json(line) for line in each) for each in self._data)
            self._data = None
        return self._traces

    def __len__(self) -> int:
        return len(self._data) if self._data is not None else len(self._traces)

    def __getitem__(self, index: Any) -> Any:
        return self._read()[index]

    def __eq__(self, other: object) -> bool:
        return tuple(self._read()) == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._read())


def settled(result: DurableResult, answers: int) -> bool:
    """Whether a waiter is done: the run ended, or waits having had `answers` answers."""
    return result.status in ("finished", "cancelled", "error") or (result.status == "waiting" and not result.answered
                                                                    and result.answers >= answers)



def wait_for(status: Callable[[str], DurableResult], run_id: str, timeout: float | None, answers: int = 0,
             every: float = 0.02) -> DurableResult:
    """Poll `status(run_id)` until the run finishes, or waits having had `answers` answers.

    Raises:
        TimeoutError: `timeout` seconds passed first.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        result = status(run_id)
        if settled(result, answers):
            return result
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id!r} is still {result.status} after {timeout} s")
        time.sleep(every)
