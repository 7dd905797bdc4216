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

from forge.errors import ForgeError, UsageError

__all__ = ["IdempotencyConflict", "IdempotencyReentry", "IdempotencyRegistry"]


class IdempotencyConflict(ForgeError, ValueError):
    """`key` is already bound to another request fingerprint; nothing was run."""

    def __init__(self, key: str, stored: str, given: str) -> None:
        super().__init__(
            f"idempotency key {key!r} is bound to fingerprint {stored!r}, "
            f"not {given!r}: use a new key for a different request"
        )
        self.key, self.stored, self.given = key, stored, given


class IdempotencyReentry(ForgeError, RuntimeError):
    """`execute_once` was called for `key` from inside that key's own operation (a
    side-effecting handler that runs the same loop again with a shared registry). Waiting
    would deadlock, so it is refused."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"idempotency key {key!r} was used again from inside its own operation: a side-effecting "
            "handler re-entered the loop with the same registry and call; give the inner run its own "
            "registry or another call"
        )
        self.key = key


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    entry: tuple[str, Any] | None = None
    owner: object = None  # who holds `lock`: the thread (or, for async callers, the task)
    users: int = 0  # callers holding or waiting for this slot; guarded by the registry's lock


def _caller() -> object:
    """An async caller's identity: its task (tasks of one thread must not block each other)."""
    import asyncio

    return asyncio.current_task() or threading.get_ident()


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
        me = threading.get_ident()
        slot = self._slot(key, fingerprint, me)
        try:
            with slot.lock:
                slot.owner = me
                try:
                    if slot.entry is not None:
                        return self._replay(key, slot.entry, fingerprint), True
                    value = operation()
                    slot.entry = (fingerprint, value)
                    return value, False
                finally:
                    slot.owner = None
        finally:
            self._release(key, slot)

    async def aexecute_once(
        self, key: str, fingerprint: str, operation: Callable[[], Awaitable[Any]]
    ) -> tuple[Any, bool]:
        """`execute_once` for an async operation: the same contract, awaited.

        Waiting for a key that another call holds never blocks the event loop, and the key
        is shared with `execute_once` callers in other threads.
        """
        import asyncio  # here, not at import: only async callers pay for it

        me = _caller()
        slot = self._slot(key, fingerprint, me)
        try:
            while not slot.lock.acquire(blocking=False):
                await asyncio.sleep(0.001)
            slot.owner = me
            try:
                if slot.entry is not None:
                    return self._replay(key, slot.entry, fingerprint), True
                value = await operation()
                slot.entry = (fingerprint, value)
                return value, False
            finally:
                slot.owner = None
                slot.lock.release()
        finally:
            self._release(key, slot)

    def _slot(self, key: str, fingerprint: str, me: object) -> _Slot:
        """The key's slot, counted as used until `_release`.

        Raises:
            ValueError: an empty key or fingerprint.
            IdempotencyReentry: `me` (this thread, or this task) holds the key's slot already.
        """
        if not key:
            raise UsageError("idempotency key must not be empty")
        if not fingerprint:
            raise UsageError("request fingerprint must not be empty")
        with self._guard:
            slot = self._slots.setdefault(key, _Slot())
            if slot.owner is not None and slot.owner == me:
                raise IdempotencyReentry(key)
            slot.users += 1
            return slot

    def _release(self, key: str, slot: _Slot) -> None:
        """Forget a slot that holds no result once nobody uses it: failing keys cost nothing."""
        with self._guard:
            slot.users -= 1
            if slot.users == 0 and slot.entry is None and self._slots.get(key) is slot:
                del self._slots[key]

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
