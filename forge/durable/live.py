"""Following a running run: the transitions it has fired so far, stored while someone
watches it.

A durable run publishes its trace when it waits or ends (the run's event); until then the
database holds only its calls to the world (`forge_journal`). Storing every transition as it
fires would cost each step of every run writes that almost nobody reads, so a run's
transitions are stored only while a page follows it: the page says so in `forge_watch`
(`RunsDatabase.watch`, renewed while it is open), and one thread per process, `LiveRuns`,
looks every `every` seconds at which of the runs under way here are followed, and stores
what each has fired since it last looked, as trace lines in `forge_live`.

That thread reads a run's trace while the run goes on in its own thread, so it reads only
the transitions fired before the run's latest call to the world began (the performer's
`shown`): those are complete and never change. A run held up in a slow call (a model, a
tool, an approval in doubt) so shows everything up to that call, which is what it waits on;
between two calls a run fires only pure transitions, in microseconds. When a run ends, what
was stored of it is dropped: its published trace has it all.

A run nobody follows pays one integer set per call to the world; its process, one small
query every `every` seconds while any run is under way in it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from forge.durable.database import RunsDatabase

__all__ = ["LiveRuns", "RunUnderWay"]

_log = logging.getLogger("forge.durable")


class RunUnderWay(Protocol):
    """What `LiveRuns` reads of a run's performer (a `DurablePerformer`)."""

    run_id: str
    shown: int
    """How many of the run's transitions had fired when its latest call to the world began."""

    @property
    def database(self) -> RunsDatabase: ...

    def transitions(self, first: int, count: int) -> list[Any]:
        """Records `first` (0-based) up to `count` of the run's trace."""
        ...


@dataclass(eq=False)
class _Followable:
    """A run under way here, and how many of its transitions are stored so far."""

    performer: RunUnderWay
    stored: int = 0


class LiveRuns:
    """The runs under way in this process, and the thread that stores the followed ones'
    transitions (see the module). `started` and `ended` bracket a run; `look` is one pass
    of the thread (what a test calls to not wait for it)."""

    def __init__(self, every: float = 0.25) -> None:
        self.every = every
        self._runs: dict[str, _Followable] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def started(self, performer: RunUnderWay) -> None:
        """Take `performer`'s run in, and make sure the thread looks at it."""
        with self._lock:
            self._runs[performer.run_id] = _Followable(performer)
            if self._thread is None:
                self._thread = threading.Thread(target=self._follow, name="forge-live-runs", daemon=True)
                self._thread.start()

    def ended(self, run_id: str) -> None:
        """Let the run go, dropping what was stored of it (its trace is about to be published)."""
        with self._lock:
            done = self._runs.pop(run_id, None)
            if done is not None and done.stored:
                self._quietly(done.performer.database.forget_live, run_id)

    def under_way(self) -> int:
        """How many runs are under way in this process now."""
        with self._lock:
            return len(self._runs)

    def look(self) -> None:
        """Store what each followed run fired since the last look."""
        with self._lock:
            runs = list(self._runs.values())
            by_database: dict[int, list[_Followable]] = {}
            for each in runs:
                by_database.setdefault(id(each.performer.database), []).append(each)
            for group in by_database.values():
                database = group[0].performer.database
                followed = self._quietly(database.watched, sorted({t.performer.run_id for t in group}))
                if followed is _FAILED:
                    continue
                for each in group:
                    if each.performer.run_id in followed and each.performer.shown > each.stored:
                        self._quietly(self._store, database, each)

    @staticmethod
    def _store(database: RunsDatabase, followed: _Followable) -> None:
        """Store the transitions `followed` fired since the last look, as trace lines."""
        performer, count = followed.performer, followed.performer.shown
        lines = [json.dumps(record.to_json()) for record in performer.transitions(followed.stored, count)]
        if lines:
            database.append_live(performer.run_id, followed.stored, lines)
            followed.stored = count

    def _follow(self) -> None:
        while True:
            with self._lock:
                if not self._runs:
                    self._thread = None
                    return
            self.look()
            time.sleep(self.every)

    @staticmethod
    def _quietly(action: Any, *args: Any) -> Any:
        """`action(*args)`; a database that fails (closed at shutdown, read-only) or a record
        that cannot be written costs the page its live view, never the run or this thread."""
        try:
            return action(*args)
        except Exception as error:  # the run goes on whatever this thread meets
            _log.debug("forge: could not store a followed run's transitions: %s", error)
            return _FAILED


_FAILED = object()
