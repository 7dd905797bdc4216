"""Small loops for tests: tools that count their calls and scripted policies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from forge import AgentLoop, Intent, ScriptedPolicy, Tool


class Recorder:
    """A handler that records its calls and returns (or raises) what it is told."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        outcome = self.outcomes.pop(0) if self.outcomes else "done"
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def tool(name: str, caps: set[str] | None = None, handler: Callable[..., Any] | None = None,
         required: set[str] | None = None, **kwargs: Any) -> Tool:
    return Tool(name, caps or {name}, handler or Recorder(), required=required or set(), **kwargs)


def intent(*caps: str, **arguments: Any) -> Intent:
    return Intent(frozenset(caps), arguments)


def scripted_loop(tools: list[Tool], intents: list[Intent], verify: Callable[..., bool] = lambda o: False,
                  **options: Any) -> AgentLoop:
    return AgentLoop(tools, ScriptedPolicy(intents), verify, **options)


def forge(*arguments: str, cwd: Any = None, timeout: float = 120) -> Any:
    """`python -m forge ARGUMENTS`, as a user runs it: its CompletedProcess, output as text."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "forge", *arguments], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)
