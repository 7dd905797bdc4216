"""A loop with a person and a budget in it.

`examples/budgeted_approval.toml` is the shipped approval loop plus one state of our own,
`budget`, whose action is the user stage below. The approver answers for side-effecting
calls; a transitions callback prints each call that enters the approve state.

    python examples/approvals_and_budget.py
"""

from __future__ import annotations

from pathlib import Path

from forge import AgentLoop, ApprovalRequest, Hooks, Intent, LoopState, Stage, StageOutcome, Tool, TransitionCallbacks
from forge.machine.run import Run

COSTS = {"read_file": 1, "write_file": 5}


def check_budget(run: Run) -> StageOutcome:
    """Charge every call so far, refused ones too; past 12 units the run stops in budget_exceeded."""
    spent = sum(COSTS[o.tool_name] for o in run.loop_state.observations)
    return StageOutcome("over" if spent > 12 else "within", detail={"spent": spent})


STAGES = {
    "check_budget": Stage(check_budget, {"within", "over"},
                          guards={"within_budget": "within", "over_budget": "over"},
                          stops_in={"over_budget": "budget_exceeded"}),
}


def main() -> None:
    files = {"todo.md": "buy milk"}

    def read_file(path: str) -> str:
        return files[path]

    def write_file(path: str, text: str) -> int:
        files[path] = text
        return len(text)

    def policy(goal: str, state: LoopState) -> Intent:
        if not state.observations:
            return Intent({"read"}, {"path": "todo.md"})
        refused = state.observations[-1].status == "retryable_error"  # the approver said no
        return Intent({"write"}, {"path": "done.md" if refused else "secret.md", "text": state.observations[0].payload})

    def approver(request: ApprovalRequest) -> bool:
        answer = request.arguments["path"] != "secret.md"
        print(f"  approver: {request.tool}({request.arguments['path']}) -> {'yes' if answer else 'no'}")
        return answer

    loop = AgentLoop(
        tools=[Tool("read_file", {"read"}, read_file, required={"path"}),
               Tool("write_file", {"write"}, write_file, required={"path", "text"}, side_effect=True)],
        policy=policy,
        verify=lambda obs: obs.tool_name == "write_file" and files.get("done.md") == "buy milk",
        definition=Path(__file__).with_name("budgeted_approval.toml"),
        stages=STAGES,
        approver=approver,
        hooks=Hooks(callbacks=TransitionCallbacks.of(
            on_enter={"approve": lambda event: print(f"  approve? {event.model.action.tool_name}")})),
    )
    result = loop.run("copy todo.md to done.md")
    spent = [r.detail["spent"] for r in result.trace if r.source == "budget"]
    print(result.reason, result.steps, [o.status for o in result.state.observations], "spent", spent)


if __name__ == "__main__":
    main()
