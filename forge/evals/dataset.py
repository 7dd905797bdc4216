"""A dataset of cases, run on a loop and scored: pydantic-evals' `Dataset` with forge's
case inputs (`forge.evals.cases`), runner (`forge.evals.runner`) and scorers
(`forge.evals.scorers`).

    from forge.evals import evaluate, load_dataset

    results = evaluate(load_dataset("examples/evals/workspace.yaml"), make_loop,
                       cassettes="examples/evals/cassettes")
    print(results.report.render(include_reasons=True))

The dataset's task is the runner: every case is run (concurrently, at most
`max_concurrency` at a time, each in a worker thread), its evaluators score the `EvalRun`,
and the results keep, per case, the scores, the end state and the runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import yaml
from pydantic_evals import Dataset
from pydantic_evals.evaluators import Evaluator
from pydantic_evals.lifecycle import CaseLifecycle

from forge.errors import UsageError
from forge.evals.cases import Conversation, EvalRun, conversation_of
from forge.evals.results import CaseResult, EvalResults, case_score, plain
from forge.evals.runner import TAPE, EvalSettings, LoopSource, case_folder, run_case
from forge.evals.scorers import SCORERS

__all__ = ["EvalDataset", "evaluate", "load_dataset"]

EvalDataset = Dataset[str | Conversation, Any, Any]
"""A dataset of forge cases: inputs a goal or a `Conversation`, any expected output."""


def load_dataset(path: str | Path, scorers: Iterable[type[Evaluator[Any, Any, Any]]] = ()) -> Dataset[Any, Any, Any]:
    """The dataset in the YAML or JSON file at `path`; its evaluators may be forge's
    (`SCORERS`), pydantic-evals' own, or `scorers` of yours.

    Raises:
        ValueError: (a UsageError) the file is not valid YAML or JSON, or does not hold a
            dataset (the message says where).
        OSError: it cannot be read.
    """
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"no dataset file at {file}")
    try:
        return EvalDataset.from_file(file, custom_evaluator_types=[*SCORERS, *scorers])
    except yaml.YAMLError as error:  # not YAML at all (a NUL byte, an unclosed bracket): said in one line
        raise UsageError(f"{file} is not valid YAML: {' '.join(str(error).split())}") from None
    except ValueError as error:
        raise UsageError(f"{file} is not a forge eval dataset: {error}") from None
    except ExceptionGroup as errors:  # pydantic-evals gathers what it could not load of the evaluators
        raise UsageError(f"{file} is not a forge eval dataset: "
                         + "; ".join(str(error).split(". ", 1)[0] for error in errors.exceptions)) from None


def evaluate(dataset: Dataset[Any, Any, Any], loop: LoopSource, *, cassettes: str | Path | None = None,
             record: bool = False, offline: bool = False, client: Any = None, max_concurrency: int = 4,
             name: str | None = None) -> EvalResults:
    """Run every case of `dataset` on `loop` and score it (see the module and
    `forge.evals.runner` for how `cassettes`, `record` and `offline` choose between replay
    and live; `client` is the `openai.OpenAI` a model-played user and a judge talk through).

    Raises:
        ValueError: `record` and `offline` together, `record` without `cassettes`, or
            `max_concurrency` below 1. A case that cannot run is a result with its error,
            not an exception.
    """
    if max_concurrency < 1:
        raise UsageError(f"max_concurrency must be at least 1, got {max_concurrency}")
    settings = EvalSettings(Path(cassettes) if cassettes is not None else None, record, offline, client)
    _check_cases(dataset)
    runs: dict[str, EvalRun] = {}

    def task(inputs: Any) -> EvalRun:
        case = _CASE.get()
        run = run_case(loop, case, inputs, settings)
        runs[case] = run
        return run

    report = dataset.evaluate_sync(task, name=name or dataset.name, max_concurrency=max_concurrency, progress=False,
                                   lifecycle=_NamedCase)
    if settings.record and settings.cassettes is not None:
        for case, run in runs.items():
            run.models.tape.save(case_folder(settings.cassettes, case) / TAPE)
    return EvalResults(name or dataset.name or "eval", tuple(_results(dataset, report, runs)), report, runs)


_CASE: ContextVar[str] = ContextVar("forge_eval_case")
"""The case a task runs (pydantic-evals hands the task its inputs only; the context, copied
into the worker thread the task runs in, carries the name)."""


class _NamedCase(CaseLifecycle[Any, Any, Any]):
    async def setup(self) -> None:
        _CASE.set(str(self.case.name))


def _check_cases(dataset: Dataset[Any, Any, Any]) -> None:
    """Refuse, before anything runs, a case without a name (its cassette folder is named
    after it; pydantic-evals refuses two cases of one name) or inputs of the wrong shape."""
    for index, case in enumerate(dataset.cases, 1):
        if not case.name:
            raise UsageError(f"case {index} of dataset {dataset.name!r} has no name: forge names its cassettes "
                             "after it, so give every case a name")
        try:
            conversation_of(case.inputs)
        except (TypeError, ValueError) as error:
            raise UsageError(f"case {case.name!r}: {error}") from None


def _results(dataset: Dataset[Any, Any, Any], report: Any, runs: dict[str, EvalRun]) -> Iterable[CaseResult]:
    done = {case.name: case for case in report.cases}
    failed = {case.name: case for case in report.failures}
    for case in dataset.cases:
        name = str(case.name)
        goal = conversation_of(case.inputs).goal
        if name in failed:
            error = failed[name].error_message
            yield CaseResult(name, goal, case_score({}, {}, error), error=error)
            continue
        reported = done[name]
        scores = {key: float(result.value) for key, result in reported.scores.items()}
        assertions = {key: bool(result.value) for key, result in reported.assertions.items()}
        reasons = {key: result.reason or "" for key, result in [*reported.scores.items(), *reported.assertions.items()]}
        errors = [f"{failure.name}: {failure.error_message}" for failure in reported.evaluator_failures]
        error = "; ".join(errors) or None
        run = runs[name]
        yield CaseResult(name, goal, case_score(scores, assertions, error), scores, assertions, reasons,
                         run.reason, run.outcome, plain(run.answer), run.steps, run.tokens, round(run.seconds, 3),
                         run.modes, error=error)
