"""Following a running run: the transitions its turn under way has fired so far, stored
while someone watches it.

A durable turn publishes its trace when it ends (the run's event); until then the database
holds only its calls to the world (`forge_journal`). Storing every transition as it fires
would cost each step of every run writes that almost nobody reads, so a turn's transitions
are stored only while a page follows its run: the page says so in `forge_watch`
(`RunsDatabase.watch`, renewed while it is open), and one thread per process, `LiveTurns`,
looks every `every` seconds at which of the turns running here are followed, and stores
what each has fired since it last looked, as trace lines in `forge_live`.

That thread reads a turn's trace while the turn goes on in its own thread, so it reads only
the transitions fired before the turn's latest call to the world began (the performer's
`shown`): those are complete and never change. A turn held up in a slow call (a model, a
tool, an approval in doubt) so shows everything up to that call, which is what it waits on;
between two calls a turn fires only pure transitions, in microseconds. When a turn ends, what
was stored of it is dropped: its published trace has it all.

A run nobody follows pays one integer set per call to the world; its process, one small
query every `every` seconds while any turn runs in it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from forge.durable.database import RunsDatabase

__all__ = ["LiveTurns", "TurnUnderWay"]

_log = logging.getLogger("forge.durable")


class TurnUnderWay(Protocol):
    """What `LiveTurns` reads of a turn's performer (a `DurablePerformer`)."""

    run_id: str
    shown: int
    """How many of the turn's transitions had fired when its latest call to the world began."""

    @property
    def database(self) -> RunsDatabase: ...

    @property
    def turn(self) -> int: ...

    def transitions(self, first: int, count: int) -> list[Any]:
        """Records `first` (0-based) up to `count` of the turn's trace."""
        ...


@dataclass(eq=False)
class _Followable:
    """A turn under way here, and how many of its transitions are stored so far."""

    performer: TurnUnderWay
    stored: int = 0


class LiveTurns:
    """The turns under way in this process, and the thread that stores the followed ones'
    transitions (see the module). `started` and `ended` bracket a turn; `look` is one pass
    of the thread (what a test calls to not wait for it)."""

    def __init__(self, every: float = 0.25) -> None:
        self.every = every
        self._turns: dict[tuple[str, int], _Followable] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def started(self, performer: TurnUnderWay) -> None:
        """Take `performer`'s turn in, and make sure the thread looks at it."""
        with self._lock:
            self._turns[(performer.run_id, performer.turn)] = _Followable(performer)
            if self._thread is None:
                self._thread = threading.Thread(target=self._follow, name="forge-live-turns", daemon=True)
                self._thread.start()

    def ended(self, run_id: str, turn: int) -> None:
        """Let the turn go, dropping what was stored of it (its trace is about to be published)."""
        with self._lock:
            done = self._turns.pop((run_id, turn), None)
            if done is not None and done.stored:
                self._quietly(done.performer.database.forget_live, run_id, turn)

    def under_way(self) -> int:
        """How many turns are under way in this process now."""
        with self._lock:
            return len(self._turns)

    def look(self) -> None:
        """Store what each followed turn fired since the last look."""
        with self._lock:
            turns = list(self._turns.values())
            by_database: dict[int, list[_Followable]] = {}
            for each in turns:
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
    def _store(database: RunsDatabase, turn: _Followable) -> None:
        """Store the transitions `turn` fired since the last look, as trace lines."""
        performer, count = turn.performer, turn.performer.shown
        lines = [json.dumps(record.to_json()) for record in performer.transitions(turn.stored, count)]
        if lines:
            database.append_live(performer.run_id, performer.turn, turn.stored, lines)
            turn.stored = count

    def _follow(self) -> None:
        while True:
            with self._lock:
                if not self._turns:
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
            _log.debug("forge: could not store a followed turn's transitions: %s", error)
            return _FAILED


_FAILED = object()
