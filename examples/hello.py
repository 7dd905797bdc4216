"""A forge debug scenario: `loop` and `goal` at top level (and `close`, here a no-op)."""

from forge import AgentLoop, Intent, ScriptedPolicy, Tool

calls = []


def greet(name: str) -> str:
    calls.append(name)
    return f"hello {name}"


loop = AgentLoop(
    [Tool("greet", {"greet"}, greet, required={"name"}), Tool("shout", {"shout"}, str.upper, required={"self"})],
    ScriptedPolicy([Intent({"greet"}, {"name": "ada"}), Intent({"greet"}, {"name": "bob"})]),
    verify=lambda observation: observation.payload == "hello bob",
)
goal = "greet ada, then bob"


def close() -> None:
    calls.clear()
