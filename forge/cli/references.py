"""What a command line names, read: a definition or a loop (`MODULE:LOOP`), user stages, a
fork's patch file, a stored durable run's records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from forge.errors import UsageError

if TYPE_CHECKING:
    from forge.records.trace import TransitionRecord

__all__ = ["loop_named", "machine_of", "patch_of", "stages_of", "stored_records"]


def machine_of(given: str | None, trace: Sequence[TransitionRecord] | None) -> str:
    """The definition to use: the one given, else the one the trace names, else the default."""
    return given or next((r.machine for r in trace or () if r.machine), "single_agent")


def loop_named(given: str | None, command: str = "forge diagram") -> Any:
    """The loop `MODULE:LOOP` or `PATH.py:LOOP` names (drawn with its children), or None when
    `given` names a definition (a built-in name or a file).

    Raises:
        UsageError: the reference cannot be imported, or names something that is no loop.
    """
    from pathlib import Path

    from forge.diagram.render import is_loop
    from forge.machine.catalog import import_reference

    if not given or ":" not in given or Path(given).exists():
        return None
    loop = import_reference(given, command, "examples/writer.py:writer")
    if not is_loop(loop):
        raise UsageError(f"{command} {given!r}: that is a {type(loop).__name__}, not an AgentLoop")
    return loop


def stages_of(references: Sequence[str]) -> dict[str, Any]:
    """The user stages `--stages MODULE:NAME` options name, by name."""
    from forge.machine.catalog import import_stages

    stages: dict[str, Any] = {}
    for reference in references:
        stages.update(import_stages(reference))
    return stages


def patch_of(path: str) -> Any:
    import json
    from pathlib import Path

    from forge.machine.fork import Patch

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise UsageError(f"{path} is not JSON: {error.msg} at line {error.lineno}") from None
    return Patch.from_json(data)


def stored_records(run_id: str, db: str, turn: int | None) -> tuple[list[TransitionRecord], str]:
    """A stored durable run's records: the whole run (default), or, for a run stored by an
    earlier forge (one trace per answer), one of its turns; and a line saying which."""
    from forge.durable.runs import StoredRuns

    with StoredRuns(db) as runs:
        stored = runs.get(run_id)
    if not stored.traces:
        raise UsageError(f"run {run_id!r} is {stored.status} and has published no transitions yet (it does when "
                         "it waits or ends)")
    if not stored.legacy:
        if turn not in (None, 1):
            raise UsageError(f"run {run_id!r} is one run, answers and all: --turn is for runs stored by an earlier "
                             "forge (one trace per answer)")
        return stored.records, f"{stored.status} · the whole run: {len(stored.records)} transitions"
    count = len(stored.traces)
    if turn is not None:
        if not 1 <= turn <= count:
            raise UsageError(f"run {run_id!r} has turns 1 to {count}, not {turn}")
        return list(stored.traces[turn - 1]), f"{stored.status} · turn {turn} of {count}"
    renumbered = stored.records
    turns = f"{count} turns" if count != 1 else "1 turn"
    return renumbered, f"{stored.status} · the whole run: {turns}, {len(renumbered)} transitions"
