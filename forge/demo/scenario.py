"""The demo's default scenario as a `forge debug` scenario module.

`forge debug forge.demo.scenario` builds it in a fresh temporary workspace; `close()` stops
its analysis service and removes the workspace.
"""

import shutil

from forge.demo import prepare_workspace
from forge.demo.scenarios import build_scenario

_workspace = prepare_workspace(None)
_scenario = build_scenario("index", _workspace)
loop = _scenario.loop
goal = _scenario.goal


def close() -> None:
    """Stop the scenario's service, then remove its temporary workspace."""
    try:
        _scenario.close()
    finally:
        shutil.rmtree(_workspace, ignore_errors=True)
