"""Side effects keyed across runs: `Intent.keyed` records in the runs' database.

A side-effecting call is run once per idempotency key. Keys the loop makes
(`TOOL:FINGERPRINT`) belong to one run: its journal already holds the call's outcome, so a
recovered run replays it, and the run's own registry (kept across its answers) answers a
repeat. An intent's own key is shared by every run, so its record lives in the table
`forge_idempotency`, beside DBOS's own: a run that makes the call again, anywhere, gets the
stored result.

Two runs may make the same keyed call at once. The key is claimed first (`forge_claims`,
whose unique key decides between them); the run holding the claim calls the tool, the other
waits for the stored value and gets it as a replay. A failed call releases its claim, so a
later run may try again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from forge.agent.idempotency import IdempotencyConflict, IdempotencyRegistry
from forge.durable.database import RunsDatabase
from forge.durable.serializer import from_row, row
from forge.records.wire import decode, encode

__all__ = ["StoredRegistry"]


class StoredRegistry(IdempotencyRegistry):
    """The idempotency registry of one durable run (`run_id`), over `table`; a value is
    stored in the wire form, with the loop's `codec` for what has none of its own.

    A fork (`forge.durable.forks`) names its `parent`: while the fork replays the parent's
    calls (`replaying()`), a key the parent stored is the fork's own call, answered from the
    journal as the parent's run had it; once the fork is live, the parent's key is another
    run's, whose stored result the fork gets (the effect is not done again)."""

    def __init__(self, table: RunsDatabase, run_id: str, parent: str | None = None, codec: Any = None) -> None:
        super().__init__()
        self.table, self.run_id, self.parent, self.codec = table, run_id, parent, codec
        self.replaying: Callable[[], bool] = lambda: False

    def execute_once(self, key: str, fingerprint: str, operation: Callable[[], Any]) -> tuple[Any, bool]:
        if key.endswith(f":{fingerprint}"):  # made by the loop: this run's journal keeps it
            return super().execute_once(key, fingerprint, operation)
        found = self.table.lookup(key)
        while found is None:
            owner, claimed = self.table.claim(key, fingerprint, self.run_id)
            if owner == self.run_id:
                break
            if claimed != fingerprint:
                raise IdempotencyConflict(key, claimed, fingerprint)
            found = self.table.await_value(key, owner)
        inherited = found is not None and found[2] == self.parent and self.replaying()
        if found is not None and found[2] != self.run_id and not inherited:  # another run's call: its result
            if found[0] != fingerprint:
                raise IdempotencyConflict(key, found[0], fingerprint)
            return decode(from_row(found[1]), self.codec), True
        try:  # this run's call: made now, or replayed from its journal after a crash
            value, replayed = super().execute_once(key, fingerprint, operation)
        except Exception:
            self.table.release(key, self.run_id)
            raise
        if not replayed:
            self.table.store(key, fingerprint, row(encode(value, self.codec)), self.run_id)
        return value, replayed
