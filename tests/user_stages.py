"""User stages for tests: `check_budget`, named by tests/definitions/budgeted.toml."""

from __future__ import annotations

from forge import Stage, StageOutcome


def budget(limit: int) -> Stage:
    """Stop once more than `limit` observations were recorded."""

    def check(run):
        spent = run.loop_state.step_count
        return StageOutcome("over" if spent > limit else "within", detail={"spent": spent, "limit": limit})

    return Stage(check, {"within", "over"}, guards={"within_budget": "within", "over_budget": "over"},
                 stops_in={"over_budget": "budget_exceeded"})


STAGES = {"check_budget": budget(2)}
