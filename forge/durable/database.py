"""The runs' database: where it is, and the two small tables forge keeps in it beside
DBOS's own (which hold the runs, their steps, events and queues).

- `forge_idempotency`: the idempotency registry's records (see `StoredRegistry`); DBOS
  records each step's outcome per workflow, but has no store shared by workflows.
- `forge_workers`: a heartbeat per `forge worker`, so that a live worker can tell a dead
  one and hand its runs to DBOS's recovery (which open-source DBOS leaves to its hosted
  control plane otherwise).
- `forge_served`: the loops each worker serves, so that `forge submit` can refuse a loop
  no live worker knows.
- `forge_journal`: each run's calls to the world (`forge.durable.performer`), in parts:
  a run has one (1), and one stored by an earlier forge one per answer. The column holding
  the part keeps the name those releases gave it, so their databases read as they are.
- `forge_runs`: each run's id and goal, what the runs list searches (`forge.durable.runs`).
- `forge_watch` and `forge_live`: the runs someone watches now, and the transitions they
  have fired so far (`forge.durable.live`).
- `forge_answers`: the one answer each question of a run takes, as its JSON (`answer`;
  null for a question whose deadline passed first; `CANCELLED` for a run cancelled while it
  waited), whose unique key lets one through across every process.
- `forge_status`: what a run in a program (not a worker's) last said of itself while it
  waits for an answer and after (its event, as `forge.durable.workflow` publishes one),
  written in the same transaction as the journal rows it stores then: waiting costs no
  commit of its own. Readers take it over the run's DBOS event while the run is under way.
- `forge_chain`: the runs a worker left waiting for an answer (`forge.durable.workflow`),
  each with its last question and its status now (forge's, kept as the run goes on in
  the workflows its answers start): what `forge runs list --status` reads of them.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import sqlalchemy as sa

from forge.errors import UsageError
from forge.files import valid_text

__all__ = ["DEFAULT_DATABASE", "OUTAGE_LIMIT", "DatabaseAway", "RunsDatabase", "database_url", "engine_url", "shown_url"]

T = TypeVar("T")
_log = logging.getLogger("forge.durable")

OUTAGE_LIMIT = 120.0
"""Seconds forge's writes and a worker's beat wait for the runs' database to come back (a
restart, a failover, a lock) before they give up (`DatabaseAway`)."""


class DatabaseAway(BaseException):
    """The runs' database did not answer for `OUTAGE_LIMIT` seconds: the work that needed it
    stops — a worker exits saying so; a run's thread ends and the run stays pending, for
    recovery. A BaseException, as `ProcessStopping` is, so that no stage takes it for a tool's
    or the policy's failure and DBOS records no error: an outage of forge's own storage is
    never the agent's `fatal_error`."""


P = ParamSpec("P")


def _through_outages(what: str) -> Callable[[Callable[Concatenate[RunsDatabase, P], T]],
                                           Callable[Concatenate[RunsDatabase, P], T]]:
    """A `RunsDatabase` method run through an outage of the database (`through_outage`)."""
    def riding(method: Callable[Concatenate[RunsDatabase, P], T]) -> Callable[Concatenate[RunsDatabase, P], T]:
        def ridden(self: RunsDatabase, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return self.through_outage(what, lambda: method(self, *args, **kwargs))
        functools.update_wrapper(ridden, method)
        return ridden
    return riding


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]

_PART = "turn"
"""The stored name of the column that holds a journal row's part (see the module): the
name earlier releases gave it, kept so their databases read as they are."""

DEFAULT_DATABASE = "forge-runs.sqlite"
"""The SQLite file a durable loop uses when given no database: in the working directory."""


def database_url(db: str | os.PathLike[str] | None) -> str:
    """A database URL for DBOS: `None` is `DEFAULT_DATABASE` in the working directory, a
    path is a SQLite file (made absolute, so every process finds the same one), a
    `sqlite://` or `postgresql://` URL is used as it is.

    Raises:
        UsageError: a URL of another kind, an empty path, or a path that is a folder.
    """
    if db is None:
        db = DEFAULT_DATABASE
    text = os.fspath(db)
    if not text.strip():
        raise UsageError("the runs database is an empty path: give a SQLite file or a postgresql:// URL")
    if "://" not in text:
        if Path(text).is_dir():
            raise UsageError(f"the runs database {text!r} is a folder: give a SQLite file in it, "
                             f"such as {os.path.join(text, DEFAULT_DATABASE)}")
        return f"sqlite:///{Path(text).resolve()}"
    scheme = text.split("://", 1)[0]
    if scheme.startswith("sqlite") or scheme.startswith("postgres"):
        return text
    raise UsageError(f"database {text!r}: forge runs on SQLite (a path or sqlite:///PATH) or PostgreSQL "
                     "(postgresql://USER@HOST/DB)")


