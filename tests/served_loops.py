"""Loops `tests/test_serve.py` serves with `forge serve`: one that never finishes, one that asks
its user a question, one with a typed answer, one whose side effect waits for a person's approval
(alone and as a child run)."""

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

asking = AgentLoop([look], lambda goal, state: Ask("which file?") if goal == "help" else Finish(f"looked at {goal}"),
                   finished)


@tool(side_effect=True)
def remove(path: str) -> str:
    """Remove a file."""
    return f"{path} removed"


def removing(goal, state):
    if not state.observations:
        return Intent.call("remove", path=goal)
    last = state.observations[-1]
    return Finish(f"{last.status}: {last.payload}")


careful = AgentLoop([remove], removing, finished, definition="approval", approver=lambda request: None)
"""Removes the file its goal names, once a person approves (its approver leaves it to one)."""

delegating = AgentLoop([careful.as_tool("clean")],
                       lambda goal, state: Intent.call("clean", goal=goal) if not state.observations
                       else Finish(str(state.observations[-1].payload)), finished)
"""Has `careful` remove the file, as a child run: its approval is asked of the client too."""


class Count(BaseModel):
    count: int
    unit: str


typed = AgentLoop([look], lambda goal, state: Finish({"count": 3, "unit": "notes"}), finished, output=Count)


@tool
def touch(path: str) -> str:
    """Add a line to a log file."""
    with open(path, "a") as log:
        log.write("touched\n")
    return "touched"


def touching_then_asking(goal, state):
    if not state.observations:
        return Intent.call("touch", path=goal)
    if goal.endswith(".log"):
        return Ask("anything else?")
    log = next(o for o in state.observations if o.tool_name == "touch")
    return Finish(f"touched once? {'yes' if log.payload == 'touched' else 'no'}")


touching = AgentLoop([touch], touching_then_asking, finished)
"""Touches the log its goal names, then asks a question: the retried call must not touch it again."""
