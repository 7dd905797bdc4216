"""An eval's results written to a folder: `results.json`, the report, and every run (see
`forge.evals.results` for the layout)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from forge.evals.compare import Comparison
from forge.evals.report import write_report
from forge.evals.results import RESULTS, EvalResults
from forge.evals.runner import case_folder
from forge.files import write_atomically
from forge.inspect import write as write_page
from forge.records.trace import write_trace

__all__ = ["write_results"]


def write_results(results: EvalResults, folder: str | Path, against: Comparison | None = None) -> EvalResults:
    """Write `results`, their runs and the report into `folder` (parents made), `against`
    (a `Comparison` with a baseline) shown in the report; return the results with their
    run files named, relative to `folder`.

    Raises:
        OSError: the folder cannot be written.
    """
    root = Path(folder)
    cases = []
    for case in results.cases:
        run = results.runs.get(case.name)
        runs: list[str] = []
        if run is not None:
            where = case_folder(root / "runs", case.name)
            for number, turn in enumerate(run.turns, 1):
                trace = write_trace(turn.trace, where / f"turn-{number}.jsonl", journal=turn.journal)
                write_page(turn, where / f"turn-{number}.html", turn.definition, title=f"{case.name}, turn {number}")
                runs.append(trace.relative_to(root).as_posix())
        cases.append(replace(case, runs=tuple(runs)))
    written = EvalResults(results.name, tuple(cases), results.report, results.runs, root)
    write_atomically(root / RESULTS, [json.dumps(written.to_json(), indent=2, sort_keys=True) + "\n"])
    write_report(written, root / "report.html", against)
    return written
