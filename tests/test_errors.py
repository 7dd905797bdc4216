"""Every refusal forge makes on purpose is a ForgeError; what tools raise is a ToolSignal."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from forge import ForgeError, PermanentToolError, ToolError, ToolSignal, TransientToolError

FORGE = Path(__file__).resolve().parent.parent / "forge"
BUILTIN_REFUSALS = {"ValueError", "TypeError", "LookupError", "KeyError", "FileNotFoundError",  # IndexError: sequences
                    "RuntimeError", "OSError", "Exception"}
ALLOWED = {
    ("__init__.py", "AttributeError"),  # the module __getattr__ protocol
    ("records/effects.py", "RuntimeError"),  # "this is a bug in forge": not a refusal
}


def _raised_builtins() -> list[str]:
    found = []
    for path in sorted(FORGE.rglob("*.py")):
        where = path.relative_to(FORGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name):
                name = node.exc.func.id
                if name in BUILTIN_REFUSALS and (where, name) not in ALLOWED:
                    found.append(f"{where}:{node.lineno}: raise {name}(...)")
    return found


def test_forge_raises_no_bare_builtin_error_on_purpose():
    assert _raised_builtins() == []


@pytest.mark.parametrize("signal", [TransientToolError, PermanentToolError, ToolError])
def test_what_a_tool_raises_is_a_tool_signal_not_a_refusal(signal):
    assert issubclass(signal, ToolSignal) and issubclass(signal, RuntimeError)
    assert not issubclass(signal, ForgeError)


def test_a_refusal_keeps_its_standard_base_for_callers_that_catch_it():
    from forge import AgentLoop, Tool, UsageError

    with pytest.raises(UsageError) as refused:
        AgentLoop([], policy=lambda g, s: None, verify=lambda o: True)
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, ForgeError)
    with pytest.raises(ValueError, match="tool name must be a non-empty string"):  # (a tool without capabilities
        Tool(" ", {"t"}, lambda: None)                                              # is allowed now: issue 24, 23)


def test_the_summary_of_a_run_a_tool_ended_names_the_tool_and_its_error():
    from forge import AgentLoop, Finish, Intent, tool

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        return {"oslo": "sunny"}[city]

    result = AgentLoop([lookup], lambda goal, state: Intent.call("lookup", city="bergen") if not state.observations
                       else Finish("x"), lambda o: False).run("go")
    assert result.summary == "fatal_error (failure) after 1 step: tool 'lookup' raised KeyError: 'bergen'"
