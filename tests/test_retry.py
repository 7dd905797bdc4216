import pytest

from forge.agent.retry import (
    PermanentToolError,
    RetryResult,
    TransientToolError,
    run_with_retry,
)


class Script:
    """An operation that raises the scripted errors in turn, then returns "done"."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


class FakeTime:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def test_success_on_first_call_takes_one_attempt():
    assert run_with_retry(Script()) == RetryResult("done", 1)


def test_transient_errors_are_retried_until_success():
    op = Script(TransientToolError("503"), TransientToolError("503"))
    assert run_with_retry(op, max_attempts=3) == RetryResult("done", 3)


def test_transient_exhausted_after_exactly_max_attempts_calls():
    last = TransientToolError("third")
    op = Script(TransientToolError("1"), TransientToolError("2"), last)
    with pytest.raises(TransientToolError) as caught:
        run_with_retry(op, max_attempts=3)
    assert op.calls == 3
    assert caught.value is last


def test_permanent_error_is_called_once():
    op = Script(PermanentToolError("denied"))
    with pytest.raises(PermanentToolError):
        run_with_retry(op, max_attempts=5)
    assert op.calls == 1


def test_other_exceptions_propagate_on_first_occurrence():
    op = Script(KeyError("x"))
    with pytest.raises(KeyError):
        run_with_retry(op)
    assert op.calls == 1


@pytest.mark.parametrize("attempts", [0, -1])
def test_max_attempts_below_one_is_rejected_before_any_call(attempts):
    op = Script()
    with pytest.raises(ValueError, match="max_attempts"):
        run_with_retry(op, max_attempts=attempts)
    assert op.calls == 0


def test_transient_and_permanent_errors_are_unrelated_runtime_errors():
    assert issubclass(TransientToolError, RuntimeError)
    assert issubclass(PermanentToolError, RuntimeError)
    assert not issubclass(TransientToolError, PermanentToolError)
    assert not issubclass(PermanentToolError, TransientToolError)


def test_default_options_never_sleep():
    clock = FakeTime()
    run_with_retry(Script(TransientToolError(), TransientToolError()), sleep=clock.sleep)
    assert clock.sleeps == []


def test_backoff_is_exponential_with_full_jitter_and_capped():
    clock = FakeTime()
    op = Script(*[TransientToolError() for _ in range(4)])
    run_with_retry(
        op, max_attempts=5, base_delay=1.0, max_delay=3.0,
        sleep=clock.sleep, clock=clock.clock, random=lambda: 0.5,
    )
    assert clock.sleeps == [0.5, 1.0, 1.5, 1.5]


def test_retry_after_hint_is_honoured_and_capped():
    clock = FakeTime()
    op = Script(TransientToolError(retry_after=2.0), TransientToolError(retry_after=99.0))
    run_with_retry(op, max_delay=10.0, sleep=clock.sleep, clock=clock.clock, random=lambda: 0.0)
    assert clock.sleeps == [2.0, 10.0]


def test_deadline_is_checked_before_sleeping():
    clock = FakeTime()
    op = Script(TransientToolError("1"), TransientToolError("2"))
    with pytest.raises(TransientToolError, match="2"):
        run_with_retry(
            op, max_attempts=5, base_delay=4.0, deadline=5.0,
            sleep=clock.sleep, clock=clock.clock, random=lambda: 1.0,
        )
    assert clock.sleeps == [4.0]
    assert op.calls == 2


def test_on_retry_sees_each_attempt_error_and_delay():
    seen = []
    first = TransientToolError("503", retry_after=0.0)
    run_with_retry(Script(first), on_retry=lambda n, e, d: seen.append((n, e, d)))
    assert seen == [(1, first, 0.0)]


def test_negative_retry_after_is_rejected():
    with pytest.raises(ValueError, match="retry_after"):
        TransientToolError("x", retry_after=-1)
