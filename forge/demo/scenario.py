"""The demo's default scenario as a `forge debug` scenario module.

`forge debug forge.demo.scenario` builds it in a fresh temporary workspace; `close()` stops
its analysis service.
"""

from forge.demo import prepare_workspace
from forge.demo.scenarios import build_scenario

_scenario = build_scenario("index", prepare_workspace(None))
loop = _scenario.loop
goal = _scenario.goal
close = _scenario.close
