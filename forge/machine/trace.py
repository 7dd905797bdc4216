"""The trace: one `TransitionRecord` per fired transition, and its JSON Lines form.

JSON Lines schema, version 1 — one object per line, in firing order::

    {"v": 1, "machine": "single_agent", "sequence": 1, "step": 1,
     "source": "select", "trigger": "choose", "dest": "execute", "verdict": "selected",
     "guards": [{"name": "tool_selected", "value": true}, …],
     "duration_s": 0.000012, "detail": {"tool": "read_file"}}

`sequence` counts fired transitions from 1; `step` is the loop iteration (tool execution)
the transition belongs to; `guards` lists every guard evaluated on the way out of `source`
with its value; `detail` holds JSON-safe facts about the stage's work (tool, status,
attempts, replayed, error text). Readers accept exactly `"v": 1`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "TRACE_VERSION",
    "GuardResult",
    "TraceFormatError",
    "TransitionRecord",
    "read_trace",
    "write_trace",
]

TRACE_VERSION = 1


@dataclass(frozen=True, slots=True)
class GuardResult:
    """One guard evaluated while leaving a state, and what it said."""

    name: str
    value: bool


@dataclass(frozen=True, slots=True)
class TransitionRecord:
    """One fired transition: where from, by which trigger, where to, and why.

    `guards` holds every guard of the source state's transitions, each evaluated once;
    exactly one transition was enabled. `duration_s` covers the stage action, the guards
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

    def to_json(self) -> dict[str, Any]:
        return {
            "v": TRACE_VERSION,
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
        """Build a record from one decoded line. Raises ValueError naming the bad field."""
        if data.get("v") != TRACE_VERSION:
            raise ValueError(f"unsupported trace version {data.get('v')!r}; this forge reads v{TRACE_VERSION}")
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
            )
        except KeyError as missing:
            raise ValueError(f"missing field {missing}") from None
        except (TypeError, AttributeError) as error:
            raise ValueError(f"malformed record: {error}") from None


class TraceFormatError(ValueError):
    """A trace file line cannot be read. `path` and `line` (1-based) say where."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path, self.line, self.problem = path, line, problem


def write_trace(records: Iterable[TransitionRecord], path: str | Path) -> Path:
    """Write `records` as JSON Lines to `path` (parents created) and return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record.to_json(), separators=(",", ":"), default=str))
            out.write("\n")
    return target


def read_trace(path: str | Path) -> tuple[TransitionRecord, ...]:
    """Read a JSON Lines trace. Blank lines are skipped.

    Raises:
        OSError: the file cannot be read.
        TraceFormatError: a line is not JSON, not a v1 record, or sequences are not 1..n.
    """
    records: list[TransitionRecord] = []
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("a line must be a JSON object")
                record = TransitionRecord.from_json(data)
            except ValueError as error:
                raise TraceFormatError(str(path), number, str(error)) from None
            if record.sequence != len(records) + 1:
                raise TraceFormatError(
                    str(path), number, f"sequence {record.sequence} out of order; expected {len(records) + 1}"
                )
            records.append(record)
    return tuple(records)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value
