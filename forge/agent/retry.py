"""Stage 4, retry: bounded retry of transient errors only.

A forbidden operation tried three times wastes the budget and hides the real error, so the
failure's class decides: only `TransientToolError` is retried, everything else propagates at
once. Backoff, deadline and the server's `retry_after` hint are opt-in refinements that never
change which errors are retried or how many attempts are allowed.
"""

from __future__ import annotations

import math
import random as _random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from forge.errors import ToolSignal, UsageError

__all__ = [
    "PermanentToolError",
    "RetryResult",
    "ToolError",
    "TransientToolError",
    "check_count",
    "check_retry_options",
    "retry_delay",
    "run_with_retry",
]

T = TypeVar("T")


class TransientToolError(ToolSignal, RuntimeError):
    """A failure that may pass (timeout, 503). `retry_after` is the server's hint, in seconds."""

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        if retry_after is not None and retry_after < 0:
            raise UsageError(f"retry_after must be >= 0, got {retry_after}")
        self.retry_after = retry_after


class PermanentToolError(ToolSignal, RuntimeError):
    """A failure that retrying cannot fix (permission denied, invalid target)."""


class ToolError(ToolSignal, RuntimeError):
    """A failure to tell the policy about, not to retry: "no such file", "query too broad".

    The loop records it as a `retryable_error` observation carrying the message, and the
    policy replans; `run_with_retry` does not retry it (only `TransientToolError` is).
    """


@dataclass(frozen=True, slots=True)
class RetryResult(Generic[T]):
    """The operation's value and how many calls it took (1 = no retry)."""

    value: T
    attempts: int


def run_with_retry(
    operation: Callable[[], T],
    max_attempts: int = 3,
    *,
    base_delay: float = 0.0,
    max_delay: float = 30.0,
    deadline: float | None = None,
    on_retry: Callable[[int, TransientToolError, float], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    random: Callable[[], float] = _random.random,
) -> RetryResult[T]:
    """Call `operation` until it returns, retrying only `TransientToolError`.

    `max_attempts=3` allows at most three calls; when the third also raises
    `TransientToolError`, that error is re-raised. Between attempts it waits
    `random() * min(max_delay, base_delay * 2 ** (attempt - 1))` (exponential backoff with
    full jitter; with the default `base_delay=0` it does not wait), or the error's
    `retry_after` hint when that is longer, capped at `max_delay`. With a `deadline` (seconds
    from the first call), the elapsed time plus the planned wait is checked *before*
    sleeping: a wait that would cross the deadline is not taken and the error is re-raised.
    `on_retry(attempt, error, delay)` is called before each wait.

    Raises:
        ValueError: `max_attempts < 1`, a negative delay or a non-positive deadline; before
            any call.
        TransientToolError: the last one, once the attempts or the deadline are spent.
        PermanentToolError, and every other exception: at its first occurrence, unretried.
    """
    check_retry_options(max_attempts, base_delay, max_delay, deadline)
    started = clock()
    for attempt in range(1, max_attempts + 1):
        try:
            return RetryResult(operation(), attempt)
        except TransientToolError as error:
            delay = retry_delay(attempt, error, max_attempts=max_attempts, base_delay=base_delay,
                                max_delay=max_delay, deadline=deadline, elapsed=clock() - started, random=random)
            if delay is None:
                raise
            if on_retry is not None:
                on_retry(attempt, error, delay)
            if delay > 0:
                sleep(delay)
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


def check_retry_options(max_attempts: int, base_delay: float, max_delay: float, deadline: float | None) -> None:
    """Raise ValueError, naming the parameter, unless the options are usable: a whole number
    of attempts >= 1, finite delays >= 0, and no deadline or a finite one > 0."""
    check_count("max_attempts", max_attempts)
    if (not _is_number(base_delay) or not _is_number(max_delay) or not 0 <= base_delay < math.inf
            or not 0 <= max_delay < math.inf):
        raise UsageError(f"delays must be finite numbers >= 0, got base_delay={base_delay!r}, max_delay={max_delay!r}")
    if deadline is not None and (not _is_number(deadline) or not 0 < deadline < math.inf):
        raise UsageError(f"deadline must be None or a finite number of seconds > 0, got {deadline!r}")


def check_count(name: str, value: object) -> None:
    """Raise ValueError naming `name` unless `value` is a whole number >= 1 (not a bool,
    not 2.5, not "4", not inf or nan)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a whole number >= 1, got {value!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def retry_delay(
    attempt: int,
    error: TransientToolError,
    *,
    max_attempts: int,
    base_delay: float,
    max_delay: float,
    deadline: float | None,
    elapsed: float,
    random: Callable[[], float] = _random.random,
) -> float | None:
    """How long to wait before attempt `attempt + 1`, or None when `error` must be re-raised.

    The decision of `run_with_retry`, as a pure function, so that a caller that cannot
    block (the async loop) waits the same way: None once `attempt == max_attempts`, or
    when `elapsed` (seconds since the first call) plus the wait would cross `deadline`.
    """
    if attempt >= max_attempts:
        return None
    delay: float = random() * min(max_delay, base_delay * 2 ** (attempt - 1))
    if error.retry_after is not None:
        delay = max(delay, min(error.retry_after, max_delay))
    if deadline is not None and elapsed + delay > deadline:
        return None
    return delay
