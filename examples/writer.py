"""A writer loop that calls a researcher loop as a tool (`AgentLoop.as_tool`).

The researcher looks a topic up and keeps a note of it: keeping a note is a side effect, so
the researcher runs on the approval definition and its approver decides each note. To the
writer, `research` is one more tool; each call of it is a child run of the writer's run,
drawn inside the writer's diagram (`forge diagram examples/writer.py:writer`).

Run it: `python examples/writer.py` prints the article, the child runs and where the
diagram went.
"""

from __future__ import annotations

import sys
from typing import Any

from forge import AgentLoop, Finish, Intent, tool
from forge.policy import FINISH

LIBRARY = {
    "otters": "Sea otters hold hands while they sleep so they do not drift apart.",
    "seals": "Seals sleep underwater for minutes at a time, rising to breathe without waking.",
}
NOTES: list[str] = []


@tool
def look_up(topic: str) -> str:
    """Read what the library has on a topic."""
    return LIBRARY.get(topic, "the library has nothing on that")


@tool(side_effect=True)
def keep_note(topic: str, text: str) -> str:
    """Keep a note in the research log."""
    NOTES.append(f"{topic}: {text}")
    return f"note {len(NOTES)} kept"


def researching(goal: str, state: Any) -> Intent | Finish:
    """Look the topic up, keep a note of it, answer with what was found."""
    seen = state.observations
    if not seen:
        return Intent.call("look_up", topic=goal)
    if len(seen) == 1:
        return Intent.call("keep_note", topic=goal, text=str(seen[0].payload))
    return Finish(str(seen[0].payload))


def approve_notes(request: Any) -> bool:
    """Notes are approved when they quote the library; anything else is refused."""
    return request.tool == "keep_note" and request.arguments["text"] in LIBRARY.values()


def finished(observation: Any) -> bool:
    return bool(observation.tool_name == FINISH)


researcher = AgentLoop([look_up, keep_note], researching, finished, definition="approval", approver=approve_notes)


def writing(goal: str, state: Any) -> Intent | Finish:
    """Ask the researcher about each animal, then write the article from the answers."""
    topics = ["otters", "seals"]
    seen = state.observations
    if len(seen) < len(topics):
        return Intent.call("research", goal=topics[len(seen)])
    return Finish(" ".join(str(observation.payload) for observation in seen))


writer = AgentLoop([researcher.as_tool("research", "ask the researcher about one topic")], writing, finished)


if __name__ == "__main__":
    from forge.diagram import render

    result = writer.run("a short article on how marine mammals sleep", run_id="article")
    print(result.summary)
    print("article:", result.answer)
    for child in result.children:
        print(f"child run {child.path} (transition {child.transition}): {child.result.summary}")
    print("notes kept:", len(NOTES))
    out = sys.argv[1] if len(sys.argv) > 1 else "writer.svg"
    print("diagram:", render(writer, out, trace=result))