def shown_url(url: str) -> str:
    """A database URL as it may be printed: without its password."""
    scheme, _, rest = url.partition("://")
    if "@" in rest and ":" in rest.split("@", 1)[0]:
        user = rest.split("@", 1)[0].split(":", 1)[0]
        return f"{scheme}://{user}:***@{rest.split('@', 1)[1]}"
    return url


def engine_url(url: str) -> str:
    """SQLAlchemy's spelling of `url`, with the psycopg 3 driver DBOS installs."""
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+psycopg://" + url[len(plain):]
    return url


def _write_ahead_log(engine: sa.Engine) -> None:
    """Put a SQLite runs database in write-ahead-log mode, once (the mode is kept in the file,
    so DBOS's connections use it too): a commit appends to the log and syncs it once, where the
    default rollback journal syncs several files, and readers do not block the writer. As
    durable against a killed process as before (synchronous stays FULL); the database must then
    be on a local disk, not a network file system. A database another process holds locked
    just now keeps its mode (the next opener sets it)."""
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA journal_mode=WAL")
    except sa.exc.OperationalError:
        pass


def _create(metadata: sa.MetaData, engine: sa.Engine, tries: int = 5) -> None:
    """Create forge's tables that are missing. Workers starting together race to create them:
    PostgreSQL refuses the loser's CREATE (a duplicate table or type), and it looks again."""
    for attempt in range(tries):
        try:
            metadata.create_all(engine, checkfirst=True)
            return
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError, sa.exc.OperationalError):
            if attempt == tries - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


@dataclass(frozen=True)
class _RunRows:
    """One run's rows in a table of them (the journal, the live transitions: run_id, part,
    seq, then the value): its `part` (1 but for a run stored by an earlier forge)."""

    table: sa.Table
    run_id: str
    part: int = 1


