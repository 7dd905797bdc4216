"""Stored runs, seen from any process: the one client that lists, shows, answers, cancels,
submits, forks, diffs and follows durable runs.

`StoredRuns(db)` talks to the runs' database through `DBOSClient`, so it needs neither the
loops' code nor a running DBOS: what `forge runs`, `forge submit`, `forge replay RUN_ID`,
`forge debug RUN_ID` and `forge ui` use, and what a loop's durability
(`forge.durable.durability`) reads and answers its own runs through. Answers are checked
against what the run published it waits for (its state, the call's fingerprint, the loop's
tools) before anything is sent.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from dbos import DBOS, DBOSClient

from forge.durable.answers import Answer, AnswerRefused, Waiting, claim_answer
from forge.durable.database import RunsDatabase, database_url, shown_url
from forge.durable.forks import ForkRequest, fork_input, origin_of, seed_fork
from forge.durable.result import DurableResult, wait_for
from forge.durable.serializer import SERIALIZER
from forge.durable.workflow import (
    ANSWER_TOPIC,
    ASYNC_RESUME_NAME,
    ASYNC_WORKFLOW_NAME,
    EVENT,
    POLLS,
    QUEUE_NAME,
    RESUME_NAME,
    RESUMES,
    STATE_EVENT,
    WORKFLOW_NAME,
    continuation_id,
)
from forge.errors import RunNotFound, UsageError
from forge.machine.fork import ForkPlan, Patch
from forge.records.journal import JournalEntry
from forge.records.tally import Timing
from forge.records.trace import TransitionRecord, error_text

if TYPE_CHECKING:
    from dbos import WorkflowStatus

    from forge.events import StreamEvent

__all__ = ["SEARCH_LIMIT", "RunRow", "StoredRuns", "new_run_id"]

CANCEL_DELAY = 10 * 365 * 86400.0
"""How far off the workflow a cancel of a parked run queues is to start: never (it is
cancelled at once; the delay only keeps a worker from taking it in between)."""

SEARCH_LIMIT = 200
"""The most characters a search of the runs list takes (a longer text is refused, not sent
to the database, whose pattern matching has limits of its own)."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RunRow:
    """One line of `forge runs list`."""

    run_id: str
    workflow_status: str
    loop: str
    goal: str
    created_at: float | None
    status: str = ""
    """The run's status as `forge runs show` says it (queued, running, waiting, finished,
    cancelled, error); `workflow_status` is DBOS's."""
    reason: str | None = None
    """The terminal state it ended (or waits) in."""
    steps: int = 0
    tokens: int = 0
    updated_at: float | None = None
    question: str | None = None
    """What it waits for, when it waits, in words (`Waiting.asks`): what an inbox lists."""
    waiting: Waiting | None = field(default=None, compare=False, repr=False)
    """What it waits for, whole (what an inbox's answer forms are made from)."""
    timing: Timing | None = None
    """Its time working and waiting for a person, up to its last change (`forge.records.tally`);
    None for a run that has published none yet (queued, running) or stored before it was kept."""

    @property
    def seconds(self) -> float | None:
        """How long it has run: from its start to its last change."""
        return None if self.created_at is None or self.updated_at is None else self.updated_at - self.created_at


