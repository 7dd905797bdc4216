"""User stages for tests: `check_budget`, named by tests/definitions/budgeted.toml."""

from __future__ import annotations

from forge import Stage


def budget(limit: int) -> Stage:
    """Stop once more than `limit` observations were recorded."""

    def check(run):
        spent = run.loop_state.step_count
        run.detail = {"spent": spent, "limit": limit}
        return "over" if spent > limit else "within"

    return Stage(check, {"within", "over"}, guards={"within_budget": "within", "over_budget": "over"},
                 stops_in={"over_budget": "budget_exceeded"})


STAGES = {"check_budget": budget(2)}
