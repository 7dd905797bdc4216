"""Durable forks: a new durable run made from a stored one, in the same database.

A durable run's history is its journal in `forge_journal` (`forge.durable.performer`). To
fork run P at transition K, the calls P made before K (and the patched call at K, see
`forge.machine.fork`) are stored as the first rows of the new run's journal, under the new
run's id; then the new run starts as any durable run does, with `forked_from` among its
inputs. It replays those rows, calling nothing, and goes on live where they
end, storing each call as it settles: killed at any point, it is recovered like any other
durable run. The parent's rows are only read.

DBOS's own `fork_workflow` copies a workflow's recorded step outputs into a new workflow
and reruns it with the same inputs. It does not fit here: a forge run's calls to the
world are not DBOS steps (they live in forge's journal, which DBOS does not copy), DBOS
cannot change a recorded outcome, and a fork's new inputs (where it came from, the patch)
must reach the run. So a fork is forge's own rows plus an ordinary `forge_run` workflow.

A person's answers are calls of the journal like any other (`forge.machine.asking`), so a
fork may start at any transition, after answers too, and a `Patch.answered(...)` may replace
one. Runs stored before answers were calls of the run (one trace per answer) are forked
from their first trace only: what came after an answer there is not in the journal.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from forge.durable.database import RunsDatabase
from forge.durable.performer import StoredCalls
from forge.durable.serializer import row
from forge.errors import UsageError
from forge.machine.fork import ForkPlan, ForkSource, Patch, PatchRefused, fork_plan
from forge.records.journal import ForkOrigin, journal_lines

__all__ = ["ForkRequest", "fork_input", "origin_of", "seed_fork"]


@dataclass(frozen=True)
class ForkRequest:
    """A fork asked of a stored run: run `parent` at transition `at`, `patch` (None:
    none) replacing the outcome there, made into the new run `run_id`."""

    parent: str
    at: int
    patch: Patch | None
    run_id: str


def seed_fork(database: RunsDatabase, fork: ForkRequest, traces: Sequence[Sequence[Any]],
              tools: Mapping[str, Any] | Collection[str], codec: Any = None) -> ForkPlan:
    """Store the journal rows run `fork.run_id` starts from as a fork of run `fork.parent`
    at transition `fork.at` (`traces`: the parent's, as published) and return the plan.

    `codec` is the loop's (a value it wrote is copied as stored without it).
    Storing the same fork again (its process stopped before the run started) stores
    nothing more.

    Raises:
        UsageError: the parent stored no calls; `fork.run_id` has other journal rows already.
        PatchRefused: as `fork_plan`; also when `at` lies past the first trace of a run
            stored in the earlier form (one trace per answer).
    """
    parent, at, run_id = fork.parent, fork.at, fork.run_id
    stored = StoredCalls(database, parent, codec=codec)
    if not stored.calls:
        raise UsageError(f"run {parent!r} has stored no calls to the world yet: there is nothing to fork")
    first = len(traces[0]) if traces else max(entry.transition for entry in stored.calls)
    if traces and len(traces) > 1 and at > first:
        raise PatchRefused(f"cannot fork run {parent!r} at transition {at}: it was stored by an earlier forge, one "
                           f"trace per answer, so it is forked from its first (transitions 1 to {first}); its later "
                           "ones follow answers its journal does not hold")
    plan = fork_plan(ForkSource(stored.calls, first, parent), at, fork.patch, tools)
    rows = [row(line) for line in journal_lines((replace(entry, run_id=run_id) for entry in plan.replayed), codec,
                                                identity=True)]
    stored_already = database.journal_of(run_id)
    if stored_already == rows:  # the same fork, stored before its process stopped
        return plan
    if stored_already:
        raise UsageError(f"run {run_id!r} exists already; fork into a new run id")
    if rows:
        database.append(run_id, 0, rows)
    return plan


def fork_input(plan: ForkPlan) -> dict[str, Any]:
    """What the forked workflow is started with (`forge_run(..., forked_from=...)`)."""
    return {**plan.origin.to_json(), "patched": plan.patched, "seeded": len(plan.replayed)}


def origin_of(workflow_input: Any) -> ForkOrigin | None:
    """Where the run whose workflow was started with `workflow_input` (DBOS's stored
    `{"args": [...], "kwargs": {...}}`) was forked from; None when it is not a fork."""
    if not isinstance(workflow_input, dict):
        return None
    arguments = list(workflow_input.get("args") or ())
    given = arguments[2] if len(arguments) > 2 else (workflow_input.get("kwargs") or {}).get("forked_from")
    return ForkOrigin.from_json(given) if isinstance(given, dict) else None
