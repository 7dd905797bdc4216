"""The trace: one `TransitionRecord` per fired transition, and its JSON Lines form.

JSON Lines schema, version 2 — one object per line, in firing order::

    {"v": 2, "run_id": "3f2a…", "at": "2026-12-03T08:30:00.123456Z", "machine": "single_agent",
     "sequence": 1, "step": 1, "source": "select", "trigger": "choose", "dest": "execute",
     "verdict": "selected", "guards": [{"name": "tool_selected", "value": true}, …],
     "duration_s": 0.000012, "detail": {"tool": "read_file", "arguments": "{\"path\": \"notes.md\"}"}}

- `run_id` names the run (the same on every line of a run); `at` is the wall-clock time
  (UTC, ISO 8601) when the transition finished.
- `sequence` counts fired transitions from 1; `step` is the loop iteration (tool
  execution) the transition belongs to; `guards` lists every guard on the way out of
  `source` with its value.
- `detail` holds JSON-safe facts about the stage's work. Keys by stage:
  - select: `tool`; `arguments` (the intent's arguments as JSON text, capped at
    `ARGUMENTS_LIMIT` characters); `finish` (the answer); `messages` (the policy's new
    messages); on failure `error`, `unknown_tool` + `suggestions`, `tied`, `capabilities`.
  - execute: `tool`, `status`, `attempts`, `replayed` (side-effecting tools), `error`
    (the failure's text, capped at `ERROR_TEXT_LIMIT`), and when the tool was tried more
    than once `tries`: one `{"attempt", "delay_s", "error"}` per attempt, where `delay_s`
    is the wait before it and `error` is what it raised (null for the one that succeeded).
  - approve: `tool`, `approval` (approved / rejected / refused / no answer / not needed).
  - observe: `status`, and `payload`: a summary of the observation's payload (a string is
    itself, anything else its JSON or repr; an error its `Type: message`), capped at
    `PAYLOAD_LIMIT` characters.
  - verify: `verified`, `decision`; a failure of any stage: `failed`, `error`.
- Arguments and payloads pass through the loop's `redact(tool, field, value)` hook, when
  set, before they are summarised: what it returns is what the trace keeps.

Readers accept `"v": 1` (no `run_id`, `at`, arguments or payloads) and `"v": 2`, and skip the
journal's `"v": 3` call lines that `write_trace(..., journal=...)` puts between records.

A run whose tools ran other loops (`AgentLoop.as_tool`) has each child run written in the
same file, just before the calls of the parent's transition that ran it: a line
`{"v": 3, "type": "child", "run_id": PATH, "parent": …, "tool": …, "transition": N}`, then
the child's records and calls (its run id is its path, `PARENT/TOOL.N`), its own children
nested the same way. The readers read one run of a file: the file's own by default, a
child's when given its path (`run=`), so a reader that knows nothing of children reads the
parent's trace and journal as before.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forge.errors import ForgeError, UsageError, WrongType
from forge.files import write_atomically
from forge.records.columns import Columns
from forge.records.journal import ForkOrigin, Journal, JournalCodec, JournalEntry, SharedRequests, journal_lines

__all__ = [
    "ARGUMENTS_LIMIT",
    "ERROR_TEXT_LIMIT",
    "PAYLOAD_LIMIT",
    "TRACE_VERSION",
    "Redact",
    "GuardResult",
    "Trace",
    "TraceFormatError",
    "TransitionRecord",
    "capped",
    "child_blocks",
    "child_headers",
    "error_text",
    "in_file_order",
    "quoted",
    "read_journal",
    "read_trace",
    "redacted_messages",
    "summary",
    "write_trace",
]

TRACE_VERSION = 2
READABLE_VERSIONS = (1, 2)
"""Versions of transition records; a file of version 3 is a v2 trace with the run's journal
between its records (lines `{"v": 3, "type": "call", …}`, see `forge.records.journal`)."""

ARGUMENTS_LIMIT = 1000
"""How much of a call's arguments (as JSON text) a trace keeps."""

