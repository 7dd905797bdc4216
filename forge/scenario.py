"""The scenario convention `forge debug` and `forge run` load.

A scenario is a Python file or module that defines, at top level:

- `loop`: the `AgentLoop` to debug or run;
- `goal`: the goal string to run it on;
- `close()` (optional): called when the debugger exits or the run ends, to stop what the
  scenario started.

`forge debug path/to/scenario.py`, `forge debug package.module`, or one of the demo's
scenario names (`index`, `ambiguous`, `forbidden`, `unreachable`, `gap`), each built in a
fresh temporary workspace. `forge.demo.scenario` is the demo's default scenario as a module.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from forge.errors import ForgeError, UsageError
from forge.loop import AgentLoop
from forge.user_code import import_file

__all__ = ["LoadedScenario", "ScenarioError", "import_target", "load_scenario"]


class ScenarioError(ForgeError, ValueError):
    """A scenario cannot be loaded or does not follow the convention."""


@dataclass(frozen=True, slots=True)
class LoadedScenario:
    name: str
    loop: AgentLoop
    goal: str
    close: Callable[[], None]


def _nothing() -> None:
    return None


def _from_module(name: str, module: ModuleType) -> LoadedScenario:
    loop = getattr(module, "loop", None)
    goal = getattr(module, "goal", None)
    if not isinstance(loop, AgentLoop) or not isinstance(goal, str):
        raise ScenarioError(
            f"scenario {name!r} must define `loop` (an AgentLoop) and `goal` (a string) at top level; "
            f"found loop={type(loop).__name__}, goal={type(goal).__name__}"
        )
    close = getattr(module, "close", _nothing)
    if not callable(close):
        raise ScenarioError(f"scenario {name!r}: `close` must be callable")
    return LoadedScenario(name, loop, goal, close)


def load_scenario(spec: str) -> LoadedScenario:
    """Load a scenario by demo name, file path or module name.

    Raises:
        ScenarioError: nothing by that name, an import failure, or a module that does not
            define `loop` and `goal`.
    """
    from forge.demo import prepare_workspace
    from forge.demo.scenarios import SCENARIOS, build_scenario

    if spec in SCENARIOS:
        workspace = prepare_workspace(None)
        built = build_scenario(spec, workspace)

        def close() -> None:  # the scenario's own close, then its temporary workspace goes
            try:
                built.close()
            finally:
                shutil.rmtree(workspace, ignore_errors=True)

        return LoadedScenario(spec, built.loop, built.goal, close)
    return _from_module(spec, import_target(spec))


def import_target(spec: str) -> ModuleType:
    """Import a Python file (`path/to/agents.py`) or a module (`agents.filing`): what
    scenarios and `forge worker --loops` name. A file's folder goes first on `sys.path`, as
    `python path/to/agents.py` puts it, so the file imports the modules beside it.

    Raises:
        ScenarioError: no such file or module, or it failed to import (the error named).
    """
    from forge.demo.scenarios import SCENARIOS

    path = Path(spec)
    if path.suffix == ".py" or path.is_file():
        try:
            return import_file(path, "scenario file")
        except UsageError as error:
            raise ScenarioError(str(error)) from error.__cause__
    if not spec or spec.startswith(".") or not all(part.isidentifier() for part in spec.split(".")):
        raise ScenarioError(f"no scenario {spec!r}: not a demo scenario ({', '.join(SCENARIOS)}), a .py file, "
                            "or a module name (dotted identifiers, not relative)")
    try:
        module = importlib.import_module(spec)
    except ModuleNotFoundError as error:
        if error.name is not None and spec.startswith(error.name):
            raise ScenarioError(
                f"no scenario {spec!r}: not a demo scenario ({', '.join(SCENARIOS)}), a .py file or an importable module"
            ) from error
        raise ScenarioError(f"scenario module {spec!r} failed to load: {type(error).__name__}: {error}") from error
    except Exception as error:
        raise ScenarioError(f"scenario module {spec!r} failed to load: {type(error).__name__}: {error}") from error
    return module
