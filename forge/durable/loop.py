"""`DurableLoop`: an `AgentLoop` whose runs survive the process.

    durable = DurableLoop(loop, name="indexer")          # SQLite file forge-runs.sqlite here
    result = durable.run("index the notes", run_id="index-1")

Each run is a DBOS workflow (`forge.durable.workflow`) with its journal in the same database;
DBOS, a library, keeps its workflows in
the database and, when this process starts again, recovers the runs it left unfinished.
There is one DBOS per process, so every DurableLoop of a process shares one database;
each is known by its `name`, which a recovered or queued run uses to find it again.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dbos import DBOS, SetWorkflowID

from forge.agent.observations import LoopState
from forge.durable.answers import Answer, AnswerRefused, Waiting, claim_answer
from forge.durable.database import RunsDatabase, database_url
from forge.durable.forks import fork_input, origin_of, seed_fork
from forge.durable.workflow import ANSWER_TOPIC, EVENT, HOST, LOOPS, QUEUE_NAME, STATE_EVENT, forge_arun, forge_run
from forge.errors import RunNotFound, UsageError
from forge.loop import AgentLoop
from forge.machine.fork import Patch
from forge.machine.journal import ForkOrigin
from forge.machine.trace import TransitionRecord
from forge.result import verified_answer
from forge.tools import Tool

__all__ = ["DurableLoop", "DurableResult", "executor_name", "launch", "shutdown", "wait_for"]


@dataclass(frozen=True, slots=True)
class DurableResult:
    """A durable run as its database has it now.

    `status` is `queued` (for a worker), `running`, `waiting` (see `waiting` for what for),
    `finished`, `cancelled` or `error` (the workflow itself failed: `error` says why): the
    one vocabulary `forge runs list` and `show` use too; when finished, `reason`,
    `outcome` and `summary` are the run's. `trace` is the run's trace, answers and all (a
    person's answer is a transition of the run); `turns` holds it as one list, or, for a
    run stored by an earlier forge, one trace per answer (`trace` then the last one's, and
    `records` all of them numbered on)."""

    run_id: str
    status: str
    turns: Sequence[tuple[TransitionRecord, ...]] = ()
    reason: str | None = None
    outcome: str | None = None
    summary: str | None = None
    waiting: Waiting | None = None
    error: str | None = None
    answers: int = 0
    goal: str | None = None
    loop: str | None = None
    forked_from: ForkOrigin | None = None
    """Where a fork came from (`DurableLoop.fork`); None for a run that is not one."""
    state: LoopState | None = field(default=None, compare=False, repr=False)
    """The conversation as the run left it, once it has finished or waits: what another
    run goes on from (`DurableLoop.run(reply, state=result)`)."""
    continues: str | None = None
    """The run whose conversation this run goes on from (`state=` a `DurableResult`)."""
    legacy: bool = field(default=False, compare=False, repr=False)
    """Stored by an earlier forge, one trace per answer (`turns`), whose transitions under
    way are kept per answer too (`forge.durable.live`)."""

    @property
    def under_way(self) -> int:
        """Under which number the transitions this run is firing now are kept while a page
        follows it (`forge.durable.live`): 1, the run's; for a legacy run, its next trace's."""
        return len(self.turns) + 1 if self.legacy else 1

    @property
    def trace(self) -> tuple[TransitionRecord, ...]:
        return self.turns[-1] if self.turns else ()

    @property
    def records(self) -> list[TransitionRecord]:
        """The whole run: its turns' records one after another, numbered on."""
        whole = [record for each in self.turns for record in each]
        return [replace(record, sequence=number) for number, record in enumerate(whole, start=1)]

    @property
    def answer(self) -> Any:
        """The verified `Finish` answer, when the run finished in success on one; else None."""
        return verified_answer(self.state, self.outcome) if self.status == "finished" else None

    @property
    def question(self) -> str | None:
        """The policy's question, when the run waits for the user's reply (`Answer.text`)."""
        return self.waiting.prompt if self.waiting is not None and self.waiting.state == "input_required" else None

    @classmethod
    def of(cls, run_id: str, workflow_status: str | None, event: Mapping[str, Any] | None,
           error: str | None = None, inputs: Any = None) -> DurableResult:
        """From DBOS's status of the workflow and the run's last published event; `inputs`
        (the workflow's stored arguments) name the loop and goal of a run that has published
        nothing yet (killed before it first waited or ended, or still queued). Its `state` is
        read apart (`has_state`, `with_state`)."""
        event = dict(event or {})
        arguments = list(inputs.get("args") or ()) if isinstance(inputs, dict) else []
        if len(arguments) >= 2:
            event.setdefault("loop", arguments[0])
            event.setdefault("goal", arguments[1])
        if len(arguments) >= 3 and isinstance(arguments[2], dict):
            event.setdefault("forked_from", {k: v for k, v in arguments[2].items() if k not in ("patched", "seeded")})
        legacy = "turns" in event  # stored by an earlier forge: one trace per answer
        turns = _Turns(event["turns"] if legacy else [event["trace"]] if event.get("trace") else ())
        status = str(event.get("status", "queued" if workflow_status == "ENQUEUED" else "running"))
        if workflow_status == "CANCELLED":
            status = "cancelled"
        elif workflow_status == "ERROR":
            status = "error"
        elif workflow_status in ("ENQUEUED", "PENDING") and status == "finished":
            status = "running"
        waiting = Waiting.from_json(event["waiting"]) if status == "waiting" and event.get("waiting") else None
        if len(arguments) >= 4 and isinstance(arguments[3], dict):
            event.setdefault("continues", arguments[3].get("continues"))
        return cls(run_id, status, turns, event.get("reason"), event.get("outcome"), event.get("summary"), waiting,
                   error or event.get("error"), int(event.get("answers", 0)), event.get("goal"), event.get("loop"),
                   ForkOrigin.from_json(event["forked_from"]) if event.get("forked_from") else None,
                   None, event.get("continues"), legacy)

    @property
    def has_state(self) -> bool:
        """Whether the run has a state to read (`STATE_EVENT`): it finished, or it waits."""
        return self.status in ("finished", "waiting")

    def with_state(self, value: Any) -> DurableResult:
        """This result with its `STATE_EVENT`'s value as its state, kept only when it is a
        LoopState (a value that could not be read back in this process is not one)."""
        return replace(self, state=value) if self.has_state and isinstance(value, LoopState) else self


class _Turns(Sequence[tuple[TransitionRecord, ...]]):
    """A stored run's turns, read from their JSON when first looked at: waiting for a run
    polls its status, and most polls never look at the records."""

    def __init__(self, data: Sequence[Sequence[Mapping[str, Any]]]) -> None:
        self._data: Sequence[Sequence[Mapping[str, Any]]] | None = data
        self._turns: tuple[tuple[TransitionRecord, ...], ...] = ()

    def _read(self) -> tuple[tuple[TransitionRecord, ...], ...]:
        if self._data is not None:
            self._turns = tuple(tuple(TransitionRecord.from_json(line) for line in turn) for turn in self._data)
            self._data = None
        return self._turns

    def __len__(self) -> int:
        return len(self._data) if self._data is not None else len(self._turns)

    def __getitem__(self, index: Any) -> Any:
        return self._read()[index]

    def __eq__(self, other: object) -> bool:
        return tuple(self._read()) == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._read())


