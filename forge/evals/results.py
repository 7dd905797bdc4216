"""What an eval found, kept: per case its scores and assertions with their reasons, how
the conversation ended, and its runs; written as `results.json` (what `--against` compares
with) beside each run's trace file and inspector page.

The folder an eval writes (`forge eval ... --out DIR`, `forge.evals.folder.write_results`)::

    DIR/results.json              every case, its scores, end state and run files
    DIR/report.html               the static report (`forge.evals.report`)
    DIR/runs/CASE/turn-N.jsonl    each turn's trace with its journal (replayable, diffable)
    DIR/runs/CASE/turn-N.html     each turn's run in the inspector

A case's score is the mean of its scores and assertions (a passed assertion 1, a failed one
0); a case whose run failed scores 0. The eval's score is the mean of its cases'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from forge.errors import UsageError
from forge.evals.cases import EvalRun
from forge.machine.child import as_json

__all__ = ["CaseResult", "EvalResults", "RESULTS", "RESULTS_VERSION", "case_score", "plain", "read_results"]

RESULTS = "results.json"
RESULTS_VERSION = 1


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case's result (see the module). `runs` are its turns' trace files, relative to
    the folder the results were written to (empty until written); `error` is why the case
    could not run (then it has no scores)."""

    name: str
    goal: str
    score: float
    scores: Mapping[str, float] = field(default_factory=dict)
    assertions: Mapping[str, bool] = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)
    reason: str | None = None
    outcome: str | None = None
    answer: Any = None
    steps: int = 0
    tokens: int = 0
    seconds: float = 0.0
    modes: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    error: str | None = None

    @property
    def passed(self) -> bool:
        """No error, and every assertion held."""
        return self.error is None and all(self.assertions.values())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["answer"] = plain(self.answer)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseResult:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        for name in ("modes", "runs"):
            known[name] = tuple(known.get(name, ()))
        return cls(**known)


def plain(value: Any) -> Any:
    """`value` as JSON holds it: a typed answer as its fields, anything else JSON cannot
    hold as its text."""
    value = as_json(value)
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return repr(value)


def case_score(scores: Mapping[str, float], assertions: Mapping[str, bool], error: str | None) -> float:
    """The mean of `scores` and `assertions` (1 for a pass, 0 for a fail); 0 with an error,
    1 with nothing to score."""
    if error is not None:
        return 0.0
    values = [float(v) for v in scores.values()] + [1.0 if v else 0.0 for v in assertions.values()]
    return sum(values) / len(values) if values else 1.0


@dataclass(frozen=True)
class EvalResults:
    """Every case's result, in the dataset's order; `report` is pydantic-evals'
    `EvaluationReport` (None when read back from a file) and `runs` each case's `EvalRun`
    (empty when read back)."""

    name: str
    cases: tuple[CaseResult, ...]
    report: Any = field(default=None, compare=False, repr=False)
    runs: Mapping[str, EvalRun] = field(default_factory=dict, compare=False, repr=False)
    folder: Path | None = field(default=None, compare=False)
    """Where these results were written or read from: their run files are relative to it."""

    @property
    def score(self) -> float:
        """The mean of the cases' scores (1.0 for no case)."""
        return sum(case.score for case in self.cases) / len(self.cases) if self.cases else 1.0

    def case(self, name: str) -> CaseResult | None:
        return next((case for case in self.cases if case.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"version": RESULTS_VERSION, "name": self.name, "score": self.score,
                "cases": [case.to_json() for case in self.cases]}


def read_results(path: str | Path) -> EvalResults:
    """Results written by `EvalResults.write`: `path` is their `results.json` or its folder.

    Raises:
        ValueError: the file is not forge eval results (or of an unknown version).
        OSError: it cannot be read.
    """
    file = Path(path)
    if file.is_dir():
        file = file / RESULTS
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise UsageError(f"{file} is not forge eval results: not JSON ({error})") from None
    if not isinstance(data, dict) or data.get("version") != RESULTS_VERSION or not isinstance(data.get("cases"), list):
        raise UsageError(f"{file} is not forge eval results of version {RESULTS_VERSION} "
                         "(written by forge eval --out DIR, as DIR/results.json)")
    return EvalResults(str(data.get("name", "")), tuple(CaseResult.from_json(case) for case in data["cases"]),
                       folder=file.parent)
