"""One bounded loop through the stage modules: select, execute, observe, verify, stop."""

from forge.agent.actions import ToolSpec, select_action
from forge.agent.execution import ToolContract, execute_tool
from forge.agent.retry import TransientToolError, run_with_retry
from forge.agent.runner import run_agent

notes = {"a.md": "alpha beta", "b.md": "gamma"}
flaky = {"left": 1}


def count_words(path: str) -> int:
    if flaky["left"]:
        flaky["left"] -= 1
        raise TransientToolError("503 service unavailable")
    return len(notes[path].split())


tools = [ToolSpec("count_words", frozenset({"text", "count"})), ToolSpec("list", frozenset({"fs"}))]
contract = ToolContract("count_words", frozenset({"path"}), count_words)


def step(n: int) -> tuple[str, int]:
    action = select_action("count words of every note", {"text", "count"}, tools)
    path = sorted(notes)[n - 1]
    retried = run_with_retry(lambda: execute_tool(contract, {"path": path}))
    print(f"step {n}: {action.tool_name}({path}) -> {retried.value.value} after {retried.attempts} attempt(s)")
    return action.tool_name, (path, retried.value.value)


result = run_agent(step, verify=lambda out: out[0] == "b.md", max_steps=4)
print(f"stopped: {result.reason} after {result.steps} steps")