def launch(db: str | os.PathLike[str] | None = None, *, executor_id: str | None = None,
           concurrency: int | None = None, worker: bool = False) -> str:
    """Start this process's DBOS on the database `db` (see `database_url`), once; later
    calls with the same database do nothing. A `worker` takes runs from forge's queue, at
    most `concurrency` at a time; other processes only submit to it. Launching recovers
    the runs this executor (`executor_id`, default "local") left unfinished, so make every
    DurableLoop the runs may name before calling it.

    Called where an event loop runs (an `async def` program), it launches from a thread of
    its own: DBOS refuses its sync API on an event loop's thread.

    Raises:
        UsageError: DBOS was launched here already, on another database.
    """
    url: str = _off_the_event_loop(_launch, db, executor_id, concurrency, worker)
    return url


def _launch(db: str | os.PathLike[str] | None, executor_id: str | None, concurrency: int | None, worker: bool) -> str:
    url = database_url(db)
    if HOST.url is not None:
        if HOST.url != url:
            raise UsageError(f"this process runs durable loops on {HOST.url}; one process has one runs "
                             f"database (DBOS is one per process), not also {url}")
        return url
    HOST.stopping.clear()
    # SQLite's journal mode is set before DBOS connects; a PostgreSQL database may be DBOS's to create
    early = RunsDatabase(url) if url.startswith("sqlite") else None
    config: dict[str, Any] = {"name": "forge", "system_database_url": url, "log_level": "WARNING",
                              "notification_listener_polling_interval_sec": 0.05}
    if executor_id is not None:
        config["executor_id"] = executor_id
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
    _stop_at_exit()
    return url


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
    left: list[str] = _off_the_event_loop(_shutdown, grace)
    return left


