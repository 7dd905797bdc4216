"""`forge worker`: a process that takes durable runs from forge's queue.

Every worker is a DBOS executor with its own id. DBOS hands each queued run to one worker
and, when a worker restarts, recovers that worker's unfinished runs; a worker that never
comes back is noticed here: each worker beats in `forge_workers`, and a live worker that
sees a peer silent for `dead_after` seconds asks DBOS to recover the peer's runs (DBOS's
recovery is idempotent: when two live workers both try, one gets each run).

A worker stopped politely (SIGTERM, Ctrl-C, `stop`) strands nothing: it takes no new call,
lets each run in a call finish it (up to `grace` seconds), leaves every run pending at its
next call or wait, and hands them back: its beat becomes the epoch, so a live worker, or the
next one to start, recovers them at once.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from dbos import DBOS

from forge.durable.database import DatabaseAway
from forge.durable.host import executor_name, launch, shutdown
from forge.durable.workflow import HOST, LOOPS

__all__ = ["work"]

_log = logging.getLogger("forge.durable")


def work(db: str | os.PathLike[str] | None, concurrency: int = 4, *, executor_id: str | None = None,
         beat_every: float = 0.5, dead_after: float = 2.0, stop: threading.Event | None = None,
         grace: float = 30.0, started: Callable[[], object] | None = None) -> list[str]:
    """Take runs from the queue until `stop` is set or the process gets SIGTERM/SIGINT,
    then hand back the runs left here (see the module) and return their ids. The durable
    loops the runs name must exist in this process (made before calling). `started` is
    called once the worker takes runs and a signal stops it politely. It beats every
    `beat_every` seconds and recovers the runs of a peer silent for `dead_after` (the
    defaults recover a killed worker's runs within about two and a half seconds).

    Raises:
        UsageError: no durable loop exists in this process, DBOS runs on another database,
            or `dead_after` is not more than `beat_every`.
        DatabaseAway: the runs' database did not answer for `OUTAGE_LIMIT` seconds (a
            shorter outage is ridden out): the worker stopped without handing its runs back.
    """
    _check_worker(concurrency, grace, beat_every, dead_after)
    me = executor_id or executor_name()
    launch(db, executor_id=me, concurrency=concurrency, worker=True)
    database = HOST.database
    assert database is not None, "launch() opened it"
    database.beat(me)
    database.serve(me, sorted(LOOPS))
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
    _log.info("worker %s taking runs of %s from %s", me, ", ".join(sorted(LOOPS)), HOST.url)
    if started is not None:
        started()
    away: DatabaseAway | None = None
    try:
        _beat_until(stop, database, me, beat_every, dead_after)
    except DatabaseAway as error:
        away = error
        _log.error("worker %s: %s; it stops, and its runs go to the other workers once it has been silent "
                   "for %g s", me, error, dead_after)
    finally:
        _log.info("worker %s stopping: it takes no more runs", me)
        left = shutdown(grace if away is None else 0.0)
        if away is None:  # the database is away: the peers find this worker silent instead
            database.hand_back(me)  # even with none listed: a run dequeued as DBOS stopped is found by its executor
            for run_id in left:
                _log.info("worker %s: handed back run %s", me, run_id)
    if away is not None:
        raise away
    _log.info("worker %s stopped; handed back %d runs", me, len(left))
    return left


def _check_worker(concurrency: int, grace: float, beat_every: float, dead_after: float) -> None:
    """Refuse a worker with no loops to serve, or limits that cannot work together.

    Raises:
        UsageError: naming what is wrong."""
    from forge.errors import UsageError

    if not LOOPS:
        raise UsageError("a worker needs the durable loops its runs name: attach them (loop.durable(NAME)) first")
    if concurrency < 1:
        raise UsageError(f"concurrency must be at least 1, got {concurrency}")
    if grace < 0:
        raise UsageError(f"grace must be at least 0 seconds, got {grace}")
    if not 0 < beat_every < dead_after:
        raise UsageError(f"dead_after ({dead_after} s) must be more than beat_every ({beat_every} s), itself above 0")


def _beat_until(stop: threading.Event, database: Any, me: str, beat_every: float, dead_after: float) -> None:
    """Beat every `beat_every` seconds until `stop`, taking on the runs of each peer silent
    for `dead_after`.

    Raises:
        DatabaseAway: the database did not answer for `OUTAGE_LIMIT` seconds."""
    while not stop.is_set():
        database.beat(me)
        for silent in database.silent_workers(dead_after, besides=me):
            recovered = _recover(silent)
            database.forget_worker(silent)
            _log.warning("worker %s: recovered %d runs of silent worker %s", me, len(recovered or ()), silent)
        stop.wait(beat_every)


CHECKED_DBOS = "3."
"""The DBOS versions `_recover` was checked against (`tests/test_durable.py` pins it)."""


def _recover(executor: str) -> Any:
    """Hand the runs of the silent worker `executor` to this one.

    The one private DBOS call forge makes: open-source DBOS leaves failover of a dead
    executor to Conductor, its control plane, and `_recover_pending_workflows` is what that
    calls (idempotent). Checked against DBOS `CHECKED_DBOS`*, pinned `<4` in the extra."""
    _log.warning("worker %s is silent; recovering its runs", executor)
    return DBOS._recover_pending_workflows([executor])
