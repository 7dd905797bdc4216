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


def test_a_key_is_in_the_registry_only_once_its_operation_returned():
    registry = IdempotencyRegistry()
    seen_inside = []

    def operation():
        seen_inside.append(("k" in registry, len(registry)))
        return "v"

    assert "k" not in registry and len(registry) == 0
    registry.execute_once("k", "a", operation)
    assert seen_inside == [(False, 0)]
    assert "k" in registry and len(registry) == 1
    assert "other" not in registry and 42 not in registry


def test_an_operation_that_uses_its_own_key_again_is_refused_rather_than_deadlocking():
    from forge.agent.idempotency import IdempotencyReentry

    registry = IdempotencyRegistry()

    def operation():
        return registry.execute_once("k", "a", Counter())

    with pytest.raises(IdempotencyReentry) as refused:
        registry.execute_once("k", "a", operation)
    assert refused.value.key == "k" and "'k'" in str(refused.value)
    assert registry.execute_once("k", "a", Counter("later")) == ("later", False)


def test_an_async_operation_that_uses_its_own_key_again_is_refused_rather_than_deadlocking():
    import asyncio

    from forge.agent.idempotency import IdempotencyReentry

    registry = IdempotencyRegistry()

    async def operation():
        async def inner():
            return "never"

        return await registry.aexecute_once("k", "a", inner)

    with pytest.raises(IdempotencyReentry):
        asyncio.run(registry.aexecute_once("k", "a", operation))
    assert "k" not in registry


def test_concurrent_tasks_on_one_key_run_the_async_operation_once():
    import asyncio

    registry = IdempotencyRegistry()
    calls = []

    async def slow_write():
        calls.append(1)
        await asyncio.sleep(0.01)
        return "value"

    async def main():
        return await asyncio.gather(*(registry.aexecute_once("k", "a", slow_write) for _ in range(4)))

    results = asyncio.run(main())
    assert len(calls) == 1
    assert sorted(results) == [("value", False)] + [("value", True)] * 3


def test_a_waiter_that_succeeds_after_a_failed_holder_is_what_later_callers_get():
    registry = IdempotencyRegistry()
    holding, release = threading.Event(), threading.Event()
    calls = []

    def failing():
        holding.set()
        release.wait(5)
        raise RuntimeError("disk full")

    def succeeding():
        calls.append("waiter")
        return "written"

    def holder():
        with pytest.raises(RuntimeError):
            registry.execute_once("k", "a", failing)

    first = threading.Thread(target=holder)
    first.start()
    holding.wait(5)
    results = []
    second = threading.Thread(target=lambda: results.append(registry.execute_once("k", "a", succeeding)))
    second.start()
    for _ in range(200):  # until the waiter is counted on the key's slot
        if registry._slots["k"].users == 2:
            break
        time.sleep(0.005)
    assert registry._slots["k"].users == 2
    release.set()
    first.join()
    second.join()
    assert results == [("written", False)]
    assert registry.execute_once("k", "a", Counter("again")) == ("written", True)
    assert calls == ["waiter"]
