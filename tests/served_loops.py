"""Loops `tests/test_serve.py` serves with `forge serve`: one that never finishes, one that asks
its user a question, one with a typed answer."""

from __future__ import annotations

from pydantic import BaseModel

from forge import AgentLoop, Ask, Finish, Intent, Limits, tool
from forge.policy import FINISH


@tool
def look(path: str) -> str:
    """Look at a file."""
    return f"{path}: nothing new"


def finished(observation) -> bool:
    return observation.tool_name == FINISH


endless = AgentLoop([look], lambda goal, state: Intent.call("look", path=f"f{len(state.observations)}"), finished,
                    max_steps=3, limits=Limits(repeat_limit=10))

asking = AgentLoop([look], lambda goal, state: Ask("which file?"), finished)


class Count(BaseModel):
    count: int
    unit: str


typed = AgentLoop([look], lambda goal, state: Finish({"count": 3, "unit": "notes"}), finished, output=Count)
