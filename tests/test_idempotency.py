import threading
import time

import pytest

from forge.agent.idempotency import IdempotencyConflict, IdempotencyRegistry


class Counter:
    def __init__(self, value="written"):
        self.calls = 0
        self.value = value

    def __call__(self):
        self.calls += 1
        return self.value


def test_first_call_runs_the_operation():
    op = Counter()
    assert IdempotencyRegistry().execute_once("op-1", "hash-a", op) == ("written", False)
    assert op.calls == 1


def test_same_key_and_fingerprint_returns_cached_value_without_calling():
    registry, op = IdempotencyRegistry(), Counter()
    registry.execute_once("op-1", "hash-a", op)
    assert registry.execute_once("op-1", "hash-a", op) == ("written", True)
    assert op.calls == 1


def test_fingerprint_mismatch_is_rejected_and_entry_untouched():
    registry, first, second = IdempotencyRegistry(), Counter("first"), Counter("second")
    registry.execute_once("op-1", "hash-a", first)
    with pytest.raises(ValueError, match="fingerprint"):
        registry.execute_once("op-1", "hash-b", second)
    assert second.calls == 0
    assert registry.execute_once("op-1", "hash-a", first) == ("first", True)


def test_conflict_error_carries_both_fingerprints():
    registry = IdempotencyRegistry()
    registry.execute_once("k", "a", Counter())
    with pytest.raises(IdempotencyConflict) as caught:
        registry.execute_once("k", "b", Counter())
    assert (caught.value.key, caught.value.stored, caught.value.given) == ("k", "a", "b")


@pytest.mark.parametrize("key, fingerprint", [("", "hash"), ("key", "")])
def test_empty_key_or_fingerprint_is_rejected_without_calling(key, fingerprint):
    op = Counter()
    with pytest.raises(ValueError, match="empty"):
        IdempotencyRegistry().execute_once(key, fingerprint, op)
    assert op.calls == 0


def test_failed_operation_stores_nothing_and_the_key_stays_free():
    registry = IdempotencyRegistry()

    def failing():
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        registry.execute_once("k", "a", failing)
    assert "k" not in registry
    assert registry.execute_once("k", "a", Counter()) == ("written", False)


def test_registries_are_independent_per_instance():
    op = Counter()
    IdempotencyRegistry().execute_once("k", "a", op)
    IdempotencyRegistry().execute_once("k", "a", op)
    assert op.calls == 2


def test_sixteen_threads_on_one_key_run_the_operation_once():
    registry = IdempotencyRegistry()
    calls = []
    barrier = threading.Barrier(16)
    results = []

    def slow_write():
        calls.append(1)
        time.sleep(0.05)
        return "value"

    def worker():
        barrier.wait()
        results.append(registry.execute_once("k", "a", slow_write))

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert sorted(results) == [("value", False)] + [("value", True)] * 15
