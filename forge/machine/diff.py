"""How two runs differ, transition by transition: `diff(a, b)`, what `forge diff` prints.

A run here is its trace and its journal (a `LoopResult`, a trace file written with its
journal, or a `(records, journal)` pair). Transition n of one run is set against transition
n of the other: what differs is its edge and verdict (`state`), the calls to the world made
while it fired (`call`: their kind and tool; `arguments`; `outcome`: what they returned or
raised), and the facts its record keeps (`detail`). Timing and run ids are never compared:
they differ between any two runs. The first transition with a difference is where the runs
diverge; a fork and its source diverge at the fork's transition.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from forge.errors import WrongType
from forge.records.journal import JournalEntry, identity_hash
from forge.records.trace import TransitionRecord, error_text, read_journal, read_trace, summary

__all__ = ["Difference", "RunDiff", "diff", "recorded_run"]

SHOWN = 40
"""How many differences `str(RunDiff)` lists before it says how many more there are."""

SHOWN_TEXT = 200
"""How much of a value a difference shows (`forge.records.trace.summary`)."""


@dataclass(frozen=True, slots=True)
class Difference:
    """One thing transition `transition` did differently: `what` is state, call,
    arguments, outcome or `detail.KEY`; `a` and `b` say what each run had there (`—`:
    nothing, as when one run had ended)."""

    transition: int
    what: str
    a: str
    b: str
    run: str = ""
    """Which run the transition is of: "" for the runs compared, else a child run's path
    after their run ids (`research.2`, `research.2/notes.1`): the child runs their tools
    made are set side by side too, the N-th child of a tool against the other's N-th."""

    @property
    def where(self) -> str:
        """The transition as the table shows it: `4`, or `research.2:4` inside a child run."""
        return f"{self.run}:{self.transition}" if self.run else str(self.transition)


@dataclass(frozen=True, slots=True)
class RunDiff:
    """Two runs set side by side: `first` is the first transition where they differ (None
    when they are equal), `differences` every difference from there on, in order, and
    `transitions` how many each run fired."""

    first: int | None
    differences: tuple[Difference, ...]
    transitions: tuple[int, int]
    names: tuple[str, str] = ("A", "B")

    @property
    def equal(self) -> bool:
        return self.first is None

    def __str__(self) -> str:
        a, b = self.names
        if self.first is None:
            return f"the runs are equal: {self.transitions[0]} transitions each"
        lines = [f"the runs diverge at transition {self.first} ({a}: {self.transitions[0]} transitions, "
                 f"{b}: {self.transitions[1]})"]
        rows = [("transition", "what", a, b)] + [(d.where, d.what, d.a, d.b) for d in self.differences[:SHOWN]]
        widths = [max(len(row[i]) for row in rows) for i in range(2)] + [min(48, max(len(row[2]) for row in rows))]
        for row in rows:
            lines.append(f"{row[0]:>{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}".rstrip())
        if len(self.differences) > SHOWN:
            lines.append(f"… and {len(self.differences) - SHOWN} more differences")
        return "\n".join(lines)


Recorded = Any
"""A run to compare: a `LoopResult`, a trace file's path, or `(records, journal)`."""


def diff(a: Recorded, b: Recorded, names: tuple[str, str] = ("A", "B")) -> RunDiff:
    """Set run `a` against run `b` (see the module); `names` head their columns.

    Raises:
        TypeError: (WrongType) a run is not one of the accepted forms.
        OSError, TraceFormatError: a file cannot be read.
    """
    run_a, run_b = _tree(a), _tree(b)
    differences, first = _compared(run_a, run_b, "")
    return RunDiff(first, tuple(differences), (len(run_a.trace), len(run_b.trace)), names)


def _compared(a: Any, b: Any, path: str) -> tuple[list[Difference], int | None]:
    """The differences of runs `a` and `b` (a trace, a journal and child runs each), the
    child runs' after the transition that made them; and the first transition of these runs
    where they differ (a child's differences count at the transition that made it)."""
    records_a, calls_a = _by_transition(a.trace, a.journal)
    records_b, calls_b = _by_transition(b.trace, b.journal)
    children_a, children_b = _named(a.children), _named(b.children)
    inside: dict[int, list[Difference]] = {}
    firsts: list[int] = []
    for name in [*children_a, *(name for name in children_b if name not in children_a)]:
        child_a, child_b = children_a.get(name), children_b.get(name)
        at = child_a.transition if child_a is not None else children_b[name].transition
        if child_a is None or child_b is None:
            found = [Difference(at, "child", _NOTHING if child_a is None else name, _NOTHING if child_b is None else name,
                                path.rstrip("/"))]
        else:
            found, _ = _compared(child_a.result, child_b.result, f"{path}{name}/")
        if found:
            inside.setdefault(at, []).extend(found)
            firsts.append(at)
    differences: list[Difference] = []
    for n in range(1, max(len(records_a), len(records_b)) + 1):
        own = _transition(n, _at(records_a, n), _at(records_b, n), calls_a.get(n, ()), calls_b.get(n, ()))
        if own:
            firsts.append(n)
        differences.extend(inside.pop(n, ()))
        differences.extend(replace(d, run=path.rstrip("/")) if path else d for d in own)
    for rest in inside.values():
        differences.extend(rest)
    return differences, min(firsts, default=None)


