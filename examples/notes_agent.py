"""The notes agent of docs/loops.md (its first example, byte for byte after this docstring):
what docs/time-travel.md forks."""

from forge import AgentLoop, Intent, tool

notes = {"todo.md": "buy milk", "done.md": ""}

@tool
def read_file(path: str) -> str:
    """Read a note."""
    return notes[path]

@tool(side_effect=True)
def write_file(path: str, text: str) -> int:
    """Write a note; a side effect, so an identical repeat is replayed, not redone."""
    notes[path] = text
    return len(text)

def policy(goal, state):
    if state.step_count == 0:
        return Intent.call("read_file", path="todo.md")
    return Intent.call("write_file", path="done.md", text=state.observations[-1].payload)

loop = AgentLoop(
    tools=[read_file, write_file],
    policy=policy,
    verify=lambda obs: obs.tool_name == "write_file" and notes["done.md"] == "buy milk",
    max_steps=4,
)
result = loop.run("copy todo.md to done.md")
print(result.reason, result.steps, len(result.trace))   # verified_success 2 8
print(read_file.schema["properties"]["path"]["type"])    # string
