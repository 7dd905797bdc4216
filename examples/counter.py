"""A forge debug scenario whose policy decides from the observations alone (so a fork can
go on live with it): count to three, then finish with the last count."""

from forge import AgentLoop, Finish, Intent, tool

calls: list[int] = []


@tool
def count(n: int) -> int:
    """Count to n."""
    calls.append(n)
    return n


def policy(goal, state):
    if state.step_count >= 3:
        return Finish(state.observations[-1].payload)
    return Intent.call("count", n=state.step_count + 1)


loop = AgentLoop([count], policy, verify=lambda observation: isinstance(observation.payload, Finish))
goal = "count to three"
