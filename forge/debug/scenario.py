"""Where `forge debug` finds its scenarios: now `forge.scenario`, which `forge run` shares.

Kept so that `from forge.debug.scenario import load_scenario` goes on working.
"""

from forge.scenario import LoadedScenario, ScenarioError, load_scenario

__all__ = ["LoadedScenario", "ScenarioError", "load_scenario"]
