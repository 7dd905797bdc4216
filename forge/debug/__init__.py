"""Step-through debugging of the loop, one transition at a time: live (`DebugSession`, from
`AgentLoop.debug`) or over a recorded trace (`ReplaySession`), and the `forge debug` /
`forge replay` REPL over either."""

from forge.debug.breakpoints import Breakpoint
from forge.debug.replay import ReplaySession
from forge.debug.session import DebugSession
from forge.debug.stepper import AtStart, ContinueResult, SessionFinished

__all__ = ["AtStart", "Breakpoint", "ContinueResult", "DebugSession", "ReplaySession", "SessionFinished"]