_WORKFLOW_STATUSES = {"queued": ("ENQUEUED",), "running": ("PENDING", "ENQUEUED"), "waiting": ("PENDING",),
                      "finished": ("SUCCESS",), "cancelled": ("CANCELLED",),
                      "error": ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")}
"""The DBOS workflow statuses a run of each of forge's statuses can have (its own
workflow's: a run a worker left waiting once goes on in workflows of its own, `_now`)."""

_CHAINED_LISTED = ("queued", "running", "waiting", "cancelled", "error")
"""The statuses `find` lists from the runs in them alone (`_find_with_chained`)."""


def _timing_of(event: Mapping[str, Any]) -> Timing | None:
    """The time working and waiting a run's event publishes (`working_s`, `waiting_s`)."""
    working, waiting = event.get("working_s"), event.get("waiting_s")
    if not isinstance(working, int | float) or not isinstance(waiting, int | float):
        return None
    return Timing(float(working), float(waiting))


def _arguments(workflow: Any) -> list[Any]:
    """The arguments a run's workflow was started with (DBOS's stored inputs' `args`)."""
    inputs = workflow.input
    return list(inputs.get("args") or ()) if isinstance(inputs, dict) else []


def _loop_and_goal(status: Any) -> tuple[str, str]:
    """The loop name and goal a run's workflow was started with (its stored inputs)."""
    loop, goal = ([*_arguments(status), "?", "?"])[:2]
    return str(loop), str(goal)


def _waits_by(first: Any, now: Any) -> str:
    """How the run whose own workflow is `first`, and whose workflow now is `now`, waits for
    an answer (`forge.durable.workflow`): "parks" (a worker's: its workflow ends, and the
    answer queues the next), "polls" (a program's: it looks in `forge_answers`) or "recv"
    (one forge 0.1.0 started: DBOS's `recv`, sent the answer)."""
    mode = ([*_arguments(first), None, None, None, None, None])[4]
    if mode is True or str(now.name) in (RESUME_NAME, ASYNC_RESUME_NAME):
        return "parks"
    return "polls" if mode == POLLS else "recv"


def _parked_now(status: Any, event: Mapping[str, Any]) -> bool:
    """Whether the workflow standing for a run ended with the run waiting: a worker parked
    it, and an answer (or a deadline) may have started the next one."""
    return str(status.status) == "SUCCESS" and event.get("status") == "waiting" and bool(event.get("waiting"))


def journal_events(calls: Sequence[JournalEntry]) -> builtins.list[tuple[int, StreamEvent]]:
    """The stream events a journal holds, each with the transition it was made in: a
    `ToolAttemptFinished` for each tool attempt (its number counts the attempts of the same
    call, tool and arguments, in that transition; its delay is the retry wait journaled just
    before it), and for each model call a `ModelCallStarted` and its reply's deltas (one per
    text and per tool call, without timing, as a replay gives them)."""
    from forge.events import ModelCallStarted, ToolAttemptFinished, replayed_deltas
    from forge.observe import ToolAttempt

    found: builtins.list[tuple[int, StreamEvent]] = []
    made: dict[tuple[int, str, str], int] = {}
    for index, entry in enumerate(calls):
        if entry.kind == "model":
            found.append((entry.transition, ModelCallStarted(entry.name)))
            found.extend((entry.transition, delta) for delta in replayed_deltas(entry.value))
        if entry.kind != "tool":
            continue
        key = (entry.transition, entry.name, json.dumps(entry.identity, sort_keys=True, default=str))
        made[key] = number = made.get(key, 0) + 1
        before = calls[index - 1] if index else None
        delay = float(before.identity) if before is not None and before.kind == "wait" else 0.0
        found.append((entry.transition, ToolAttemptFinished(ToolAttempt(entry.name, number, delay, entry.error))))
    return found


def _readable(method: Callable[..., T]) -> Callable[..., T]:
    """`method`, with a database that cannot be read (not a database, not one of forge's,
    unreachable) refused as a UsageError naming it, rather than SQLAlchemy's traceback."""
    @functools.wraps(method)
    def reading(self: StoredRuns, *args: Any, **kwargs: Any) -> T:
        from sqlalchemy.exc import DatabaseError, InterfaceError

        try:
            return method(self, *args, **kwargs)
        except (DatabaseError, InterfaceError) as error:
            raise _unreadable(self.url, error) from None
    return reading


def _unreadable(url: str, error: Exception) -> UsageError:
    """What `forge runs` says of a database it cannot read: one line naming it and why."""
    cause = (str(getattr(error, "orig", None) or error).strip().splitlines() or [type(error).__name__])[0]
    hint = "; it holds no forge runs" if "no such table" in cause or "does not exist" in cause else ""
    return UsageError(f"cannot read the runs database {shown_url(url)}: {cause}{hint}")


def new_run_id(run_id: str | None) -> str:
    """`run_id`, or 32 random hex digits when None.

    Raises:
        UsageError: `run_id` is not a non-blank string.
    """
    if run_id is None:
        return os.urandom(16).hex()
    if not isinstance(run_id, str) or not run_id.strip():
        raise UsageError(f"run_id must be a non-blank string, got {run_id!r}")
    return run_id


class _Page:
    """The rows of one page of a search, kept as they are read: `offset` fitting rows
    skipped, then up to `limit` kept (`fits(row)` says which fit)."""

    def __init__(self, offset: int, limit: int, fits: Callable[[RunRow], bool]) -> None:
        self.offset, self.limit, self.fits = offset, limit, fits
        self.skipped = 0
        self.wanted: builtins.list[RunRow] = []

    def full_after(self, rows: Iterable[RunRow]) -> bool:
        """Take what fits of `rows`; True once a fitting row is found past a full page
        (more follow)."""
        for row in rows:
            if not self.fits(row):
                continue
            if self.skipped < self.offset:
                self.skipped += 1
                continue
            if len(self.wanted) == self.limit:
                return True
            self.wanted.append(row)
        return False


class StoredRuns:
    """The runs in the database `db` (a SQLite path or a postgresql:// URL).

    Every method refuses a database it cannot read with a UsageError naming it."""

    def __init__(self, db: str | os.PathLike[str], create: bool = False, *, codec: Any = None) -> None:
        """`codec` is a loop's (`AgentLoop(codec=...)`): the values it wrote are read back
        with it (without it, as stored). Raises UsageError for a SQLite file that does not
        exist, unless `create`."""
        self.url, self.codec = database_url(db), codec
        if self.url.startswith("sqlite:///") and not create and not Path(self.url[len("sqlite:///"):]).exists():
            raise UsageError(f"no runs database at {self.url[len('sqlite:///'):]}")
        from sqlalchemy.exc import DatabaseError, InterfaceError

        dbos_log = logging.getLogger("dbos")
        level = dbos_log.level
        dbos_log.setLevel(logging.CRITICAL)  # a failure to connect is raised below, naming the cause, not logged too
        try:
            self.client = DBOSClient(system_database_url=self.url, application_name="forge", serializer=SERIALIZER)
        except (DatabaseError, InterfaceError) as error:
            raise _unreadable(self.url, error) from None
        finally:
            dbos_log.setLevel(level)
        self._migrated = False
        self._database: RunsDatabase | None = None
        self._noting = threading.Lock()

    @property
    def database(self) -> RunsDatabase:
        """forge's own tables in the runs' database (journal, claims, workers), opened when
        first needed and closed with these runs."""
        if self._database is None:
            self._database = RunsDatabase(self.url)
        return self._database

    def close(self) -> None:
        if self._database is not None:
            self._database.close()
        self.client.destroy()

    def __enter__(self) -> StoredRuns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @_readable
    def list(self, limit: int = 50, offset: int = 0) -> builtins.list[RunRow]:
        """The latest `limit` runs (after the `offset` latest), newest first."""
        return self._rows(self._workflows(limit, offset))

    def _workflows(self, limit: int, offset: int, workflow_statuses: Sequence[str] | None = None,
                   ids: Sequence[str] | None = None) -> builtins.list[WorkflowStatus]:
        """The latest `limit` runs' workflows (after the `offset` latest) that DBOS gives one
        of `workflow_statuses`, newest first; with `ids` (what the search index found, newest
        first), those runs' only."""
        statuses = list(workflow_statuses) if workflow_statuses else None
        if ids is None:
            return self.client.list_workflows(name=[WORKFLOW_NAME, ASYNC_WORKFLOW_NAME], limit=limit, offset=offset,
                                              sort_desc=True, load_output=False, status=statuses)
        found = self.client.list_workflows(workflow_ids=list(ids), sort_desc=True, load_output=False, status=statuses)
        order = {run_id: position for position, run_id in enumerate(ids)}
        found.sort(key=lambda status: order.get(status.workflow_id, len(order)))
        return found

    def _rows(self, found: Sequence[WorkflowStatus], text: str | None = None,
              loop_name: str | None = None) -> builtins.list[RunRow]:
        """The rows of the runs of workflows `found` of the loop `loop_name` and whose id or
        goal holds `text` (any case), matched before a run's event is read."""
        rows = []
        needle = (text or "").lower()
        kept = []
        for status in found:
            loop, goal = _loop_and_goal(status)
            if loop_name is not None and loop != loop_name:
                continue
            if needle and needle not in status.workflow_id.lower() and needle not in goal.lower():
                continue
            kept.append((status, loop, goal))
        events = self._events([status.workflow_id for status, _, _ in kept])
        nows = self._now_all([(status.workflow_id, status, events.get(status.workflow_id) or {})
                              for status, _, _ in kept])
        for (status, loop, goal), (now, event) in zip(kept, nows, strict=True):
            created = status.created_at / 1000 if status.created_at else None
            updated = status.updated_at / 1000 if status.updated_at else None
            ours = DurableResult.of(status.workflow_id, str(now.status), event)
            updated = now.updated_at / 1000 if now.updated_at else updated
            rows.append(RunRow(status.workflow_id, str(now.status), loop, goal, created, ours.status,
                               event.get("reason"), int(event.get("steps") or 0), int(event.get("tokens") or 0),
                               updated, ours.waiting.asks if ours.waiting is not None else None, ours.waiting,
                               _timing_of(event)))
        return rows

    def under_way(self, run_id: str) -> builtins.list[JournalEntry]:
        """The calls the run has stored so far: what moves while it runs (its transitions
        are published when it waits or ends).

        Raises:
            UsageError: a stored row is not a call (written by something other than forge).
        """
        from forge.durable.performer import StoredCalls

        try:
            return StoredCalls(self.database, run_id, codec=self.codec).calls
        except Exception as error:  # a codec's decode raises what it raises
            raise UsageError(f"the calls of run {run_id!r} cannot be read here: {type(error).__name__}: {error}") from None

    def follow(self, run_id: str, seconds: float = 10.0) -> bool:
        """Say that a page follows `run_id` for the next `seconds`: while it does, the process
        running the run stores the transitions it fires (`forge.durable.live`), which
        `fired_so_far` reads. False when the database takes no writes from here (a read-only
        login): the page then shows the run's calls only."""
        try:
            self.database.watch(run_id, seconds)
        except sa.exc.SQLAlchemyError:
            return False
        return True

    def stream(self, run_id: str, every: float = 0.25) -> Iterator[StreamEvent]:
        """The run's events as it moves, read from the database (`forge.events`): a
        `TransitionFired` for each transition it has fired and fires (what it fired before
        is given first), a `ToolAttemptFinished` for each tool attempt and a
        `ModelCallStarted` with its reply's deltas for each model call as they are stored
        (before the record of the transition they were made in), then, when it waits,
        `WaitingOn(waiting)`, and last `RunStopped(result)` once it waits, finishes, is
        cancelled or fails. While the stream is read the run is followed (`follow`), so the
        process running it stores its transitions as it goes; `every` is how often the
        database is asked. What `forge runs follow` prints. (A stored run keeps no attempt's
        start and no delta's timing: a model's reply comes as one delta per text and per
        tool call, as a replay gives it; a stream of the run in its own process,
        `loop.stream`, has them as they come.)

        Raises (while iterating):
            RunNotFound: (a LookupError) no such run.
            UsageError: the database cannot be read.
        """
        from forge.durable.performer import StoredCalls
        from forge.events import RunStopped, TransitionFired, WaitingOn

        shown, told, followed = 0, 0, -math.inf
        while True:
            if time.monotonic() - followed > 5:  # a watch lasts 15 s: renewed well before it lapses
                self.follow(run_id, 15.0)
                followed = time.monotonic()
            stored = self.get(run_id)
            stopped = stored.status in ("waiting", "finished", "cancelled", "error")
            records = list(stored.records) if stopped or stored.legacy else \
                (self.fired_so_far(run_id) or list(stored.records))
            made = [] if stored.legacy else journal_events(StoredCalls(self.database, run_id, codec=self.codec).calls)
            for record in records[shown:]:
                while told < len(made) and made[told][0] <= record.sequence:
                    yield made[told][1]
                    told += 1
                yield TransitionFired(record)
            shown = max(shown, len(records))
            while told < len(made) and made[told][0] == shown + 1:  # made in the transition firing now
                yield made[told][1]
                told += 1
            if stopped:
                if stored.waiting is not None:
                    yield WaitingOn(stored.waiting)
                yield RunStopped(stored)
                return
            time.sleep(every)

    @_readable
    def fired_so_far(self, run_id: str) -> builtins.list[TransitionRecord]:
        """The transitions the run has fired so far, as stored while it is followed
        (`follow`). Empty when nobody followed it yet."""
        return [TransitionRecord.from_json(json.loads(line)) for line in self.database.live_of(run_id)]

    def outcomes(self, loop: str | None = None, limit: int = 1000) -> builtins.list[tuple[builtins.list[Any], str | None]]:
        """The latest `limit` finished runs (of `loop`, when given): each one's records, the
        whole run, and its outcome; what a many-runs diagram is drawn from."""
        rows, _ = self.find(status="finished", loop=loop, limit=limit)
        found = []
        for row in rows:
            stored = self.get(row.run_id)
            found.append((stored.records, stored.outcome))
        return found

    @_readable
    def note_new_runs(self, batch: int = 1000) -> None:
        """Note the goals of the runs created since the newest one noted (`forge_runs`, what
        the search reads): done by the reader, so that starting a run costs no write of its
        own. A search does it first, so the first search of a database notes every run once
        (about 7 s for 100,000 runs on SQLite); `forge ui` does it as it starts, in the background.
        One noting at a time: a search during another's waits for it rather than repeating it."""
        with self._noting:
            self._note_new_runs(batch)

    def _note_new_runs(self, batch: int) -> None:
        from datetime import datetime

        newest = self.database.newest_noted()
        since = None if newest is None else datetime.fromtimestamp(newest, UTC).isoformat()
        offset = 0
        while True:
            found = self.client.list_workflows(name=[WORKFLOW_NAME, ASYNC_WORKFLOW_NAME], start_time=since,
                                               sort_desc=False, limit=batch, offset=offset, load_output=False)
            noted = []
            for status in found:
                noted.append((status.workflow_id, _loop_and_goal(status)[1], (status.created_at or 0) / 1000))
            self.database.note_runs(noted)
            if len(found) < batch:
                return
            offset += batch

    def find(self, *, status: str | None = None, reason: str | None = None, text: str | None = None,
             loop: str | None = None, offset: int = 0, limit: int = 50,
             window: int = 200) -> tuple[builtins.list[RunRow], bool]:
        """A page of the runs, newest first, that have `status` (queued, running, waiting,
        finished, cancelled, error), ended in `reason`, are runs of `loop`, and whose id or
        goal holds `text` (any case); and whether more follow. Reads the runs `window` at a time; DBOS's status
        and the text are matched before a run's event is read, so a filter reads only the
        events of the runs it may keep.

        Raises:
            UsageError: `text` is longer than `SEARCH_LIMIT` characters.
        """
        if text and len(text) > SEARCH_LIMIT:
            raise UsageError(f"a search is at most {SEARCH_LIMIT} characters, got {len(text):,}")
        statuses = set(_WORKFLOW_STATUSES.get(status, ())) if status else None
        if reason:  # only a run that finished or waits has ended in a state
            statuses = (statuses if statuses is not None else {"SUCCESS", "PENDING"}) & {"SUCCESS", "PENDING"}
        if statuses is not None and not statuses:
            return [], False
        if text:
            self.note_new_runs()
        page = _Page(offset, limit, lambda row: (not status or row.status == status) and
                     (not reason or row.reason == reason))
        if status in _CHAINED_LISTED and not text:
            return self._find_with_chained(status, loop, page)
        seen = 0
        while True:
            ids = self.database.search_runs(text, window, seen) if text else None
            if ids is not None and not ids:
                return page.wanted, False
            found = self._workflows(window, seen, sorted(statuses) if statuses else None, ids)
            read = len(found) if ids is None else len(ids)
            seen += read
            if page.full_after(self._rows(found, text, loop)):
                return page.wanted, True
            if read < window:
                return page.wanted, False

    def _find_with_chained(self, status: str, loop: str | None, page: _Page,
                           chained: bool = True) -> tuple[builtins.list[RunRow], bool]:
        """`find`'s `page` of the runs in `status` (queued, running, waiting, cancelled, error): the
        runs DBOS has in that status and the runs a worker left waiting once that forge last
        noted in it (`forge_chain`; a parked run's own workflow has ended), newest first.
        Reads the newest candidates of each, as many as the page needs (more only when some
        turn out to be in another status now), so a page costs the same however many runs
        are in the status or have finished."""
        statuses = sorted(_WORKFLOW_STATUSES[status])
        offset, limit = page.offset, page.limit
        wanted = offset + limit + 1  # one more: whether more follow
        reach = wanted
        while True:
            found = self.client.list_workflows(name=[WORKFLOW_NAME, ASYNC_WORKFLOW_NAME], status=statuses,
                                               sort_desc=True, load_output=False, load_input=False, limit=reach)
            candidates = {item.workflow_id: (item.created_at or 0) / 1000 for item in found}
            noted = self.database.chained(status, limit=reach) if chained else []
            candidates.update(noted)
            ids = sorted(candidates, key=lambda run_id: candidates[run_id], reverse=True)[:reach]
            if not ids:  # (DBOS reads no list of ids as no filter at all)
                return [], False
            kept = [row for row in self._rows(self._workflows(len(ids), 0, None, ids), None, loop) if page.fits(row)]
            exhausted = len(found) < reach and len(noted) < reach
            if len(kept) >= wanted or exhausted:
                return kept[offset:offset + limit], len(kept) > offset + limit
            reach *= 4

    @_readable
    def waiting_count(self, cap: int = 500) -> int:
        """How many runs wait for an answer, counted up to `cap`: the runs a worker parked
        as forge last noted them (one count of an index, however many wait) and the runs
        waiting in a program (only the runs under way are read). What a page's badge shows."""
        parked = self.database.count_chained("waiting")
        if parked >= cap:
            return cap
        waiting = _Page(0, cap, lambda row: row.status == "waiting")
        return min(cap, parked + len(self._find_with_chained("waiting", None, waiting, chained=False)[0]))

    def get(self, run_id: str) -> DurableResult:
        """The run as stored now. Raises RunNotFound (a LookupError) for an unknown id."""
        return self._read(run_id)[0]

    def _read(self, run_id: str) -> tuple[DurableResult, dict[str, Any]]:
        """The run, and the event it last published (what `get` is made from)."""
        result, event, _, _ = self._reading(run_id)
        return result, event

    @_readable
    def _reading(self, run_id: str) -> tuple[DurableResult, dict[str, Any], Any, Any]:
        """`_read`, and the run's own workflow and the one that stands for it now (DBOS's
        statuses of them: `_now`), read once for the verbs that act on the run."""
        found = self.client.list_workflows(workflow_ids=[run_id], load_output=False)
        if not found:
            raise RunNotFound(f"no durable run {run_id!r} in {self.url}")
        status, event = self._now(run_id, found[0], self.client.get_event(run_id, EVENT, timeout_seconds=0) or {})
        if str(status.status) in _WORKFLOW_STATUSES["error"]:  # DBOS keeps the error with the output
            status = (self.client.list_workflows(workflow_ids=[status.workflow_id], load_output=True) or [status])[0]
        error = status.error
        result = DurableResult.of(run_id, str(status.status), event,
                                  None if error is None else error_text(error), found[0].input)
        if result.has_state:
            kept = event["state"] if "state" in event else \
                self.client.get_event(status.workflow_id, STATE_EVENT, timeout_seconds=0)
            result = result.with_state(kept, self.codec)
        return result, event, found[0], status

    def _now(self, run_id: str, status: Any, event: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The workflow that stands for the run now, and its event: the run's own, or, for a
        run a worker left waiting (parked: its workflow ended, `forge.durable.workflow`), the
        last workflow its answers (or deadlines) started, followed question by question. One
        answered and not yet taken on by a worker is `queued`. A run under way in a program
        says where it is in `forge_status` once it has waited (written with its journal),
        which stands for its event then."""
        return self._now_all([(run_id, status, event)])[0]

    def _now_all(self, runs: Sequence[tuple[str, Any, dict[str, Any]]]) -> builtins.list[tuple[Any, dict[str, Any]]]:
        """`_now` of several runs (id, DBOS status, event) at once: the parked runs' next
        workflows are looked up together, one question deep per round (two reads a round,
        however many runs), so a page of runs costs a few reads, not a few per run."""
        nows = [self._in_program(run_id, status, event) for run_id, status, event in runs]
        going = [index for index, (status, event) in enumerate(nows) if _parked_now(status, event)]
        while going:
            next_ids = {index: continuation_id(runs[index][0], int(nows[index][1]["waiting"].get("asked") or 0))
                        for index in going}
            found = {item.workflow_id: item for item in self.client.list_workflows(
                workflow_ids=list(next_ids.values()), load_input=False, load_output=False)}
            taken = {index: found[next_id] for index, next_id in next_ids.items()
                     if next_id in found and str(found[next_id].status) != "DELAYED"}  # none yet, or only its deadline's
            published = self._events([item.workflow_id for item in taken.values()])
            for index, item in taken.items():
                event = published.get(item.workflow_id)
                if not event:
                    was = nows[index][1]
                    event = {**{k: v for k, v in was.items() if k != "waiting"},
                             "status": "queued" if str(item.status) == "ENQUEUED" else "running"}
                nows[index] = (item, event)
            going = [index for index in taken if _parked_now(*nows[index])]
        return nows

    def _in_program(self, run_id: str, status: Any, event: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """A run under way in a program, as its `forge_status` says once it has waited (an
        answer stored and not yet taken up: still waiting, `answered`); any other as it is."""
        if str(status.status) == "PENDING":
            said = self.database.status_of(run_id)
            if said is not None:
                event = json.loads(said)
                asked = (event.get("waiting") or {}).get("asked") if event.get("status") == "waiting" else None
                if asked is not None and self.database.answer_of(run_id, int(asked))[0]:
                    event = {**event, "answered": True}  # still waiting, its answer not yet taken up
        return status, event

    def _events(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The event each of `run_ids` last published (`EVENT`), in one read of DBOS's events
        table: its client reads one workflow's event per call, two queries each, and a page
        of runs would pay that per run. (DBOS has no call for several; the table and its
        decoding are DBOS's own, checked against DBOS 3.4 as `forge.durable.host` does.)"""
        if not run_ids:
            return {}
        from dbos._serialization import deserialize_value

        system = self.client._sys_db
        table = system.tables.workflow_events
        with system.engine.connect() as connection:
            rows = connection.execute(sa.select(table.c.workflow_uuid, table.c.value, table.c.serialization).where(
                table.c.workflow_uuid.in_(list(run_ids)), table.c.key == EVENT)).fetchall()
        return {str(row[0]): deserialize_value(row[1], row[2], system.serializer) or {} for row in rows}

    def resume(self, run_id: str, answer: Answer, timeout: float | None = None, *, wait: bool = False
               ) -> DurableResult:
        """Send `answer` to the waiting run (it goes on wherever it runs, or when recovered)
        and return the run as it was answered; with `wait`, as it is once it finishes or
        waits again (at most `timeout` seconds).

        The answer is bound to the question the run waits on now: sent twice, or at the
        same moment as another answer, only one is taken, and the others are refused.

        Raises:
            AnswerRefused: the run is not waiting, or the answer does not fit what it waits
                for (another call's fingerprint, an unknown tool, an earlier question), or
                the question was answered already; nothing was sent.
            RunNotFound: (a LookupError) no such run.
            TimeoutError: with `wait`, `timeout` seconds passed first (the run goes on).
        """
        result = self._answered(run_id, answer)
        return self.wait(run_id, timeout, answers=result.answers + 1) if wait else result

    @_readable
    def _answered(self, run_id: str, answer: Answer) -> DurableResult:
        result, event, first, now = self._reading(run_id)
        if result.status != "waiting" or result.waiting is None:
            if answer.question and result.answers >= answer.question:  # the run took that question's answer and went on
                raise AnswerRefused(f"that answer was for question {answer.question}; the run no longer waits for it "
                                    f"(it has had {result.answers} answer{'s' if result.answers != 1 else ''} and is "
                                    f"{result.status})")
            raise AnswerRefused(f"run {run_id!r} is {result.status}, not waiting for an answer")
        bound = answer if answer.question else answer.to(result.waiting)
        bound.check(result.waiting, set(event.get("tools", ())), set(event.get("extra_tools", ())))
        claim_answer(self.database, run_id, result.waiting, bound)
        waits_by = _waits_by(first, now)
        if waits_by == "parks" and self.database.parked_at(run_id) == result.waiting.asked:
            self._take_on(run_id, first, str(now.name), result.waiting.asked)  # (not parked yet: it takes the answer itself)
        elif waits_by == "recv":
            self.client.send(run_id, bound.to_json(), ANSWER_TOPIC)
        return result

    def _take_on(self, run_id: str, first: Any, parked_in: str, question: int, delay: float = 0.0) -> str:
        """Queue the workflow that takes the parked run on after `question` (once: its id
        is the question's), with the run's own arguments (its workflow `first`'s), to start
        in `delay` seconds; one its deadline queued already starts then instead. Returns its id."""
        next_id = continuation_id(run_id, question)
        options: dict[str, Any] = {"queue_name": QUEUE_NAME, "workflow_name": RESUMES.get(parked_in, RESUME_NAME),
                                   "workflow_id": next_id}
        if delay:
            options["delay_seconds"] = delay
        self.client.enqueue(options, *[*_arguments(first), None, None, None][:4], run_id, question)  # type: ignore[arg-type]
        self.database.chain(run_id, "queued")
        self.client.set_workflow_delay(next_id, delay_seconds=delay)  # only a DELAYED one changes
        return next_id

    @_readable
    def cancel(self, run_id: str) -> None:
        """Cancel the run: it stops at its next step; one waiting for an answer is cancelled
        where it waits (no answer takes it on after): a worker's parked run by cancelling the
        workflow that would take it on, a program's by its question's answer, which it reads.
        Raises RunNotFound (a LookupError) for an unknown id."""
        result, _, first, now = self._reading(run_id)
        waiting = result.waiting
        parked = waiting is not None and _waits_by(first, now) == "parks"
        if not parked:  # (before the answer that ends a program's wait: DBOS has the run cancelled then)
            self.client.cancel_workflow(now.workflow_id)
        if waiting is not None:
            with contextlib.suppress(AnswerRefused):
                claim_answer(self.database, run_id, waiting, None)
            if parked:
                self.client.cancel_workflow(self._take_on(run_id, first, str(now.name), waiting.asked,
                                                          delay=CANCEL_DELAY))
                self.database.chain(run_id, "cancelled")

    @_readable
    def submit(self, loop: str, goal: str, run_id: str | None = None,
               conversation: Mapping[str, Any] | None = None) -> str:
        """Queue a run of `goal` on the loop named `loop`, for a worker; return its id.
        `conversation` (`forge.durable.durability.conversation`) makes it go on from an
        earlier run's state.

        Raises:
            UsageError: a blank goal, or a loop no live worker serves while some are live
                (the message names the loops they serve). With no live worker the run is
                queued: a worker that does not know its loop ends it in `fatal_error`,
                saying why.
        """
        if not goal.strip():
            raise UsageError("goal must be a non-blank string")
        self._migrate()
        served = self.database.served_loops()
        if served and loop not in served:
            raise UsageError(f"no live worker serves a loop named {loop!r}: they serve {', '.join(sorted(served))}; "
                             "check the name, or start a worker whose --loops module makes it")
        options: dict[str, Any] = {"queue_name": QUEUE_NAME, "workflow_name": WORKFLOW_NAME}
        options["workflow_id"] = run_id or os.urandom(16).hex()
        self.client.enqueue(options, loop, goal, None, conversation, True)  # type: ignore[arg-type]  # a worker's: parks
        return str(options["workflow_id"])

    def fork(self, source: str, /, at: int, patch: Patch | None = None, run_id: str | None = None) -> str:
        """Queue a new durable run that is the stored run `source` up to transition `at`,
        with `patch` replacing the outcome recorded there, then live (as `AgentLoop.fork`:
        at any transition, after a person's answers too), for a worker serving `source`'s
        loop; return the new run's id (`run_id`, default `SOURCE-fork-N`, the next N). Nothing `source` did
        before `at` is done again; `source` itself is only read. Without the loop's code at
        hand, a patched decision's tool is checked by name against the tools `source`
        published; its arguments are checked when it runs. Forking again into the id of the
        same fork is the same run.

        Raises:
            RunNotFound: (a LookupError) no run `source`.
            PatchRefused: (a ValueError) as `AgentLoop.fork`; also when `at` lies past the
                first trace of a run stored by an earlier forge. Nothing was stored.
            UsageError: `run_id` names a run that is not this fork.
        """
        new, plan, loop = self.fork_plan(source, at, patch, run_id)
        if plan is not None:
            self._migrate()
            options: dict[str, Any] = {"queue_name": QUEUE_NAME, "workflow_name": WORKFLOW_NAME, "workflow_id": new}
            self.client.enqueue(options, loop, plan.goal, fork_input(plan), None, True)  # type: ignore[arg-type]
        return new

    @_readable
    def fork_plan(self, source: str, at: int, patch: Patch | None, run_id: str | None,
                  tools: Mapping[str, Any] | None = None) -> tuple[str, ForkPlan | None, str]:
        """The id of a fork of `source` at `at`, its plan with its journal rows stored (None
        when that fork exists already: forking again is the same run), and the loop it runs
        on: what `fork` queues and a loop's durability starts in its own process. `tools`,
        the loop's own, check a patched decision's arguments too.

        Raises:
            RunNotFound, PatchRefused, UsageError: as `fork`.
        """
        parent, event = self._read(source)
        new = new_run_id(run_id) if run_id is not None else self._next_fork_id(source)
        loop = str(event.get("loop") or parent.loop)
        found = self.client.list_workflows(workflow_ids=[new], load_output=False)
        if found:
            existing = origin_of(found[0].input)
            if existing is None or (existing.run_id, existing.transition) != (source, at):
                raise UsageError(f"run {new!r} exists already, and is not a fork of {source!r} at {at}; "
                                 "fork into a new run id")
            return new, None, loop
        known = tools if tools is not None else frozenset(event.get("tools", ()))
        return new, seed_fork(self.database, ForkRequest(source, at, patch, new), parent.traces, known, self.codec), loop

    def _next_fork_id(self, source: str) -> str:
        """`SOURCE-fork-N`, N one past the highest fork of `source` so named: a fork's id says
        what it was forked from, and the forks of one run count up."""
        prefix = f"{source}-fork-"
        taken = [workflow.workflow_id[len(prefix):] for workflow in
                 self.client.list_workflows(workflow_id_prefix=prefix, load_input=False, load_output=False)]
        return f"{prefix}{max((int(n) for n in taken if n.isdigit()), default=0) + 1}"

    @_readable
    def recorded(self, run_id: str) -> tuple[Sequence[TransitionRecord], Sequence[JournalEntry]]:
        """The run's whole history: every transition record, and every call to the world its
        journal stored, numbered by the transitions of the whole run (a run stored by an
        earlier forge has its traces and journals one after another). What `forge diff
        --db` compares.

        Raises:
            RunNotFound: (a LookupError) no such run.
        """
        from forge.durable.performer import StoredCalls

        result = self.get(run_id)
        records: list[TransitionRecord] = []
        calls: list[JournalEntry] = []
        for part, trace in enumerate(result.traces, start=1):
            offset = len(records)
            records.extend(trace)
            calls.extend(replace(entry, transition=entry.transition + offset)
                         for entry in StoredCalls(self.database, run_id, part, self.codec).calls)
        return records, calls

    @_readable
    def who_serves(self, run_id: str) -> str | None:
        """Which live process will take the run on: a worker that beat in the last seconds
        (`forge worker`), named; None when no worker is live. (A program that started the run
        itself, with `loop.durable(...).run`, serves it while it runs, and says nothing here.)"""
        live = self.database.live_workers()
        found = self.client.list_workflows(workflow_ids=[run_id], load_input=False, load_output=False)
        executor = found[0].executor_id if found else None
        if executor in live:
            return str(executor)
        return live[0] if live else None

    def _migrate(self) -> None:
        if not self._migrated:  # the first submit may come before any worker made DBOS's tables
            DBOS.migrate(self.url)
            self._migrated = True

    def wait(self, run_id: str, timeout: float | None = None, answers: int = 0, every: float = 0.05
             ) -> DurableResult:
        """Wait until the run finishes, or waits having had at least `answers` answers,
        asking every `every` seconds.

        Raises:
            TimeoutError: `timeout` seconds passed first.
        """
        return wait_for(self.get, run_id, timeout, answers, every)