class RunsDatabase:
    """forge's tables in the runs' database, made when first opened."""

    def __init__(self, url: str) -> None:
        self.url = url
        options: dict[str, Any] = {}
        if url.startswith("sqlite"):
            options["connect_args"] = {"timeout": 30}
        self.engine = sa.create_engine(engine_url(url), **options)
        if url.startswith("sqlite"):
            _write_ahead_log(self.engine)
        self._autocommit = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        metadata = sa.MetaData()
        self.idempotency = sa.Table(
            "forge_idempotency", metadata,
            sa.Column("key", sa.Text, primary_key=True),
            sa.Column("fingerprint", sa.Text, nullable=False),
            sa.Column("value", sa.LargeBinary, nullable=False),
            sa.Column("run_id", sa.Text, nullable=False),
            sa.Column("stored_at", sa.Float, nullable=False),
        )
        self.journal = sa.Table(
            "forge_journal", metadata,
            sa.Column("run_id", sa.Text, primary_key=True),
            sa.Column(_PART, sa.Integer, primary_key=True, key="part"),
            sa.Column("seq", sa.Integer, primary_key=True),
            sa.Column("entry", sa.LargeBinary, nullable=False),
        )
        self.claims = sa.Table(
            "forge_claims", metadata,
            sa.Column("key", sa.Text, primary_key=True),
            sa.Column("fingerprint", sa.Text, nullable=False),
            sa.Column("run_id", sa.Text, nullable=False),
            sa.Column("claimed_at", sa.Float, nullable=False),
        )
        self.workers = sa.Table(
            "forge_workers", metadata,
            sa.Column("executor_id", sa.Text, primary_key=True),
            sa.Column("beat_at", sa.Float, nullable=False),
        )
        self.served = sa.Table(  # the loops each worker serves
            "forge_served", metadata,
            sa.Column("executor_id", sa.Text, primary_key=True),
            sa.Column("loop", sa.Text, primary_key=True),
        )
        self.runs = sa.Table(  # what the runs list searches: each run's goal, lowered, next to its id
            "forge_runs", metadata,
            sa.Column("run_id", sa.Text, primary_key=True),
            sa.Column("searched", sa.Text, nullable=False),
            sa.Column("created_at", sa.Float, nullable=False, index=True),
        )
        self.answers = sa.Table(  # each question's one answer (or its timeout, or the run's cancel), once
            "forge_answers", metadata,
            sa.Column("run_id", sa.Text, primary_key=True),
            sa.Column("question", sa.Integer, primary_key=True),
            sa.Column("answer", sa.Text, nullable=True),
            sa.Column("answered_at", sa.Float, nullable=False),
        )
        self.statuses = sa.Table(  # a run's status as a run in a program last wrote it, with its journal
            "forge_status", metadata,
            sa.Column("run_id", sa.Text, primary_key=True),
            sa.Column("event", sa.Text, nullable=False),
        )
        self.chains = sa.Table(  # the runs a worker left waiting once: where they are now
            "forge_chain", metadata,
            sa.Column("run_id", sa.Text, primary_key=True),
            sa.Column("question", sa.Integer, nullable=False),
            sa.Column("status", sa.Text, nullable=False, index=True),
            sa.Column("created_at", sa.Float, nullable=False, index=True),
        )
        self.watches = sa.Table(  # the runs a page follows now, each until a moment it renews
            "forge_watch", metadata,
            sa.Column("run_id", sa.Text, primary_key=True),
            sa.Column("until", sa.Float, nullable=False),
        )
        self.live = sa.Table(  # a watched run's transitions so far, as trace lines: what its page draws
            "forge_live", metadata,
            sa.Column("run_id", sa.Text, primary_key=True),
            sa.Column(_PART, sa.Integer, primary_key=True, key="part"),
            sa.Column("seq", sa.Integer, primary_key=True),
            sa.Column("record", sa.Text, nullable=False),
        )
        _create(metadata, self.engine)

    @_through_outages("reading a side effect's key")
    def lookup(self, key: str) -> tuple[str, bytes, str] | None:
        """The stored `(fingerprint, value, run id)` of `key` (the value a row,
        `forge.durable.serializer`), or None."""
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(self.idempotency.c.fingerprint, self.idempotency.c.value,
                                               self.idempotency.c.run_id)
                                     .where(self.idempotency.c.key == key)).first()
        return None if row is None else (row[0], bytes(row[1]), row[2])

    @_through_outages("storing a side effect's value")
    def store(self, key: str, fingerprint: str, value: bytes, run_id: str) -> None:
        """Store `key` once; a second store of the same key (a recovered run storing again)
        keeps the first."""
        try:
            with self.engine.begin() as connection:
                connection.execute(self.idempotency.insert().values(
                    key=key, fingerprint=fingerprint, value=value, run_id=run_id, stored_at=time.time()))
        except sa.exc.IntegrityError:
            pass

    def append(self, run_id: str, first: int, entries: list[bytes], part: int = 1, status: str | None = None) -> None:
        """Add `entries` (rows, `forge.durable.serializer`) to the journal of `run_id`, numbered from `first`: one
        INSERT statement of all of them, committed on its own (atomic, and one round trip to
        the server rather than a BEGIN, an INSERT and a COMMIT); with `status` (an event's
        JSON), the run's `forge_status` too, in the same transaction."""
        said = None if status is None else self._insert(self.statuses).values(run_id=run_id, event=status) \
            .on_conflict_do_update(index_elements=["run_id"], set_={"event": status})
        self._append_rows(_RunRows(self.journal, run_id, part), first, entries, said)

    @_through_outages("reading a run's status")
    def status_of(self, run_id: str) -> str | None:
        """The event a run in a program last wrote of itself (`forge_status`), or None."""
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(self.statuses.c.event).where(self.statuses.c.run_id == run_id)).first()
        return None if row is None else str(row[0])

    @_through_outages("reading a run's journal")
    def journal_of(self, run_id: str, part: int = 1) -> list[bytes]:
        """The rows of `run_id`'s journal (of its `part`, for a run stored by an
        earlier forge), in order."""
        return [bytes(value) for value in self._rows_of(_RunRows(self.journal, run_id, part))]

    def _append_rows(self, where: _RunRows, first: int, values: list[Any], then: Any = None) -> None:
        """Add `values` to a run's rows `where` in order, numbered from `first`: one INSERT
        statement, committed on its own (with `then`, a statement, in one transaction),
        through an outage of the database (`through_outage`): an INSERT that committed
        before its connection was lost is found there, not doubled.

        Raises:
            DatabaseAway: the database did not answer for `OUTAGE_LIMIT` seconds.
        """
        table, run_id = where.table, where.run_id
        value = table.c[3].name
        rows = [{"run_id": run_id, "part": where.part, "seq": first + n, value: each} for n, each in enumerate(values)]

        def insert() -> None:
            try:
                with self._autocommit.connect() if then is None else self.engine.begin() as connection:
                    if rows:
                        connection.execute(table.insert().values(rows))
                    if then is not None:
                        connection.execute(then)
            except sa.exc.IntegrityError:  # (a retry of a transaction that committed: `then` did too)
                if not self._stored(where, first, len(rows)):
                    raise

        self.through_outage(f"storing run {run_id!r}", insert)

    def _stored(self, where: _RunRows, first: int, count: int) -> bool:
        """Whether rows `first` to `first + count - 1` of the run are stored already (a retried
        INSERT whose first try committed)."""
        table = where.table
        with self.engine.connect() as connection:
            found = connection.execute(sa.select(sa.func.count()).select_from(table).where(
                table.c.run_id == where.run_id, table.c.part == where.part, table.c.seq >= first,
                table.c.seq < first + count)).scalar()
        return found == count

    def through_outage(self, what: str, operation: Callable[[], T]) -> T:
        """`operation()`, tried again while the database is away — a server restarting or
        failing over, a connection dropped, SQLite's "database is locked" — waiting longer
        each time, for at most `OUTAGE_LIMIT` seconds in all; each outage said once in the
        log, and its end.

        Raises:
            DatabaseAway: still away after `OUTAGE_LIMIT` seconds (`what` names the work).
        """
        delay, began = 0.05, time.monotonic()
        while True:
            try:
                value = operation()
            except (sa.exc.OperationalError, sa.exc.InterfaceError) as error:
                away = time.monotonic() - began
                if away >= OUTAGE_LIMIT:
                    raise DatabaseAway(f"the runs' database {shown_url(self.url)} did not answer for "
                                       f"{OUTAGE_LIMIT:g} s ({what}): {_first_line(error)}") from error
                if delay == 0.05:
                    _log.warning("the runs' database %s is away (%s): trying again for up to %g s: %s",
                                 shown_url(self.url), what, OUTAGE_LIMIT, _first_line(error))
                time.sleep(min(delay, max(0.0, OUTAGE_LIMIT - away)))
                delay = min(delay * 2, 2.0)
                continue
            if delay > 0.05:
                _log.warning("the runs' database %s is back (%s) after %.1f s", shown_url(self.url), what,
                             time.monotonic() - began)
            return value

    def _rows_of(self, where: _RunRows) -> list[Any]:
        """The values of a run's rows `where`, in order."""
        table = where.table
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(table.c[3]).where(table.c.run_id == where.run_id,
                                                                  table.c.part == where.part).order_by(table.c.seq))
            return [row[0] for row in rows]

    @_through_outages("claiming a side effect's key")
    def claim(self, key: str, fingerprint: str, run_id: str) -> tuple[str, str]:
        """Claim the side effect `key` for `run_id`, once across every run: the unique key
        decides between runs racing for it. Returns the claim that holds, `(run_id,
        fingerprint)`: this run's own, or the run's that claimed it first."""
        try:
            with self.engine.begin() as connection:
                connection.execute(self.claims.insert().values(key=key, fingerprint=fingerprint, run_id=run_id,
                                                               claimed_at=time.time()))
            return run_id, fingerprint
        except sa.exc.IntegrityError:
            with self.engine.connect() as connection:
                row = connection.execute(sa.select(self.claims.c.run_id, self.claims.c.fingerprint)
                                         .where(self.claims.c.key == key)).first()
            return (run_id, fingerprint) if row is None else (str(row[0]), str(row[1]))

    @_through_outages("releasing a side effect's key")
    def release(self, key: str, run_id: str) -> None:
        """Give up `run_id`'s claim of `key` (its call failed: another run may try)."""
        with self.engine.begin() as connection:
            connection.execute(self.claims.delete().where(self.claims.c.key == key, self.claims.c.run_id == run_id))

    def await_value(self, key: str, owner: str, every: float = 0.05) -> tuple[str, bytes, str] | None:
        """Wait for the run `owner`, which holds the claim of `key`, to store its value, and
        return it; None once the claim is released (its call failed) without a value."""
        while True:
            found = self.lookup(key)
            if found is not None:
                return found
            with self.engine.connect() as connection:
                held = connection.execute(sa.select(self.claims.c.run_id).where(self.claims.c.key == key)).first()
            if held is None or held[0] != owner:
                return self.lookup(key)
            time.sleep(every)

    @_through_outages("a worker's beat")
    def beat(self, executor_id: str) -> None:
        """Say that the worker `executor_id` is alive now."""
        with self.engine.begin() as connection:
            done = connection.execute(self.workers.update().where(self.workers.c.executor_id == executor_id)
                                      .values(beat_at=time.time()))
            if done.rowcount == 0:
                connection.execute(self.workers.insert().values(executor_id=executor_id, beat_at=time.time()))

    @_through_outages("looking for silent workers")
    def silent_workers(self, older_than: float, besides: str) -> list[str]:
        """Workers other than `besides` whose last beat is more than `older_than` seconds old."""
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(self.workers.c.executor_id).where(
                self.workers.c.beat_at < time.time() - older_than, self.workers.c.executor_id != besides))
            return [row[0] for row in rows]

    def note_runs(self, runs: list[tuple[str, str, float]]) -> None:
        """Keep these runs' goals for the runs list's search: (run id, goal, when it was
        created); a run noted already is left as it is."""
        if not runs:
            return
        rows = [{"run_id": valid_text(run_id), "searched": valid_text(f"{run_id}\n{goal}".lower()), "created_at": created}
                for run_id, goal, created in runs]
        with self.engine.begin() as connection:
            connection.execute(self._insert(self.runs).on_conflict_do_nothing(index_elements=["run_id"]), rows)

    def _insert(self, table: sa.Table) -> Any:
        """An INSERT into `table` in this database's dialect, which can say what a conflict does."""
        if self.url.startswith("sqlite"):
            from sqlalchemy.dialects.sqlite import insert
        else:
            from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
        return insert(table)

    def newest_noted(self) -> float | None:
        """When the newest run noted for the search was created; None when none was."""
        with self.engine.connect() as connection:
            value = connection.execute(sa.select(sa.func.max(self.runs.c.created_at))).scalar()
        return None if value is None else float(value)

    def search_runs(self, text: str, limit: int, offset: int) -> list[str]:
        """The ids of the runs noted whose id or goal holds `text` (any case), newest first."""
        pattern = "%" + text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(self.runs.c.run_id)
                                      .where(self.runs.c.searched.like(pattern, escape="\\"))
                                      .order_by(self.runs.c.created_at.desc()).limit(limit).offset(offset))
            return [str(row[0]) for row in rows]

    @_through_outages("storing an answer")
    def answer(self, run_id: str, question: int, answer: str | None) -> bool:
        """Store the answer to `run_id`'s `question` (its JSON; None: the deadline passed),
        once: False when the question had one already."""
        try:
            with self.engine.begin() as connection:
                connection.execute(self.answers.insert().values(run_id=run_id, question=question, answer=answer,
                                                                answered_at=time.time()))
        except sa.exc.IntegrityError:
            return False
        return True

    @_through_outages("reading an answer")
    def answer_of(self, run_id: str, question: int) -> tuple[bool, str | None]:
        """Whether `run_id`'s `question` has its answer, and the answer (None: timed out)."""
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(self.answers.c.answer).where(
                self.answers.c.run_id == run_id, self.answers.c.question == question)).first()
        return (False, None) if row is None else (True, row[0])

    @_through_outages("noting where a run is")
    def chain(self, run_id: str, status: str, question: int | None = None, created_at: float | None = None) -> None:
        """Say that `run_id`, a run a worker left waiting once, is `status` now (and, when
        it parks again, waits on `question`); `created_at` is the run's, given when it first
        parks."""
        values: dict[str, Any] = {"status": status}
        if question is not None:
            values["question"] = question
        with self.engine.begin() as connection:
            done = connection.execute(self.chains.update().where(self.chains.c.run_id == run_id).values(**values))
            if done.rowcount == 0 and question is not None:
                connection.execute(self._insert(self.chains).values(
                    run_id=run_id, question=question, status=status,
                    created_at=created_at if created_at is not None else time.time())
                    .on_conflict_do_update(index_elements=["run_id"], set_=values))

    @_through_outages("reading where a run parked")
    def parked_at(self, run_id: str) -> int | None:
        """The question `run_id` last parked on (`chain` with a question), None when it never
        parked: a run's parking is said here before its workflow ends, so an answer and the
        parking workflow each see the other's write (`forge.durable.workflow`)."""
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(self.chains.c.question).where(self.chains.c.run_id == run_id)).first()
        return None if row is None or row[0] is None else int(row[0])

    def count_chained(self, status: str) -> int:
        """How many runs a worker left waiting once forge last noted in `status` (its index)."""
        with self.engine.connect() as connection:
            return int(connection.execute(sa.select(sa.func.count()).select_from(self.chains)
                                          .where(self.chains.c.status == status)).scalar_one())

    def chained(self, status: str | None = None, limit: int | None = None) -> list[tuple[str, float]]:
        """The runs a worker left waiting once (in `status`, as forge last noted it), newest
        first (the `limit` newest), each with when it was created."""
        query = sa.select(self.chains.c.run_id, self.chains.c.created_at)
        if status is not None:
            query = query.where(self.chains.c.status == status)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as connection:
            return [(str(row[0]), float(row[1])) for row in
                    connection.execute(query.order_by(self.chains.c.created_at.desc()))]

    def watch(self, run_id: str, seconds: float) -> None:
        """Say that someone follows `run_id` for the next `seconds`: while they do, the
        process running it stores the transitions it fires (`forge.durable.live`)."""
        now = time.time()
        with self.engine.begin() as connection:
            connection.execute(self._insert(self.watches).values(run_id=run_id, until=now + seconds)
                               .on_conflict_do_update(index_elements=["run_id"], set_={"until": now + seconds}))
            connection.execute(self.watches.delete().where(self.watches.c.until < now - 3600))  # long unfollowed

    def watched(self, run_ids: list[str]) -> set[str]:
        """Which of `run_ids` someone follows now."""
        if not run_ids:
            return set()
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(self.watches.c.run_id).where(
                self.watches.c.run_id.in_(run_ids), self.watches.c.until >= time.time()))
            return {str(row[0]) for row in rows}

    def append_live(self, run_id: str, first: int, records: list[str]) -> None:
        """Add `records` (trace lines) to what `run_id` has fired so far, numbered from `first`."""
        self._append_rows(_RunRows(self.live, run_id), first, records)

    def live_of(self, run_id: str) -> list[str]:
        """The trace lines stored of `run_id` while it runs, in order."""
        return [str(value) for value in self._rows_of(_RunRows(self.live, run_id))]

    def so_far(self, run_id: str) -> tuple[int, int]:
        """How many calls and transitions `run_id` has stored: what moves while it runs
        (counted, not read: a live page asks four times a second)."""
        with self.engine.connect() as connection:
            calls, fired = (connection.execute(sa.select(sa.func.count()).select_from(table)
                                               .where(table.c.run_id == run_id, table.c.part == 1)).scalar_one()
                            for table in (self.journal, self.live))
        return int(calls), int(fired)

    def forget_live(self, run_id: str) -> None:
        """Drop what `run_id` stored while it ran: it ended, and its trace is published."""
        with self._autocommit.connect() as connection:
            connection.execute(self.live.delete().where(self.live.c.run_id == run_id))

    def live_workers(self, within: float = 5.0) -> list[str]:
        """The workers that beat in the last `within` seconds."""
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(self.workers.c.executor_id).where(
                self.workers.c.beat_at >= time.time() - within))
            return [row[0] for row in rows]

    def serve(self, executor_id: str, loops: list[str]) -> None:
        """Say which loops the worker `executor_id` serves (until it is forgotten)."""
        with self.engine.begin() as connection:
            connection.execute(self.served.delete().where(self.served.c.executor_id == executor_id))
            if loops:
                connection.execute(self.served.insert(), [{"executor_id": executor_id, "loop": loop} for loop in loops])

    def served_loops(self, within: float = 5.0) -> set[str]:
        """The loops the workers that beat in the last `within` seconds serve."""
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(self.served.c.loop).join(
                self.workers, self.workers.c.executor_id == self.served.c.executor_id).where(
                self.workers.c.beat_at >= time.time() - within))
            return {row[0] for row in rows}

    def hand_back(self, executor_id: str) -> None:
        """Say that the worker `executor_id` stopped and left its runs to others: its last
        beat becomes the epoch, so each live worker, and the next to start, finds it silent
        at once and recovers its runs (then forgets it)."""
        with self.engine.begin() as connection:
            done = connection.execute(self.workers.update().where(self.workers.c.executor_id == executor_id)
                                      .values(beat_at=0.0))
            if done.rowcount == 0:
                connection.execute(self.workers.insert().values(executor_id=executor_id, beat_at=0.0))

    def forget_worker(self, executor_id: str) -> None:
        with self.engine.begin() as connection:
            connection.execute(self.served.delete().where(self.served.c.executor_id == executor_id))
            connection.execute(self.workers.delete().where(self.workers.c.executor_id == executor_id))

    def close(self) -> None:
        self.engine.dispose()
