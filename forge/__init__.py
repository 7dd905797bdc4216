"""forge: a single agent's tool-calling loop as an explicit finite-state machine.

The public face, grouped: build and run a loop; declare tools and policies; read results
and traces; load definitions.

Names are imported when first used (PEP 562), so `import forge` is cheap and a program
pays only for the parts it touches: `forge.read_trace` does not load the engine, and
nothing here loads `forge check`, the diagrams, the debugger or the demo.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from forge.moved import install

install()  # the old names of moved modules import still (forge.moved)

if TYPE_CHECKING:
    from forge.agent.actions import UnknownTool
    from forge.agent.execution import ArgumentContractError, SchemaViolation
    from forge.agent.idempotency import IdempotencyRegistry
    from forge.agent.observations import LoopState, Observation
    from forge.agent.retry import PermanentToolError, ToolError, TransientToolError
    from forge.errors import ForgeError, RunNotFound, ToolSignal, UsageError, WrongType
    from forge.guardrails import Fix, Guard, GuardTripped, Trip
    from forge.loop import AgentLoop
    from forge.machine.catalog import Stage
    from forge.machine.child import LoopCycle
    from forge.machine.diff import RunDiff, diff
    from forge.machine.engine import NoTransitionEnabled, RunFinished, TransitionCallbacks
    from forge.machine.fork import Patch, PatchRefused
    from forge.machine.loader import load_definition
    from forge.machine.stages import ApprovalRejected, ApprovalRequest
    from forge.machine.start import RunStart
    from forge.observe import LoopObserver, ToolAttempt
    from forge.observe.log import LoggingObserver
    from forge.options import Clocks, Hooks, Limits, Retry
    from forge.policy import (
        Ask,
        Finish,
        Handoff,
        Intent,
        ModelPolicy,
        Policy,
        RecordedPolicy,
        ScriptedPolicy,
        ScriptExhausted,
    )
    from forge.records.definition import DefinitionError, MachineDefinition
    from forge.records.effects import AsyncNotSupported
    from forge.records.journal import (
        ContractRefused,
        ForkOrigin,
        Journal,
        JournalCodec,
        JournalEncodeError,
        JournalEntry,
        JournalMiss,
    )
    from forge.records.outcome import StageOutcome
    from forge.records.trace import (
        GuardResult,
        TraceFormatError,
        TransitionRecord,
        read_journal,
        read_trace,
        write_trace,
    )
    from forge.records.usage import BudgetExhausted, Usage
    from forge.result import ChildRun, LoopResult
    from forge.tools import Tool, tool

_WHERE: dict[str, str] = {
    "IdempotencyRegistry": "forge.agent.idempotency",
    "LoopState": "forge.agent.observations",
    "Observation": "forge.agent.observations",
    "PermanentToolError": "forge.agent.retry",
    "ToolError": "forge.agent.retry",
    "TransientToolError": "forge.agent.retry",
    "LoopResult": "forge.result",
    "ChildRun": "forge.result",
    "LoopCycle": "forge.machine.child",
    "AgentLoop": "forge.loop",
    "RunStart": "forge.machine.start",
    "Limits": "forge.options",
    "Retry": "forge.options",
    "Clocks": "forge.options",
    "Hooks": "forge.options",
    "Stage": "forge.machine.catalog",
    "StageOutcome": "forge.records.outcome",
    "DefinitionError": "forge.records.definition",
    "MachineDefinition": "forge.records.definition",
    "AsyncNotSupported": "forge.records.effects",
    "NoTransitionEnabled": "forge.machine.engine",
    "RunFinished": "forge.machine.engine",
    "TransitionCallbacks": "forge.machine.engine",
    "load_definition": "forge.machine.loader",
    "ApprovalRejected": "forge.machine.stages",
    "ApprovalRequest": "forge.machine.stages",
    "LoopObserver": "forge.observe",
    "ToolAttempt": "forge.observe",
    "LoggingObserver": "forge.observe.log",
    "GuardResult": "forge.records.trace",
    "TraceFormatError": "forge.records.trace",
    "TransitionRecord": "forge.records.trace",
    "read_trace": "forge.records.trace",
    "write_trace": "forge.records.trace",
    "Finish": "forge.policy",
    "Guard": "forge.guardrails",
    "Fix": "forge.guardrails",
    "Trip": "forge.guardrails",
    "GuardTripped": "forge.guardrails",
    "Handoff": "forge.policy",
    "Ask": "forge.policy",
    "Usage": "forge.records.usage",
    "BudgetExhausted": "forge.records.usage",
    "Intent": "forge.policy",
    "Policy": "forge.policy",
    "ModelPolicy": "forge.policy",
    "RecordedPolicy": "forge.policy",
    "ScriptedPolicy": "forge.policy",
    "ScriptExhausted": "forge.policy",
    "UnknownTool": "forge.agent.actions",
    "ArgumentContractError": "forge.agent.execution",
    "SchemaViolation": "forge.agent.execution",
    "Tool": "forge.tools",
    "tool": "forge.tools",
    "ForgeError": "forge.errors",
    "UsageError": "forge.errors",
    "WrongType": "forge.errors",
    "RunNotFound": "forge.errors",
    "ToolSignal": "forge.errors",
    "Journal": "forge.records.journal",
    "JournalCodec": "forge.records.journal",
    "JournalEncodeError": "forge.records.journal",
    "JournalEntry": "forge.records.journal",
    "JournalMiss": "forge.records.journal",
    "ContractRefused": "forge.records.journal",
    "read_journal": "forge.records.trace",
    "ForkOrigin": "forge.records.journal",
    "Patch": "forge.machine.fork",
    "PatchRefused": "forge.machine.fork",
    "RunDiff": "forge.machine.diff",
    "diff": "forge.machine.diff",
}

__all__ = [
    # building and running a loop
    "AgentLoop",
    "RunStart",
    "Limits",
    "Retry",
    "Clocks",
    "Hooks",
    "IdempotencyRegistry",
    "AsyncNotSupported",
    # extending the machine: user stages, transitions callbacks, approvals
    "Stage",
    "StageOutcome",
    "TransitionCallbacks",
    "ApprovalRequest",
    "ApprovalRejected",
    # observing runs
    "LoopObserver",
    "ToolAttempt",
    "LoggingObserver",
    # tools and policies
    "Tool",
    "tool",
    "ArgumentContractError",
    "SchemaViolation",
    "UnknownTool",
    "Intent",
    "Finish",
    "Handoff",
    "Ask",
    # guardrails: checks of each call's arguments, each result and the answer
    "Guard",
    "Fix",
    "Trip",
    "GuardTripped",
    "Usage",
    "BudgetExhausted",
    "Policy",
    "ModelPolicy",
    "RecordedPolicy",
    "ScriptedPolicy",
    "ScriptExhausted",
    "ToolSignal",
    "TransientToolError",
    "PermanentToolError",
    "ToolError",
    # results and traces
    "LoopResult",
    "ChildRun",
    "LoopCycle",
    "LoopState",
    "Observation",
    "TransitionRecord",
    "GuardResult",
    "read_trace",
    "write_trace",
    "TraceFormatError",
    # the journal: every call to the world, and runs made again from it (AgentLoop.replay)
    "Journal",
    "JournalEntry",
    "JournalCodec",
    "JournalMiss",
    "ContractRefused",
    "JournalEncodeError",
    "read_journal",
    # time travel: forks (AgentLoop.fork) and how two runs differ
    "Patch",
    "PatchRefused",
    "ForkOrigin",
    "diff",
    "RunDiff",
    # errors: every one forge raises on purpose is a ForgeError
    "ForgeError",
    "UsageError",
    "WrongType",
    "RunNotFound",
    # definitions and the engine's errors
    "MachineDefinition",
    "DefinitionError",
    "load_definition",
    "NoTransitionEnabled",
    "RunFinished",
]


def _version() -> str:
    from importlib import metadata  # here: it is slow to import, and only --version asks

    try:
        return metadata.version("forge-fsm")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()["__version__"] = _version()
        return globals()["__version__"]
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'forge' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