def _shutdown(grace: float = 0.0) -> list[str]:
    if HOST.url is None:
        return []
    HOST.stopping.set()
    for run_id, ended in list(HOST.waiting.items()):
        DBOS.send(run_id, {"kind": "process stopping"}, ANSWER_TOPIC)  # an answer no wait accepts
        ended.wait(timeout=10)
    until = time.monotonic() + grace
    while HOST.turns.under_way() and time.monotonic() < until:
        time.sleep(0.02)
    left = [status.workflow_id for status in DBOS.list_workflows(
        status="PENDING", executor_id=DBOS.executor_id, load_input=False, load_output=False)]
    if HOST.database is not None:
        HOST.database.close()
    HOST.url = HOST.database = HOST.queue = None
    DBOS.destroy(destroy_registry=False)
    return left


def executor_name() -> str:
    """A name for this process as a DBOS executor: host, process id."""
    return f"forge-worker-{socket.gethostname()}-{os.getpid()}"


class DurableLoop:
    """Runs of `loop` that survive the process: `run`, `start`, `submit` (to workers),
    `resume` a waiting run with an `Answer`, `status`, `cancel`.

    `name` identifies the loop to recovered and queued runs: every process that may run
    them (this one after a restart, each `forge worker`) makes a DurableLoop of that name.
    `db` is the runs' database: a SQLite path (default `forge-runs.sqlite` in the working
    directory) or a `postgresql://` URL. `extra_tools` are tools a person may add to a run
    waiting in `capability_gap` (`Answer.add_tool(name)`).

    A durable run's policy must decide from what it is given (goal and LoopState): on
    recovery its recorded decisions are handed back without calling it, so a policy that
    counts its own calls (ScriptedPolicy) would lose its place. Intents, tool results and
    errors are stored with pickle.

    Raises:
        UsageError: a blank name, a name already taken in this process, or an extra tool
            whose name the loop already has.
    """

    def __init__(self, loop: AgentLoop, name: str = "forge", db: str | os.PathLike[str] | None = None, *,
                 extra_tools: Iterable[Tool] = ()) -> None:
        if not isinstance(name, str) or not name.strip():
            raise UsageError("a DurableLoop needs a non-blank name: recovered runs find their loop by it")
        if name in LOOPS:
            raise UsageError(f"a DurableLoop named {name!r} exists in this process already")
        self.loop, self.name, self.db = loop, name, database_url(db)
        self.extra_tools: dict[str, Tool] = {}
        self._with_tools: dict[tuple[str, ...], AgentLoop] = {}
        for tool in extra_tools:
            if tool.name in {t.name for t in loop.tools}:
                raise UsageError(f"extra tool {tool.name!r}: the loop has a tool of that name already")
            self.extra_tools[tool.name] = tool
        LOOPS[name] = self

    def close(self) -> None:
        """Forget this loop in this process (its stored runs stay)."""
        LOOPS.pop(self.name, None)

    def __enter__(self) -> DurableLoop:
        self.launch()
        return self

    def __exit__(self, *exc: object) -> None:
        """Forget the loop here and, when it was the last one this process had, shut DBOS
        down (see `shutdown`): `with DurableLoop(...) as durable:` ends with nothing left
        running, and a run waiting for an answer stays waiting in the database."""
        self.close()
        if not LOOPS:
            shutdown()

    def launch(self) -> None:
        """Start DBOS on this loop's database (see `launch`); run, start and the rest call it."""
        launch(self.db)

    @property
    def database(self) -> RunsDatabase:
        """The runs' database this process launched on (forge's own tables in it)."""
        if HOST.database is None:
            raise UsageError("durable runs are not launched in this process: call launch() or DurableLoop.launch()")
        return HOST.database

    def loop_for(self, extra_tools: tuple[str, ...]) -> AgentLoop:
        """The loop a turn runs: this loop, plus the extra tools answers added (made once
        per distinct set, not per turn)."""
        if not extra_tools:
            return self.loop
        made = self._with_tools.get(extra_tools)
        if made is None:
            made = self._with_tools[extra_tools] = self.loop.replace(
                tools=[*self.loop.tools, *(self.extra_tools[name] for name in extra_tools)])
        return made

    def start(self, goal: str, run_id: str | None = None, state: LoopState | DurableResult | None = None) -> str:
        """Start a durable run of `goal` in this process and return its id at once. Starting
        an id that exists does not start it again: it is the same run. `state` makes it the
        next turn of a conversation (see `run`).

        Raises:
            ValueError: a blank goal or run id, or a `state` that cannot be gone on from.
        """
        run_id = _checked(goal, run_id)
        conversation = _conversation(state)
        self.launch()
        if DBOS.get_workflow_status(run_id) is None:
            with SetWorkflowID(run_id):
                if conversation is None:
                    DBOS.start_workflow(forge_run, self.name, goal)
                else:
                    DBOS.start_workflow(forge_run, self.name, goal, None, conversation)
        return run_id

    def submit(self, goal: str, run_id: str | None = None, state: LoopState | DurableResult | None = None) -> str:
        """Put a run of `goal` on forge's queue, for a `forge worker` to take; return its id.
        `state` is as for `run`."""
        run_id = _checked(goal, run_id)
        conversation = _conversation(state)
        self.launch()
        with SetWorkflowID(run_id):
            if conversation is None:
                HOST.queue.enqueue(forge_run, self.name, goal)
            else:
                HOST.queue.enqueue(forge_run, self.name, goal, None, conversation)
        return run_id

    def run(self, goal: str, run_id: str | None = None, timeout: float | None = None, *,
            state: LoopState | DurableResult | None = None) -> DurableResult:
        """Run `goal` durably until it finishes or waits for an answer (see `resume`). With
        the `run_id` of a run that exists, wait for that run instead of starting another.

        `state` makes the run the next turn of a conversation: an earlier durable run's
        result (its `DurableResult`, whose run this one `continues`) or a `LoopState`. The
        run goes on from its observations and messages, as `AgentLoop.run(goal, state=...)`.

        Raises:
            TimeoutError: `timeout` seconds passed first (the run goes on).
            ValueError: `state` is a result that has not finished or waits, or one that
                ended in a fatal error.
        """
        return self.wait(self.start(goal, run_id, state), timeout)

    async def astart(self, goal: str, run_id: str | None = None,
                     state: LoopState | DurableResult | None = None) -> str:
        """`start`, on DBOS's async API: the run's turns are `await loop.arun(...)` (so the
        loop's tools, policy and verify may be `async def`), and nothing here blocks the
        event loop. The same run, recovered the same way, as a sync one.

        Raises:
            ValueError: as `start`.
        """
        run_id = _checked(goal, run_id)
        conversation = _conversation(state)
        asked = [t.name for t in self.loop.tools if t.on_crash == "ask"]
        if asked:
            raise UsageError(f"tool {asked[0]!r} says on_crash='ask': a call in doubt is asked about on the sync "
                             "path only; run it with DurableLoop.run, or give the tool on_crash='retry'")
        self.launch()
        if await DBOS.get_workflow_status_async(run_id) is None:
            with SetWorkflowID(run_id):
                await DBOS.start_workflow_async(forge_arun, self.name, goal, None, conversation)
        return run_id

    async def arun(self, goal: str, run_id: str | None = None, timeout: float | None = None, *,
                   state: LoopState | DurableResult | None = None) -> DurableResult:
        """`run`, awaited: `await durable.arun(goal, run_id=...)` (see `astart`).

        Raises:
            TimeoutError: `timeout` seconds passed first (the run goes on).
            ValueError: as `run`.
        """
        return await self.await_for(await self.astart(goal, run_id, state), timeout)

    async def astatus(self, run_id: str) -> DurableResult:
        """`status`, awaited. Raises RunNotFound (a LookupError) for an unknown run id."""
        self.launch()
        status = await DBOS.get_workflow_status_async(run_id)
        if status is None:
            raise RunNotFound(f"no durable run {run_id!r} in {self.db}")
        event = await DBOS.get_event_async(run_id, EVENT, timeout_seconds=0)
        result = DurableResult.of(run_id, status.status, event, _error_of(status), status.input)
        if not result.has_state:
            return result
        return result.with_state(await DBOS.get_event_async(run_id, STATE_EVENT, timeout_seconds=0))

    async def await_for(self, run_id: str, timeout: float | None = None, answers: int = 0) -> DurableResult:
        """`wait`, awaited: until the run finishes, or waits having had `answers` answers.

        Raises:
            TimeoutError: `timeout` seconds passed first.
            RunNotFound: (a LookupError) no such run.
        """
        import asyncio

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            result = await self.astatus(run_id)
            if _settled(result, answers):
                return result
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id!r} is still {result.status} after {timeout} s")
            await asyncio.sleep(0.02)

    async def aresume(self, run_id: str, answer: Answer, timeout: float | None = None) -> DurableResult:
        """`resume`, awaited. Raises AnswerRefused as `resume` does."""
        result = await self.astatus(run_id)
        bound = self._bound(run_id, result, answer)
        await DBOS.send_async(run_id, bound.to_json(), ANSWER_TOPIC)
        return await self.await_for(run_id, timeout, answers=result.answers + 1)

    def status(self, run_id: str) -> DurableResult:
        """The run as stored now. Raises RunNotFound (a LookupError) for an unknown run id."""
        self.launch()
        status = DBOS.get_workflow_status(run_id)
        if status is None:
            raise RunNotFound(f"no durable run {run_id!r} in {self.db}")
        event = DBOS.get_event(run_id, EVENT, timeout_seconds=0)
        result = DurableResult.of(run_id, status.status, event, _error_of(status), status.input)
        if not result.has_state:
            return result
        return result.with_state(DBOS.get_event(run_id, STATE_EVENT, timeout_seconds=0))

    def wait(self, run_id: str, timeout: float | None = None, answers: int = 0) -> DurableResult:
        """Wait until the run finishes, or waits having had at least `answers` answers.

        Raises:
            TimeoutError: `timeout` seconds passed first.
            RunNotFound: (a LookupError) no such run.
        """
        return wait_for(self.status, run_id, timeout, answers)

    def resume(self, run_id: str, answer: Answer, timeout: float | None = None) -> DurableResult:
        """Answer a waiting run and wait for what it does next (finish, or wait again).

        The answer is bound to the question the run waits on now: sent twice, or at the
        same moment as another answer, only one is taken, and the others are refused.

        Raises:
            AnswerRefused: the run is not waiting, or the answer does not fit what it waits
                for (another call's fingerprint, an unknown tool, an earlier question), or
                the question was answered already; nothing was sent.
        """
        result = self.status(run_id)
        bound = self._bound(run_id, result, answer)
        DBOS.send(run_id, bound.to_json(), ANSWER_TOPIC)
        return self.wait(run_id, timeout, answers=result.answers + 1)

    def _bound(self, run_id: str, result: DurableResult, answer: Answer) -> Answer:
        """`answer`, bound to the question the run waits on, checked, and claimed (once
        across every process).

        Raises:
            AnswerRefused: as `resume`.
        """
        if result.status != "waiting" or result.waiting is None:
            raise AnswerRefused(f"run {run_id!r} is {result.status}, not waiting for an answer")
        bound = answer if answer.question else answer.to(result.waiting)
        bound.check(result.waiting, {t.name for t in self.loop.tools}, set(self.extra_tools))
        claim_answer(self.database, run_id, result.waiting)
        return bound

    def fork(self, source: str, /, at: int, patch: Patch | None = None, run_id: str | None = None) -> str:
        """Start a new durable run in this database that is the stored run `source` up to
        transition `at`, with `patch` replacing the outcome recorded there, then live (as
        `AgentLoop.fork`: at any transition, after a person's answers too); return the new
        run's id (`run_id`, default random). Nothing `source` did before `at` is done again; `source` itself is
        only read. The fork is a durable run like any other: crash-safe, and answered,
        waited for and shown the same way; its `DurableResult.forked_from` says where it
        came from. Forking again into the id of the same fork is the same run.

        Raises:
            RunNotFound: (a LookupError) no run `source`.
            PatchRefused: (a ValueError) as `AgentLoop.fork`; also when `at` lies past
                the first turn of a run stored by an earlier forge (one trace per answer).
                Nothing was stored.
            UsageError: `run_id` names a run that is not this fork.
        """
        self.launch()
        parent = self.status(source)
        new = _checked(parent.goal or "fork", run_id)
        found = DBOS.list_workflows(workflow_ids=[new], load_output=False)
        if found:
            existing = origin_of(found[0].input)
            if existing is None or (existing.run_id, existing.transition) != (source, at):
                raise UsageError(f"run {new!r} exists already, and is not a fork of {source!r} at {at}; "
                                 "fork into a new run id")
            return new
        plan = seed_fork(self.database, source, parent.turns, at, patch, {t.name: t for t in self.loop.tools}, new)
        with SetWorkflowID(new):
            DBOS.start_workflow(forge_run, self.name, plan.goal, fork_input(plan))
        return new

    def cancel(self, run_id: str) -> None:
        """Cancel a run: it stops at its next step and runs no more tools."""
        self.launch()
        DBOS.cancel_workflow(run_id)


