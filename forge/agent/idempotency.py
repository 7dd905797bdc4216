"""Stage 5, idempotency: a side effect runs once per key + request fingerprint.

Retries and repeated submissions must not write the same file twice. The key names the
operation slot, the fingerprint names the request: the same key with another fingerprint is
a different request reusing a slot, and is refused rather than guessed at.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["IdempotencyConflict", "IdempotencyRegistry"]


class IdempotencyConflict(ValueError):
    """`key` is already bound to another request fingerprint; nothing was run."""

    def __init__(self, key: str, stored: str, given: str) -> None:
        super().__init__(
            f"idempotency key {key!r} is bound to fingerprint {stored!r}, "
            f"not {given!r}: use a new key for a different request"
        )
        self.key, self.stored, self.given = key, stored, given


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    entry: tuple[str, Any] | None = None


class IdempotencyRegistry:
    """An in-memory, per-instance, thread-safe registry of completed side effects."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._slots: dict[str, _Slot] = {}

    def execute_once(
        self, key: str, fingerprint: str, operation: Callable[[], Any]
    ) -> tuple[Any, bool]:
        """Run `operation` the first time `key` is seen; replay its value afterwards.

        Returns `(value, False)` when `operation` ran now and `(value, True)` when the stored
        value was returned without calling it. An operation that raises stores nothing, so
        the key stays free for a retry. Concurrent calls with one key run the operation
        exactly once; the others wait and get the stored value.

        Raises:
            ValueError: `key` or `fingerprint` is empty; `operation` is not called.
            IdempotencyConflict: (a ValueError) `key` is stored with another fingerprint;
                `operation` is not called and the stored entry is untouched.
            Whatever `operation` raises.
        """
        slot = self._slot(key, fingerprint)
        with slot.lock:
            if slot.entry is not None:
                return self._replay(key, slot.entry, fingerprint), True
            value = operation()
            slot.entry = (fingerprint, value)
            return value, False

    async def aexecute_once(
        self, key: str, fingerprint: str, operation: Callable[[], Awaitable[Any]]
    ) -> tuple[Any, bool]:
        """`execute_once` for an async operation: the same contract, awaited.

        Waiting for a key that another call holds never blocks the event loop, and the key
        is shared with `execute_once` callers in other threads.
        """
        import asyncio  # here, not at import: only async callers pay for it

        slot = self._slot(key, fingerprint)
        while not slot.lock.acquire(blocking=False):
            await asyncio.sleep(0.001)
        try:
            if slot.entry is not None:
                return self._replay(key, slot.entry, fingerprint), True
            value = await operation()
            slot.entry = (fingerprint, value)
            return value, False
        finally:
            slot.lock.release()

    def _slot(self, key: str, fingerprint: str) -> _Slot:
        if not key:
            raise ValueError("idempotency key must not be empty")
        if not fingerprint:
            raise ValueError("request fingerprint must not be empty")
        with self._guard:
            return self._slots.setdefault(key, _Slot())

    @staticmethod
    def _replay(key: str, entry: tuple[str, Any], fingerprint: str) -> Any:
        stored, value = entry
        if stored != fingerprint:
            raise IdempotencyConflict(key, stored, fingerprint)
        return value

    def __contains__(self, key: object) -> bool:
        slot = self._slots.get(key) if isinstance(key, str) else None
        return slot is not None and slot.entry is not None

    def __len__(self) -> int:
        return sum(1 for slot in self._slots.values() if slot.entry is not None)