def _named(children: Sequence[Any]) -> dict[str, Any]:
    """Child runs by their path after their parent's run id (`research.2`)."""
    return {child.path.rsplit("/", 1)[-1]: child for child in children if hasattr(child, "result")}


def _tree(run: Recorded) -> Any:
    """A run to compare as something with `trace`, `journal` and `children`.

    Raises:
        TypeError: (WrongType) `run` is not one of the accepted forms.
        OSError, TraceFormatError: a file cannot be read.
    """
    if isinstance(run, (str, os.PathLike)):
        from forge.machine.fork import read_recorded

        return read_recorded(run)
    if (isinstance(run, tuple) and len(run) == 2) or not hasattr(run, "children"):
        from forge.machine.fork import RecordedRun

        return RecordedRun(*recorded_run(run))
    return run


def recorded_run(run: Recorded) -> tuple[Sequence[TransitionRecord], Sequence[JournalEntry]]:
    """A run's records and its journal.

    Raises:
        TypeError: (WrongType) `run` is not one of the accepted forms.
        OSError, TraceFormatError: a file cannot be read.
    """
    if isinstance(run, (str, os.PathLike)):
        records, journal = read_trace(os.fspath(run)), read_journal(os.fspath(run))
    elif isinstance(run, tuple) and len(run) == 2:
        records, journal = run
    elif hasattr(run, "trace") and hasattr(run, "journal"):
        records, journal = run.trace, run.journal
    else:
        raise WrongType(f"diff() compares LoopResults, trace files or (records, journal) pairs, got {type(run).__name__}")
    return records, journal


def _by_transition(records: Sequence[TransitionRecord], journal: Sequence[JournalEntry]
                   ) -> tuple[Sequence[TransitionRecord], dict[int, list[JournalEntry]]]:
    calls: dict[int, list[JournalEntry]] = {}
    for entry in journal:
        calls.setdefault(entry.transition, []).append(entry)
    return records, calls


def _at(records: Sequence[TransitionRecord], n: int) -> TransitionRecord | None:
    return records[n - 1] if n <= len(records) else None


_NOTHING = "—"


def _transition(n: int, a: TransitionRecord | None, b: TransitionRecord | None, calls_a: Sequence[JournalEntry],
                calls_b: Sequence[JournalEntry]) -> list[Difference]:
    found: list[Difference] = []
    state_a, state_b = _state(a), _state(b)
    if state_a != state_b:
        found.append(Difference(n, "state", state_a, state_b))
    for index in range(max(len(calls_a), len(calls_b))):
        call_a = calls_a[index] if index < len(calls_a) else None
        call_b = calls_b[index] if index < len(calls_b) else None
        found.extend(_call(n, call_a, call_b))
    detail_a = dict(a.detail) if a is not None else {}
    detail_b = dict(b.detail) if b is not None else {}
    if a is not None and b is not None:
        for key in sorted(set(detail_a) | set(detail_b)):
            if detail_a.get(key, _NOTHING) != detail_b.get(key, _NOTHING):
                found.append(Difference(n, f"detail.{key}", summary(detail_a.get(key, _NOTHING), SHOWN_TEXT),
                                        summary(detail_b.get(key, _NOTHING), SHOWN_TEXT)))
    return found


def _state(record: TransitionRecord | None) -> str:
    if record is None:
        return _NOTHING
    verdict = f" [{record.verdict}]" if record.verdict else ""
    return f"{record.source} -{record.trigger}-> {record.dest}{verdict}"


def _call(n: int, a: JournalEntry | None, b: JournalEntry | None) -> list[Difference]:
    if a is None or b is None or (a.kind, a.name) != (b.kind, b.name):
        return [Difference(n, "call", _called(a), _called(b))]
    found = []
    if a.args_sha256 != b.args_sha256:
        found.append(Difference(n, "arguments", _asked(a), _asked(b)))
    if _outcome_key(a) != _outcome_key(b):
        found.append(Difference(n, "outcome", _outcome(a), _outcome(b)))
    return found


def _called(entry: JournalEntry | None) -> str:
    if entry is None:
        return _NOTHING
    return f"tool {entry.name!r}" if entry.kind == "tool" else entry.kind


def _asked(entry: JournalEntry) -> str:
    return summary(entry.identity, SHOWN_TEXT) if entry.identity is not None else f"sha256 {entry.args_sha256[:12]}…"


def _outcome(entry: JournalEntry) -> str:
    if entry.error is not None:
        return f"raised {error_text(entry.error, SHOWN_TEXT)}"
    return summary(entry.value, SHOWN_TEXT)


def _outcome_key(entry: JournalEntry) -> tuple[bool, str]:
    """What two outcomes are compared by: the error's text, or the value's canonical hash
    (dicts equal whatever their key order, a tuple equal to the list a file read back)."""
    if entry.error is not None:
        return True, error_text(entry.error)
    return False, identity_hash(entry.value)
