"""The one DBOS of this process: `launch` it on the runs' database, `shutdown` it politely.

DBOS, the library durable runs are built on, is one per process: every durable loop of a
process shares its database and its queue. `launch` starts it (a worker also takes runs
from forge's queue), and `shutdown` stops it so that no run is stranded: each run under way
stops at its next call to the world and stays pending, for the next process of its
executor or a worker to recover.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from dbos import DBOS

from forge.durable.database import RunsDatabase, database_url, engine_url
from forge.durable.serializer import SERIALIZER
from forge.durable.workflow import ANSWER_TOPIC, HOST, QUEUE_NAME
from forge.errors import UsageError

__all__ = ["executor_name", "launch", "off_the_event_loop", "shutdown"]


def launch(db: str | os.PathLike[str] | None = None, *, executor_id: str | None = None,
           concurrency: int | None = None, worker: bool = False) -> str:
    """Start this process's DBOS on the database `db` (see `database_url`), once; later
    calls with the same database do nothing. A `worker` takes runs from forge's queue, at
    most `concurrency` at a time; other processes only submit to it. Launching recovers
    the runs this executor (`executor_id`, default "local") left unfinished, so make every
    durable loop the runs may name (`loop.durable(NAME)`) before calling it.

    Called where an event loop runs (an `async def` program), it launches from a thread of
    its own: DBOS refuses its sync API on an event loop's thread.

    Raises:
        UsageError: DBOS was launched here already, on another database.
    """
    url: str = off_the_event_loop(_launch, db, executor_id, concurrency, worker)
    return url


def _launch(db: str | os.PathLike[str] | None, executor_id: str | None, concurrency: int | None, worker: bool) -> str:
    url = database_url(db)
    if HOST.url is not None:
        if HOST.url != url:
            raise UsageError(f"this process runs durable loops on {HOST.url}; one process has one runs "
                             f"database (DBOS is one per process), not also {url}")
        return url
    HOST.stopping.clear()
    HOST.ready.clear()  # a run DBOS hands this process before the end of launch waits for it (`_hosted`)
    # SQLite's journal mode is set before DBOS connects; a PostgreSQL database may be DBOS's to create
    early = RunsDatabase(url) if url.startswith("sqlite") else None
    config: dict[str, Any] = {"name": "forge", "system_database_url": url, "log_level": "WARNING",
                              "notification_listener_polling_interval_sec": 0.05, "serializer": SERIALIZER,
                              "application_version": APPLICATION_VERSION}
    if executor_id is not None:
        config["executor_id"] = executor_id
    _adopt_runs(url)
    DBOS(config=config)  # type: ignore[arg-type]
    DBOS.listen_queues([QUEUE_NAME] if worker else [])
    DBOS.launch()
    if worker:  # a worker says how many runs each worker takes at once (kept with the queue)
        HOST.queue = DBOS.register_queue(QUEUE_NAME, worker_concurrency=concurrency, polling_interval_sec=0.2,
                                         on_conflict="always_update")
    else:
        HOST.queue = DBOS.retrieve_queue(QUEUE_NAME) or DBOS.register_queue(QUEUE_NAME, polling_interval_sec=0.2,
                                                                            on_conflict="never_update")
    HOST.url, HOST.database = url, early or RunsDatabase(url)
    HOST.ready.set()
    _stop_at_exit()
    return url


APPLICATION_VERSION = "forge-1"
"""The one application version every forge process runs DBOS at. DBOS recovers and
dequeues only the workflows of its own version, which it otherwise computes from the
source of the workflow functions: a worker of a newer forge would then never take on the
runs an older one left pending or queued. What a run replays by is its journal, which forge
keeps readable across releases (`forge.durable.serializer`), so forge's runs share one
version, and one started under another (forge 0.1.0's) is adopted (`_adopt_runs`)."""

FORGE_WORKFLOWS = ("forge_run", "forge_arun", "forge_resume", "forge_aresume")
"""The names of forge's workflows (`forge.durable.workflow`)."""


def _adopt_runs(url: str) -> None:
    """Put forge's runs not yet ended (pending, queued, delayed) that another application
    version started at `APPLICATION_VERSION`, before DBOS looks for runs to recover. Done on
    DBOS's own table (it has no call for it); nothing is done where it does not exist yet."""
    import sqlalchemy as sa

    engine = sa.create_engine(engine_url(url))
    table = "workflow_status" if url.startswith("sqlite") else "dbos.workflow_status"
    names = ", ".join(f"'{name}'" for name in FORGE_WORKFLOWS)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(
                f"UPDATE {table} SET application_version = '{APPLICATION_VERSION}' WHERE name IN ({names}) "
                "AND status IN ('PENDING', 'ENQUEUED', 'DELAYED') AND application_version IS NOT NULL "
                f"AND application_version <> '{APPLICATION_VERSION}'")
    except sa.exc.DBAPIError:
        pass  # a database DBOS has not made its tables in yet: nothing to adopt
    finally:
        engine.dispose()


_AT_EXIT: list[bool] = []


def _stop_at_exit() -> None:
    """Shut DBOS down when the program is done, once per process: a run waiting here for an
    answer holds a thread the interpreter would otherwise wait for forever (the run stays
    waiting in the database). Registered with threading's exit hooks, which run before the
    interpreter joins threads (plain `atexit` runs after, too late)."""
    if _AT_EXIT:
        return
    _AT_EXIT.append(True)
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(shutdown)
    else:  # pragma: no cover - every CPython forge supports has it
        atexit.register(shutdown)


def shutdown(grace: float = 0.0) -> list[str]:
    """Stop this process's DBOS and return the ids of the runs it leaves pending here.

    Each run under way here stops at its next call to the world, before making it; one in
    a call is given `grace` seconds to finish it (its outcome is stored), so a recovery
    does not make again what it did; one still in a call after that is recovered as after
    a crash (its tool's `on_crash`). Runs waiting here for an answer are woken and leave
    their threads. The runs left stay pending in the database, to be recovered by the next
    process of this executor or handed to a worker (`forge.durable.worker`), so the process
    can exit. Called where an event loop runs, it stops from a thread of its own, as
    `launch` does."""
    left: list[str] = off_the_event_loop(_shutdown, grace)
    return left


def _shutdown(grace: float = 0.0) -> list[str]:
    if HOST.url is None:
        return []
    _stop_dequeuing()
    HOST.ready.clear()
    HOST.stopping.set()
    for run_id, ended in list(HOST.waiting.items()):
        DBOS.send(run_id, {"kind": "process stopping"}, ANSWER_TOPIC)  # an answer no wait accepts
        ended.wait(timeout=10)
    until = time.monotonic() + grace
    while HOST.live.under_way() and time.monotonic() < until:
        time.sleep(0.02)
    left = [status.workflow_id for status in DBOS.list_workflows(
        status="PENDING", executor_id=DBOS.executor_id, load_input=False, load_output=False)]
    if HOST.database is not None:
        HOST.database.close()
    HOST.url = HOST.database = HOST.queue = None
    DBOS.destroy(destroy_registry=False)
    return left


def _stop_dequeuing() -> None:
    """Stop this process's DBOS taking runs from the queue, before forge's side begins to
    stop: DBOS stops it only in `destroy`, after it. A run it hands over in between is
    left pending (`forge.durable.workflow._hosted`) and handed back, but taken to be given
    back.

    Done through DBOS's private parts (its queue thread's stop event), checked against the
    DBOS versions `forge.durable.worker.CHECKED_DBOS` names; where they are not found, the
    runs handed over meanwhile are left pending all the same."""
    from dbos import _dbos, _queue

    instance = getattr(_dbos, "_dbos_global_instance", None)
    for thread in getattr(instance, "_background_threads", ()):
        if getattr(thread, "_target", None) is _queue.queue_thread:
            stop = getattr(thread, "_args", (None,))[0]
            if isinstance(stop, threading.Event):
                stop.set()


def executor_name() -> str:
    """A name for this process as a DBOS executor: host, process id."""
    return f"forge-worker-{socket.gethostname()}-{os.getpid()}"


def off_the_event_loop(function: Callable[..., Any], *arguments: Any) -> Any:
    """`function(*arguments)`, in a thread of its own when this thread runs an event loop
    (DBOS refuses its sync API there), waited for; else here."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*arguments)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="forge-dbos") as pool:
        return pool.submit(function, *arguments).result()
