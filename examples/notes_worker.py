"""The module a `forge worker` runs: it makes the durable loops the worker serves.

`forge worker --db DB --loops examples/notes_worker.py` imports it; every loop it makes with
`loop.durable(name=...)` is one the worker takes queued runs of (`forge submit GOAL --loop
notes --db DB`) and recovers after a crash. The runs' database is named where the worker is
started (`FORGE_DB`, here), so one module serves a SQLite file on a laptop and PostgreSQL in
production. The notes are written under `FORGE_NOTES` (default `notes/`).
"""

from __future__ import annotations

import os
from pathlib import Path

from forge import AgentLoop, Finish, Intent, LoopState, tool

NOTES = Path(os.environ.get("FORGE_NOTES", "notes"))


@tool(side_effect=True)
def write_note(name: str, text: str) -> int:
    """Write a note: a side effect, so the approval definition asks a person first."""
    NOTES.mkdir(parents=True, exist_ok=True)
    return (NOTES / f"{name}.md").write_text(text + "\n")


def note_taker(goal: str, state: LoopState) -> Intent | Finish:
    """Writes the goal after `note:` as a note named after its first word, then says so."""
    if not state.observations or state.observations[-1].status != "ok":
        text = goal.removeprefix("note:").strip()
        return Intent.call("write_note", name=text.split()[0].lower(), text=text)
    return Finish(f"noted in {state.observations[-1].payload} characters")


notes = AgentLoop(
    [write_note], note_taker, verify=lambda observation: observation.tool_name == "finish",
    definition="approval", approver=lambda request: None,  # nobody here: a person answers from forge ui or runs resume
).durable(name="notes", db=os.environ.get("FORGE_DB", "forge-runs.sqlite"))