def wait_for(status: Callable[[str], DurableResult], run_id: str, timeout: float | None, answers: int = 0,
             every: float = 0.02) -> DurableResult:
    """Poll `status(run_id)` until the run finishes, or waits having had `answers` answers.

    Raises:
        TimeoutError: `timeout` seconds passed first.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        result = status(run_id)
        if _settled(result, answers):
            return result
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id!r} is still {result.status} after {timeout} s")
        time.sleep(every)


def _conversation(state: LoopState | DurableResult | None) -> dict[str, Any] | None:
    """What a run that goes on from `state` is started with: the state, and the run it
    continues when `state` is a stored run's result.

    Raises:
        ValueError: a result with no state to go on from (still running, cancelled, failed),
            a state a fatal error ended, or something that is neither.
    """
    if state is None:
        return None
    continues = None
    if isinstance(state, DurableResult):
        if state.state is None:
            raise UsageError(f"run {state.run_id!r} is {state.status}: a conversation goes on from a run that has "
                             "finished or waits")
        continues, state = state.run_id, state.state
    if not isinstance(state, LoopState):
        raise UsageError(f"state must be a LoopState or a DurableResult, got {type(state).__name__}")
    state.continued()  # refuses, naming why, a state a fatal error ended
    return {"state": state, "continues": continues}


def _off_the_event_loop(function: Callable[..., Any], *arguments: Any) -> Any:
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


def _settled(result: DurableResult, answers: int) -> bool:
    """Whether a waiter is done: the run ended, or waits having had `answers` answers."""
    return result.status in ("finished", "cancelled", "error") or (result.status == "waiting"
                                                                    and result.answers >= answers)


def _checked(goal: str, run_id: str | None) -> str:
    if not isinstance(goal, str) or not goal.strip():
        raise UsageError("goal must be a non-blank string")
    if run_id is None:
        return os.urandom(16).hex()
    if not isinstance(run_id, str) or not run_id.strip():
        raise UsageError(f"run_id must be a non-blank string, got {run_id!r}")
    return run_id


def _error_of(status: Any) -> str | None:
    error = getattr(status, "error", None)
    return None if error is None else f"{type(error).__name__}: {error}"
