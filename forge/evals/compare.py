"""Two evals of one dataset set side by side: what changed per case, and which changes are
regressions (what `forge eval --against BASELINE --no-regressions` gates CI on).

A case regressed when it ran before and now fails to run, its score fell, an assertion that
held no longer holds, or it ended in success before and not now. For every case whose runs
differ, the first transition where they diverge is named (`forge.diff`): the turn, the
transition, and what differs there. Cases only one side has are listed, never regressions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from forge.evals.results import CaseResult, EvalResults
from forge.machine.diff import Difference, diff

__all__ = ["CaseChange", "Comparison", "Divergence", "compare"]

_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where a case's runs first differ: `turn` and `transition`, and the differences there."""

    turn: int
    transition: int
    differences: tuple[Difference, ...]

    def __str__(self) -> str:
        shown = "; ".join(f"{d.what} {' → '.join(_around(d.a, d.b))}" for d in self.differences[:_SHOWN])
        more = f"; and {len(self.differences) - _SHOWN} more" if len(self.differences) > _SHOWN else ""
        return f"turn {self.turn}, transition {self.transition}: {shown}{more}"


_SHOWN = 2
"""How many of the differences at a divergence a line shows (`forge diff` shows them all)."""


_TELLING = ("state", "call", "detail.tool", "arguments", "detail.arguments")
"""The differences that say most in a line, first: where the runs went, then what they called."""


def _telling(difference: Difference) -> int:
    return _TELLING.index(difference.what) if difference.what in _TELLING else len(_TELLING)


def _around(a: str, b: str, limit: int = 60) -> tuple[str, str]:
    """`a` and `b` cut to `limit` characters each around where they first differ, with
    `_CONTEXT` characters before it (an `…` marks a cut end): two long texts that differ late
    show what changed, not their common start twice."""
    if len(a) <= limit and len(b) <= limit:
        return a, b
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    start = max(0, first - _CONTEXT)
    return _window(a, start, limit), _window(b, start, limit)


_CONTEXT = 20
"""How much of what two texts share a cut shows before their first difference."""


def _window(text: str, start: int, limit: int) -> str:
    head = "…" if start > 0 else ""
    room = limit - len(head)
    return head + (text[start:start + room] if len(text) - start <= room else text[start:start + room - 1] + "…")


@dataclass(frozen=True, slots=True)
class CaseChange:
    """One case, before (the baseline) and after; `regressions` say why it got worse."""

    name: str
    before: CaseResult | None
    after: CaseResult | None
    divergence: Divergence | None = None
    regressions: tuple[str, ...] = ()

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    @property
    def changed(self) -> bool:
        """The case was added or removed, its score or end state changed, or its runs diverge."""
        if self.before is None or self.after is None:
            return True
        return (abs(self.before.score - self.after.score) > _EPSILON or self.before.reason != self.after.reason
                or self.divergence is not None or self.before.error != self.after.error)

    def __str__(self) -> str:
        if self.before is None:
            return f"{self.name}: new case, score {self.after.score:.2f}" if self.after else self.name
        if self.after is None:
            return f"{self.name}: not in this eval (score {self.before.score:.2f} before)"
        line = (f"{self.name}: score {self.before.score:.2f} → {self.after.score:.2f}, "
                f"ended in {self.before.reason} → {self.after.reason}")
        if self.divergence is not None:
            line += f"; diverges at {self.divergence}"
        return line + "".join(f"\n    REGRESSION: {why}" for why in self.regressions)


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every case of either eval, in the newer eval's order then the removed ones."""

    changes: tuple[CaseChange, ...]
    scores: tuple[float, float]

    @property
    def regressions(self) -> tuple[CaseChange, ...]:
        return tuple(change for change in self.changes if change.regressed)

    def __str__(self) -> str:
        changed = [change for change in self.changes if change.changed]
        lines = [f"against the baseline: score {self.scores[0]:.2f} → {self.scores[1]:.2f}; "
                 f"{len(changed)} of {len(self.changes)} cases changed, {len(self.regressions)} regressed"]
        lines += [f"  {change}" for change in changed]
        return "\n".join(lines)


def compare(results: EvalResults, baseline: EvalResults) -> Comparison:
    """Set `results` against `baseline` (see the module). Runs are read from the results'
    memory, or from their folder's run files.

    Raises:
        OSError, TraceFormatError: a run file named in the results cannot be read.
    """
    changes = []
    for after in results.cases:
        before = baseline.case(after.name)
        divergence = _divergence(_runs(baseline, before), _runs(results, after)) if before is not None else None
        changes.append(CaseChange(after.name, before, after, divergence, _regressions(before, after)))
    changes += [CaseChange(before.name, before, None) for before in baseline.cases if results.case(before.name) is None]
    return Comparison(tuple(changes), (baseline.score, results.score))


def _regressions(before: CaseResult | None, after: CaseResult) -> tuple[str, ...]:
    if before is None:
        return ()
    if after.error is not None and before.error is None:
        return (f"the case no longer runs: {after.error}",)
    found = []
    if after.score < before.score - _EPSILON:
        found.append(f"score fell from {before.score:.2f} to {after.score:.2f}")
    for name, held in before.assertions.items():
        if held and after.assertions.get(name) is False:
            found.append(f"{name} no longer holds: {after.reasons.get(name, '')}".rstrip(": "))
    if before.outcome == "success" and after.outcome != "success":
        found.append(f"ended in {after.reason}, not {before.reason}")
    return tuple(found)


def _runs(results: EvalResults, case: CaseResult | None) -> Sequence[Any]:
    """A case's turns as `diff` takes them: results in memory, else their files."""
    if case is None:
        return ()
    run = results.runs.get(case.name)
    if run is not None:
        return run.turns
    if results.folder is None:
        return ()
    return [results.folder / path for path in case.runs]


def _divergence(before: Sequence[Any], after: Sequence[Any]) -> Divergence | None:
    for turn, (a, b) in enumerate(zip(before, after, strict=False), 1):
        found = diff(a, b)
        if found.first is not None:
            there = [d for d in found.differences if d.transition == found.first]
            return Divergence(turn, found.first, tuple(sorted(there, key=_telling)))
    if len(before) != len(after) and before and after:
        turn = min(len(before), len(after)) + 1
        return Divergence(turn, 1, (Difference(1, "turns", str(len(before)), str(len(after))),))
    return None
