"""forge: a single agent's tool-calling loop as an explicit finite-state machine.

The public face, grouped: build and run a loop; declare tools and policies; read results
and traces; load definitions.
"""

from forge.agent.idempotency import IdempotencyRegistry
from forge.agent.observations import LoopState, Observation
from forge.agent.retry import PermanentToolError, ToolError, TransientToolError
from forge.agent.runner import LoopResult
from forge.loop import AgentLoop
from forge.machine.catalog import Stage
from forge.machine.definition import DefinitionError, MachineDefinition
from forge.machine.effects import AsyncNotSupported
from forge.machine.engine import NoTransitionEnabled, RunFinished, TransitionCallbacks
from forge.machine.loader import load_definition
from forge.machine.stages import ApprovalRejected, ApprovalRequest
from forge.observe import LoopObserver, ToolAttempt
from forge.observe.log import LoggingObserver
from forge.machine.trace import GuardResult, TraceFormatError, TransitionRecord, read_trace, write_trace
from forge.policy import Finish, Intent, Policy, ScriptedPolicy, ScriptExhausted
from forge.agent.actions import UnknownTool
from forge.agent.execution import ArgumentContractError, SchemaViolation
from forge.tools import Tool, tool

__all__ = [
    # building and running a loop
    "AgentLoop",
    "IdempotencyRegistry",
    "AsyncNotSupported",
    # extending the machine: user stages, transitions callbacks, approvals
    "Stage",
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
    "Policy",
    "ScriptedPolicy",
    "ScriptExhausted",
    "TransientToolError",
    "PermanentToolError",
    "ToolError",
    # results and traces
    "LoopResult",
    "LoopState",
    "Observation",
    "TransitionRecord",
    "GuardResult",
    "read_trace",
    "write_trace",
    "TraceFormatError",
    # definitions and the engine's errors
    "MachineDefinition",
    "DefinitionError",
    "load_definition",
    "NoTransitionEnabled",
    "RunFinished",
]