PAYLOAD_LIMIT = 1000
"""How much of an observation's payload summary a trace keeps."""

Redact = Callable[[str, str, Any], Any]
"""`redact(tool, field, value) -> value`: called with `field` "arguments" or "payload"
before the trace keeps a summary of `value`; return what may be kept (a copy with secrets
masked, a placeholder, or `value` itself). It must not change `value` in place."""


@dataclass(frozen=True, slots=True)
class GuardResult:
    """One guard evaluated while leaving a state, and what it said."""

    name: str
    value: bool


@dataclass(frozen=True, slots=True)
class TransitionRecord:
    """One fired transition: where from, by which trigger, where to, and why.

    `guards` holds every guard of the source state's transitions with its value (each
    evaluated once where it could hold; a verdict comparison that cannot is False without a
    call); exactly one transition was enabled. `duration_s` covers the stage action, the guards
    and the state change; it is left out of equality, so two runs that took the same
    transitions have equal traces. `detail` is read-only by convention and JSON-safe.
    """

    sequence: int
    step: int
    source: str
    trigger: str
    dest: str
    guards: tuple[GuardResult, ...] = ()
    verdict: str | None = None
    duration_s: float = field(default=0.0, compare=False)
    detail: Mapping[str, Any] = field(default_factory=dict)
    machine: str = ""
    run_id: str = field(default="", compare=False)
    at: float = field(default=0.0, compare=False)
    """Wall-clock seconds since the epoch when the transition finished (0.0: not known, a v1 trace)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "v": TRACE_VERSION,
            "run_id": self.run_id,
            "at": _iso(self.at) if self.at else None,
            "machine": self.machine,
            "sequence": self.sequence,
            "step": self.step,
            "source": self.source,
            "trigger": self.trigger,
            "dest": self.dest,
            "verdict": self.verdict,
            "guards": [{"name": g.name, "value": g.value} for g in self.guards],
            "duration_s": self.duration_s,
            "detail": dict(self.detail),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TransitionRecord:
        """Build a record from one decoded line (v1 or v2). Raises ValueError naming the bad field."""
        if data.get("v") not in READABLE_VERSIONS or isinstance(data.get("v"), bool):
            raise UsageError(f"unsupported trace version {data.get('v')!r}; this forge reads v1 and v2")
        try:
            guards = tuple(GuardResult(str(g["name"]), _bool(g["value"])) for g in data.get("guards", []))
            return cls(
                sequence=_int(data["sequence"]),
                step=_int(data["step"]),
                source=_str(data["source"]),
                trigger=_str(data["trigger"]),
                dest=_str(data["dest"]),
                guards=guards,
                verdict=data.get("verdict"),
                duration_s=float(data.get("duration_s", 0.0)),
                detail=dict(data.get("detail", {})),
                machine=str(data.get("machine", "")),
                run_id=_str(data.get("run_id") or ""),
                at=_epoch(data.get("at")),
            )
        except KeyError as missing:
            raise UsageError(f"missing field {missing}") from None
        except (TypeError, AttributeError) as error:
            raise UsageError(f"malformed record: {error}") from None


class Trace(Columns[TransitionRecord]):
    """A run's trace: its records, kept as columns and made into `TransitionRecord`s when read.

    A long run keeps one trace entry per transition, so the entry is small: the edge
    (source, trigger, destination) as an index into the edges seen, the step, the duration
    and the finishing time (float32 seconds since `started_at`: 0.25 ms resolution an hour in), references to the guard
    results, the verdict and the detail, which are shared between entries with equal content
    (a state has a handful of distinct guard tuples and details; a detail holding something
    unhashable, like messages, is kept as it is), and the entry's subject: the capped
    arguments text of a select, or the observation a record made, whose payload is
    summarised (through `redact`) only when the record is read. No entry refers to another,
    so the collector has nothing to chase. `sequence` is the position (1..n), as in every
    trace. Equal to any sequence of equal records.
    """

    __slots__ = (
        "_at",
        "_detail",
        "_duration",
        "_edge",
        "_edge_ids",
        "_edges",
        "_guards",
        "_shared",
        "_step",
        "_subject",
        "_verdict",
        "forked_from",
        "length",
        "machine",
        "redact",
        "run_id",
        "started_at",
    )
    what = "trace"

    def __init__(self, records: Iterable[TransitionRecord] = (), machine: str = "", run_id: str = "",
                 started_at: float = 0.0, redact: Redact | None = None) -> None:
        self.machine, self.run_id, self.redact = machine, run_id, redact
        self.started_at = started_at  # wall-clock seconds since the epoch at the run's start
        self.forked_from: ForkOrigin | None = None  # a fork's origin (AgentLoop.fork), as its journal has it
        self._edges: list[tuple[str, str, str]] = []
        self._edge_ids: dict[tuple[str, str, str], int] = {}
        self._edge = array("i")
        self._step = array("i")
        self.length: Callable[[], int] = self._step.__len__  # len(self) without a Python call: a streamed run asks it per event
        self._duration = array("d")
        self._at = array("f")
        self._guards: list[tuple[GuardResult, ...]] = []
        self._verdict: list[str | None] = []
        self._detail: list[Mapping[str, Any]] = []
        self._subject: list[Any] = []
        self._shared: dict[Any, Mapping[str, Any]] = {}
        for record in records:
            self.append(record)

    def append(self, record: TransitionRecord) -> None:
        """Add `record` as the next transition. Raises ValueError unless its sequence is next."""
        if record.sequence != len(self._step) + 1:
            raise UsageError(f"record {record.sequence} cannot follow {len(self._step)} records")
        if not self.machine:
            self.machine = record.machine
        if not self.run_id:
            self.run_id = record.run_id
        if not self.started_at and record.at:
            self.started_at = record.at - record.duration_s
        self.add(record.step, (record.source, record.trigger, record.dest), record.guards, record.verdict,
                 record.duration_s, record.detail, record.at - self.started_at if record.at else 0.0)

    def add(self, step: int, edge: tuple[str, str, str], guards: tuple[GuardResult, ...], verdict: str | None,
            duration_s: float, detail: Mapping[str, Any], at: float = 0.0, subject: Any = None) -> None:
        """Add the next transition along `edge` (source, trigger, dest) from its parts,
        making no record (the engine's path). `at` is seconds since `started_at`; `subject`
        is the select's arguments text or the observation recorded (see the class)."""
        index = self._edge_ids.get(edge)
        if index is None:
            index = self._edge_ids[edge] = len(self._edges)
            self._edges.append(edge)
        self._edge.append(index)
        self._step.append(step)
        self._duration.append(duration_s)
        self._at.append(at)
        self._guards.append(guards)
        self._verdict.append(sys.intern(verdict) if isinstance(verdict, str) else verdict)
        self._detail.append(self._share(detail))
        self._subject.append(subject)

    def _share(self, detail: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            key = tuple(detail.items())
            return self._shared.setdefault(key, detail)
        except TypeError:  # an unhashable value: this detail is its own
            return detail

    def _item(self, index: int) -> TransitionRecord:
        source, trigger, dest = self._edges[self._edge[index]]
        detail = self._detail[index]
        subject = self._subject[index]
        if subject is not None:
            detail = {**detail, **self._facts(subject)}
        at = self.started_at + self._at[index] if self.started_at else 0.0
        return TransitionRecord(index + 1, self._step[index], source, trigger, dest, self._guards[index],
                                self._verdict[index], self._duration[index], detail, self.machine, self.run_id, at)

    def _facts(self, subject: Any) -> dict[str, str]:
        if isinstance(subject, str):
            return {"arguments": subject}
        if isinstance(subject, Mapping):  # a call's arguments, kept as they were (no redact hook)
            return {"arguments": summary(subject, ARGUMENTS_LIMIT)}
        if isinstance(subject, list):  # the arguments of calls made together (text where redact made it)
            return {"arguments": "[" + ", ".join(each if isinstance(each, str) else summary(each, ARGUMENTS_LIMIT)
                                                 for each in subject) + "]"}
        if isinstance(subject, tuple):  # the observations of calls made together
            return {"payload": "[" + ", ".join(self._payload(each) for each in subject) + "]"}
        return {"payload": self._payload(subject)}

    def _payload(self, observation: Any) -> str:
        """An observation's payload as the trace shows it: through `redact`, summarised."""
        payload = observation.payload
        if self.redact is not None:
            try:
                payload = self.redact(observation.tool_name, "payload", payload)
            except Exception as error:  # never show what could not be redacted
                return f"<not shown: redact raised {error_text(error, 200)}>"
        return summary(payload, PAYLOAD_LIMIT)

    def __len__(self) -> int:
        return len(self._step)

    def move_to(self, count: int, records: Sequence[TransitionRecord]) -> None:
        """Keep the first `count` transitions, cutting back or appending from `records` (the
        furthest the run got); the cost is what changes (the debugger steps with it)."""
        if count < len(self):
            for column in (self._edge, self._step, self._duration, self._at, self._guards, self._verdict,
                           self._detail, self._subject):
                del column[count:]
        for record in records[len(self):count]:
            self.append(record)

    def __repr__(self) -> str:
        return f"Trace({len(self)} transitions of {self.machine or 'a machine'})"


class TraceFormatError(ForgeError, ValueError):
    """A trace file line cannot be read. `path` and `line` (1-based) say where."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path, self.line, self.problem = path, line, problem


def write_trace(records: Iterable[TransitionRecord], path: str | Path, journal: Sequence[JournalEntry] | None = None,
                codec: JournalCodec | None = None) -> Path:
    """Write `records` as JSON Lines to `path` (parents created) and return the path. With
    `journal` (a `LoopResult.journal`), each call it records is written just before the
    record of the transition it was made in, so `AgentLoop.replay(path)` can make the run
    again from the file; `codec` writes the values JSON cannot hold (default: the
    journal's own, the loop's `codec`). A loop's journal is written through the loop's
    `redact` (`forge.machine.redaction`), as the records were made.

    Raises:
        JournalEncodeError: (a TypeError) a journaled value has no JSON form and the journal
            has no codec for it; nothing is written.
    """
    if codec is None and isinstance(journal, Journal):
        codec = journal.codec
    records = records if isinstance(records, Sequence) else list(records)
    kept: Sequence[JournalEntry] = journal if journal is not None else ()
    if isinstance(journal, Journal) and journal.masking is not None:
        kept = journal.masking(journal, records)
    calls = journal_lines(kept, codec)
    origin = journal.forked_from if isinstance(journal, Journal) else getattr(records, "forked_from", None)
    run_id = journal.run_id if isinstance(journal, Journal) else getattr(records, "run_id", "")
    children = child_blocks(journal, lambda child: _child_lines(child, codec))

    def lines() -> Iterable[str]:
        if isinstance(origin, ForkOrigin):
            yield _line({"v": 3, "type": "fork", "run_id": run_id, "forked_from": origin.to_json()})
        yield from map(_line, in_file_order((record.to_json() for record in records), calls, children))

    return write_atomically(path, lines())


ChildLines = tuple[int, Sequence[Mapping[str, Any]]]
"""A child run's lines in its parent's file, and the parent's transition they stand before."""


def child_blocks(journal: Any, lines_of: Callable[[Any], Sequence[Mapping[str, Any]]]) -> list[ChildLines]:
    """The lines of each child run `journal` keeps (`Journal.children`; one still under
    way is left out), by `lines_of(child)`: a `forge.result.ChildRun`'s lines without its
    header, which this adds."""
    blocks: list[ChildLines] = []
    for child in getattr(journal, "children", ()):
        result = getattr(child, "result", None)
        if result is None:
            continue
        parent = getattr(journal, "run_id", "")
        header = {"v": 3, "type": "child", "run_id": child.path, "parent": parent, "tool": child.tool,
                  "transition": child.transition}
        blocks.append((child.transition, [header, *lines_of(child)]))
    return blocks


def _child_lines(child: Any, codec: JournalCodec | None) -> list[Mapping[str, Any]]:
    """A child run's records and calls as `write_trace` writes them (its children too)."""
    journal, records = child.result.journal, child.result.trace
    kept = journal.masking(journal, records) if isinstance(journal, Journal) and journal.masking is not None else journal
    calls = journal_lines(kept, codec if codec is not None else getattr(journal, "codec", None))
    return list(in_file_order((record.to_json() for record in records), calls,
                              child_blocks(journal, lambda grandchild: _child_lines(grandchild, codec))))


def in_file_order(records: Iterable[Mapping[str, Any]], calls: Sequence[Mapping[str, Any]],
                  children: Sequence[ChildLines] = ()) -> Iterable[Mapping[str, Any]]:
    """Records' and journal calls' JSON lines in the order a trace file holds them: each
    call just before the record of the transition it was made in, calls after the last
    record at the end; each child run's lines (`children`) before the calls of the
    transition that ran it."""
    position = block = 0
    for record in records:
        while block < len(children) and children[block][0] <= record["sequence"]:
            yield from children[block][1]
            block += 1
        while position < len(calls) and calls[position]["transition"] <= record["sequence"]:
            yield calls[position]
            position += 1
        yield record
    for _, lines in children[block:]:
        yield from lines
    yield from calls[position:]


def _line(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), default=str) + "\n"


def read_trace(path: str | Path, run: str | None = None) -> tuple[TransitionRecord, ...]:
    """Read a JSON Lines trace: the records of the file's own run, or with `run` (a child
    run's path: its run id, or that path after the file's run id, `research.1`) of that
    child's. Blank lines are skipped.

    Raises:
        OSError: the file cannot be read.
        TraceFormatError: a line is not JSON, not a v1 record, or sequences are not 1..n.
        ValueError: (a UsageError) the file has no child run `run`.
    """
    records: list[TransitionRecord] = []
    lines = _RunLines(run)
    with Path(path).open("rb") as file:
        for number, raw in enumerate(file, start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
                if not isinstance(data, dict):
                    raise UsageError("a line must be a JSON object")
                if not lines.wanted(data) or (data.get("v") == 3 and data.get("type") in ("call", "fork")):
                    continue  # the run's journal: read_journal reads it
                record = TransitionRecord.from_json(data)
            except (ValueError, RecursionError) as error:
                raise _unreadable(path, number, error) from None
            if record.sequence != len(records) + 1:
                raise TraceFormatError(
                    str(path), number, f"sequence {record.sequence} out of order; expected {len(records) + 1}"
                )
            records.append(record)
    lines.found(path)
    return tuple(records)


def read_journal(path: str | Path, codec: JournalCodec | None = None, run: str | None = None) -> Journal:
    """The journal written with a trace (its `"type": "call"` lines, and where a forked run
    came from, its `"type": "fork"` line; other lines skipped): the file's own run's, or
    with `run` a child run's (as `read_trace`).

    Raises:
        OSError: the file cannot be read.
        TraceFormatError: a call line is not JSON or not a call entry (naming the line).
        ValueError: (a UsageError) the file has no child run `run`.
    """
    journal = Journal(codec=codec)
    lines, requests = _RunLines(run), SharedRequests()
    with Path(path).open("rb") as file:
        for number, raw in enumerate(file, start=1):
            if b'"call"' not in raw and b'"fork"' not in raw and b'"child"' not in raw:
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
                if not isinstance(data, dict) or not lines.wanted(data) or data.get("type") not in ("call", "fork"):
                    continue
                if data["type"] == "fork":
                    journal.forked_from = ForkOrigin.from_json(data.get("forked_from"))
                    journal.run_id = journal.run_id or str(data.get("run_id") or "")
                    continue
                journal.append(JournalEntry.from_json(requests.read(data), codec))
            except (ValueError, TypeError, RecursionError) as error:
                raise _unreadable(path, number, error) from None
    lines.found(path)
    if run is not None and len(journal):
        journal.run_id = journal[0].run_id
    return journal


def child_headers(path: str | Path) -> list[dict[str, Any]]:
    """The `"type": "child"` lines of a trace file, in file order (every depth): each child
    run's `run_id` (its path), `parent`, `tool` and `transition`.

    Raises:
        OSError: the file cannot be read.
        TraceFormatError: such a line is not JSON (naming the line).
    """
    headers = []
    with Path(path).open("rb") as file:
        for number, raw in enumerate(file, start=1):
            if b'"child"' not in raw:
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError) as error:
                raise _unreadable(path, number, error) from None
            if isinstance(data, dict) and data.get("v") == 3 and data.get("type") == "child":
                headers.append(data)
    return headers


class _RunLines:
    """Which lines of a trace file belong to the run a reader reads: the file's own (no
    `run`), or the child run `run` names by its path, whole or after the file's run id
    (`research.1/notes.1`: the tool and number of each run on the way down)."""

    __slots__ = ("_children", "_run", "_seen")

    def __init__(self, run: str | None) -> None:
        self._run, self._seen = run, False
        self._children: dict[str, str] = {}  # a child's run id: its path after the file's run id

    def wanted(self, data: Mapping[str, Any]) -> bool:
        run_id = data.get("run_id")
        if data.get("v") == 3 and data.get("type") == "child":
            path, parent = str(run_id), data.get("parent")
            above = self._children.get(parent) if isinstance(parent, str) else None
            relative = path.rsplit("/", 1)[-1] if above is None else f"{above}/{path.rsplit('/', 1)[-1]}"
            self._children[path] = relative
            if self._run is not None and not self._seen and self._run in (path, relative):
                self._run, self._seen = path, True
            return False
        if self._run is None:
            return run_id not in self._children
        return self._seen and run_id == self._run

    def found(self, path: str | Path) -> None:
        if self._run is not None and not self._seen:
            raise UsageError(f"{path} holds no child run {self._run!r}"
                             + (f"; it holds: {', '.join(self._children.values())}" if self._children else
                                "; its run called no other loop"))


def _unreadable(path: str | Path, number: int, error: Exception) -> TraceFormatError:
    """What a trace or journal reader says of line `number` that it could not read."""
    if isinstance(error, UnicodeDecodeError):
        return TraceFormatError(str(path), number, f"not UTF-8 text ({error.reason} at byte {error.start})")
    if isinstance(error, RecursionError):
        return TraceFormatError(str(path), number, "nested too deeply to read")
    if isinstance(error, json.JSONDecodeError):
        return TraceFormatError(str(path), number, f"not a JSON line ({error.msg.lower()} at column {error.colno}); "
                                "a trace holds one JSON object per line")
    return TraceFormatError(str(path), number, quoted(str(error)))


def quoted(text: str, limit: int = 300) -> str:
    """`text` cut to `limit` characters, saying how much was cut: an error message never
    echoes a huge input whole."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def capped(value: Any, limit: int) -> Any:
    """`value` (JSON-like data) with every text longer than `limit` cut there (`quoted`):
    a message can hold a megabyte a model sent, and a page or a trace keeps a summary."""
    if isinstance(value, str):
        return quoted(value, limit)
    if isinstance(value, dict):
        return {key: capped(item, limit) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [capped(item, limit) for item in value]
    return value


ERROR_TEXT_LIMIT = 2000
"""How much of an error's text a trace keeps: a tool failing with a 50 MB message must not
write a 50 MB trace line (the exception itself, in result.error or the observation, is whole)."""


def error_text(error: object, limit: int = ERROR_TEXT_LIMIT) -> str:
    """`Type: message`, capped at `limit` characters; never raises."""
    try:
        text = f"{type(error).__name__}: {error}"
    except Exception:  # an exception whose __str__ raises still gets recorded
        text = f"{type(error).__name__} (its message could not be made: str() raised)"
    return quoted(text, limit)


def summary(value: Any, limit: int) -> str:
    """What a trace keeps of `value`: a string as it is, an exception as `Type: message`,
    plain data (dicts, lists, numbers …) as JSON, anything else its repr; capped at `limit`
    characters. Never raises."""
    if isinstance(value, str):
        return quoted(value, limit)
    if isinstance(value, BaseException):
        return error_text(value, limit)
    try:
        if isinstance(value, (dict, list, tuple, int, float, bool)) or value is None:
            text = json.dumps(value, ensure_ascii=False, default=repr)
        else:
            text = repr(value)
    except Exception:  # a cycle, or a repr that raises
        try:
            text = repr(value)
        except Exception:
            text = f"<{type(value).__name__} that cannot be shown>"
    return quoted(text, limit)


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _epoch(value: Any) -> float:
    if value is None:
        return 0.0
    if not isinstance(value, str):
        raise WrongType(f"expected an ISO 8601 time for 'at', got {value!r}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise WrongType(f"expected an ISO 8601 time for 'at', got {value!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WrongType(f"expected an integer, got {value!r}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise WrongType(f"expected a string, got {value!r}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise WrongType(f"expected true or false, got {value!r}")
    return value


def redacted_messages(messages: Iterable[Mapping[str, Any]], redact: Redact,
                      earlier: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """Chat messages (chat-completions form) with `redact` applied to each tool call's
    arguments and each tool result's content, named by the call it answers (in
    `messages` or in the `earlier` ones of the conversation). What the trace and a
    cassette keep of a chat policy's conversation."""
    names: dict[str, str] = {}
    for message in earlier:
        for call in message.get("tool_calls") or ():
            _redacted_call(call, redact, names, masking=False)
    out: list[dict[str, Any]] = []
    for message in messages:
        message = dict(message)
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            message["tool_calls"] = [_redacted_call(call, redact, names) for call in calls]
        if message.get("role") == "tool" and message.get("tool_call_id") in names:
            message["content"] = _redacted_content(names[message["tool_call_id"]], message.get("content"), redact)
        out.append(message)
    return out


def _redacted_content(tool: str, content: Any, redact: Redact) -> Any:
    """A tool message's content through `redact` as the payload it carries: JSON text (what a
    chat policy sends of a payload that is not text) is given to `redact` as the value it
    holds and written back as JSON, so a hook that masks a payload's fields masks them here
    too; any other content is given as it is."""
    if isinstance(content, str) and content[:1] in ("{", "["):
        try:
            value = json.loads(content)
        except (ValueError, RecursionError):
            return redact(tool, "payload", content)
        masked = redact(tool, "payload", value)
        return masked if isinstance(masked, str) else json.dumps(masked, default=str)
    return redact(tool, "payload", content)


def _redacted_call(call: Any, redact: Redact, names: dict[str, str], masking: bool = True) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return call
    names[str(call.get("id"))] = function["name"]
    if not masking:
        return call
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError):
        return call
    if not isinstance(arguments, dict):
        return call
    masked = json.dumps(redact(function["name"], "arguments", arguments), default=str)
    return {**call, "function": {**function, "arguments": masked}}
