"""Evals: whether a change made the agent better, across a dataset of cases scored on the
trajectory (`pip install 'forge-fsm[evals]'`, on pydantic-evals).

A dataset is pydantic-evals' `Dataset` (YAML or JSON) whose cases' inputs are a goal or a
`Conversation` (scripted replies and approvals, or a model-played user), scored by forge's
trajectory scorers (`forge.evals.scorers`) and any pydantic-evals evaluator. `evaluate`
runs every case on a loop — replayed from its cassette, recorded, or live — and returns
`EvalResults`; `compare` sets them against a baseline and names regressions and the
transition where each case's runs diverge. `forge eval` is the command line of all this.
"""

from forge.evals.cases import Conversation, EvalRun, ModelUser, ToolCall
from forge.evals.compare import CaseChange, Comparison, compare
from forge.evals.dataset import EvalDataset, evaluate, load_dataset
from forge.evals.folder import write_results
from forge.evals.results import CaseResult, EvalResults, read_results
from forge.evals.runner import CaseFailed, EvalSettings, run_case
from forge.evals.scorers import (
    SCORERS,
    AnswerMatches,
    Budget,
    EndState,
    Judge,
    MaxRetries,
    NoSideEffectBeforeApproval,
    ToolCalls,
    Visits,
)
from forge.evals.tape import ModelTape, TapeMiss

__all__ = [
    "SCORERS", "AnswerMatches", "Budget", "CaseChange", "CaseFailed", "CaseResult", "Comparison", "Conversation",
    "EndState", "EvalDataset", "EvalResults", "EvalRun", "EvalSettings", "Judge", "MaxRetries", "ModelTape",
    "ModelUser", "NoSideEffectBeforeApproval", "TapeMiss", "ToolCall", "ToolCalls", "Visits", "compare", "evaluate",
    "load_dataset", "read_results", "run_case", "write_results",
]
