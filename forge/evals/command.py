"""`forge eval DATASET --loop MODULE:LOOP`: run a dataset, print the report, gate CI.

Prints pydantic-evals' report (a row per case: scores, assertions, duration), then each
case that did not pass with what failed and why, then — with `--against` — what changed
against the baseline and where each changed case's runs diverge. Exits 1 when a gate fails
(`--min-score`, `--no-regressions`), 0 otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge.errors import UsageError
from forge.evals.compare import Comparison, compare
from forge.evals.dataset import evaluate, load_dataset
from forge.evals.folder import write_results
from forge.evals.results import EvalResults, read_results
from forge.machine.catalog import import_reference

__all__ = ["EvalCommand", "default_cassettes"]


def default_cassettes(dataset: Path) -> Path:
    """Where a dataset's cassettes are unless told: `cassettes/STEM/` beside the file."""
    return dataset.parent / "cassettes" / dataset.stem


@dataclass(frozen=True, slots=True)
class EvalCommand:
    """What `forge eval` was asked (its options, by name)."""

    dataset: str
    loop: str
    cassettes: str | None = None
    record: bool = False
    offline: bool = False
    max_concurrency: int = 4
    out: str | None = None
    against: str | None = None
    min_score: float | None = None
    no_regressions: bool = False
    scorers: Sequence[str] = ()

    def __call__(self, say: Callable[[str], None] = print) -> int:
        """Run it (see the module); the exit status.

        Raises:
            ValueError: a bad dataset, loop reference, baseline or option.
        """
        if self.no_regressions and self.against is None:
            raise UsageError("--no-regressions compares with a baseline: give --against BASELINE (a results.json)")
        if self.min_score is not None and not 0.0 <= self.min_score <= 1.0:
            raise UsageError(f"--min-score is a score from 0 to 1, got {self.min_score}")
        baseline = read_results(self.against) if self.against is not None else None
        dataset_path = Path(self.dataset)
        dataset = load_dataset(dataset_path, [_scorer(reference) for reference in self.scorers])
        loop = import_reference(self.loop, "--loop", "examples/evals/workspace_agent.py:make_loop")
        cassettes = Path(self.cassettes) if self.cassettes is not None else default_cassettes(dataset_path)
        results = evaluate(dataset, loop, cassettes=cassettes, record=self.record, offline=self.offline,
                           max_concurrency=self.max_concurrency)
        comparison = compare(results, baseline) if baseline is not None else None
        if self.out is not None:
            results = write_results(results, self.out, comparison)
        say(results.report.render(width=120, include_errors=False).rstrip())  # failures: once, in _failures
        say(_failures(results))
        if comparison is not None:
            say(str(comparison))
        if self.record:
            say(f"recorded {len(results.cases)} cases' cassettes into {cassettes}")
        if self.out is not None:
            say(f"wrote {Path(self.out) / 'results.json'} and {Path(self.out) / 'report.html'}")
        return self._gates(results, comparison, say)

    def _gates(self, results: EvalResults, comparison: Comparison | None, say: Callable[[str], None]) -> int:
        failed = []
        if self.min_score is not None and results.score < self.min_score:
            failed.append(f"score {results.score:.2f} is below --min-score {self.min_score:.2f}")
        if self.no_regressions and comparison is not None and comparison.regressions:
            names = ", ".join(change.name for change in comparison.regressions)
            failed.append(f"{len(comparison.regressions)} case{'s' if len(comparison.regressions) != 1 else ''} "
                          f"regressed: {names}")
        for why in failed:
            say(f"FAILED: {why}")
        return 1 if failed else 0


def _failures(results: EvalResults) -> str:
    passed = sum(1 for case in results.cases if case.passed)
    lines = [f"{results.name}: score {results.score:.2f}; {passed} of {len(results.cases)} cases passed"]
    for case in results.cases:
        if case.error is not None:
            lines.append(f"  {case.name}: could not run: {case.error}")
            continue
        for name, held in case.assertions.items():
            if not held:
                lines.append(f"  {case.name}: {name} failed: {case.reasons.get(name, '')}")
        for name, value in case.scores.items():
            if value < 1.0:
                lines.append(f"  {case.name}: {name} {value:.2f}: {case.reasons.get(name, '')}")
    return "\n".join(lines)


def _scorer(reference: str) -> Any:
    from pydantic_evals.evaluators import Evaluator

    found = import_reference(reference, "--scorers", "myagent.evals:Politeness")
    if not (isinstance(found, type) and issubclass(found, Evaluator)):
        raise UsageError(f"--scorers {reference!r} names a {type(found).__name__}, not a pydantic-evals Evaluator class")
    return found
