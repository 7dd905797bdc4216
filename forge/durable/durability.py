"""Durability, a capability of an `AgentLoop`: `loop.durable(name, db)` returns its
`Durable`, whose runs survive the process.

It holds the verbs that need the loop's code (`start`, `run`, `submit`, `fork` into this
process); reading, waiting for, answering and cancelling go through the one client of
stored runs (`forge.durable.runs.StoredRuns`), as `forge runs` and `forge ui` do. Each run is
one DBOS workflow (`forge.durable.workflow`) with its journal in the same database; DBOS
recovers, when the process starts again, the runs it left unfinished. Async forms run the
same code: `astart` starts the workflow on DBOS's async API (the run is then `await
loop.arun(...)` on the caller's event loop), the async reads and answers are the sync ones
in a worker thread. `DurableLoop` is the name of earlier releases, deprecated.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dbos import DBOS, SetWorkflowID

from forge.agent.observations import LoopState
from forge.durable.answers import Answer
from forge.durable.database import RunsDatabase, database_url
from forge.durable.forks import fork_input
from forge.durable.host import launch, shutdown
from forge.durable.result import DurableResult
from forge.durable.workflow import HOST, LOOPS, POLLS, Loop, forge_arun, forge_run
from forge.errors import UsageError
from forge.machine.fork import Patch
from forge.records.wire import encode
from forge.tools import Tool

if TYPE_CHECKING:
    from forge.durable.runs import StoredRuns

__all__ = ["Durable", "DurableLoop", "conversation"]


class Durable:
    """The durable runs of `loop` (see the module). `name` identifies the loop to recovered
    and queued runs: every process that may run them (this one after a restart, each
    `forge worker`) attaches durability of that name, and one process has one of each.
    `db` is the runs' database: a SQLite path (default `forge-runs.sqlite` in the working
    directory) or a `postgresql://` URL. `extra_tools` are tools a person may add to a run
    waiting in `capability_gap` (`Answer.add_tool(name)`).

    A durable run's policy must decide from what it is given (goal and LoopState): on
    recovery its recorded decisions are handed back without calling it, so a policy that
    counts its own calls (ScriptedPolicy) would lose its place. Intents, tool results,
    errors and answers are stored as JSON, in forge's wire form (`forge.records.wire`): a
    tool result JSON cannot hold needs the loop's codec (`AgentLoop(codec=...)`).

    Raises:
        UsageError: a blank name, a name already taken in this process, or an extra tool
            whose name the loop already has.
    """

    def __init__(self, loop: Loop, name: str = "forge", db: str | os.PathLike[str] | None = None, *,
                 extra_tools: Iterable[Tool] = ()) -> None:
        if not isinstance(name, str) or not name.strip():
            raise UsageError("a durable loop needs a non-blank name: recovered runs find their loop by it")
        if name in LOOPS:
            raise UsageError(f"a durable loop named {name!r} exists in this process already")
        self.loop, self.name, self.db = loop, name, database_url(db)
        self.extra_tools: dict[str, Tool] = {}
        self._with_tools: dict[tuple[str, ...], Loop] = {}
        self._runs: StoredRuns | None = None
        for tool in extra_tools:
            if tool.name in {t.name for t in loop.tools}:
                raise UsageError(f"extra tool {tool.name!r}: the loop has a tool of that name already")
            self.extra_tools[tool.name] = tool
        LOOPS[name] = self

    def close(self) -> None:
        """Forget this loop in this process (its stored runs stay)."""
        LOOPS.pop(self.name, None)
        if self._runs is not None:
            self._runs.close()
            self._runs = None

    def __enter__(self) -> Durable:
        self.launch()
        return self

    def __exit__(self, *exc: object) -> None:
        """Forget the loop here and, when it was the last one this process had, shut DBOS
        down (see `shutdown`): `with loop.durable(...) as runs:` ends with nothing left
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
            raise UsageError("durable runs are not launched in this process: call launch() on the loop's durability")
        return HOST.database

    @property
    def runs(self) -> StoredRuns:
        """The client of the runs' database (`StoredRuns`), opened once DBOS is launched here."""
        if self._runs is None:
            from forge.durable.runs import StoredRuns

            self.launch()
            self._runs = StoredRuns(self.db, codec=self.loop.codec)
        return self._runs

    def loop_for(self, extra_tools: tuple[str, ...]) -> Loop:
        """The loop a run goes on with: this loop, plus the extra tools answers added (made
        once per distinct set)."""
        if not extra_tools:
            return self.loop
        made = self._with_tools.get(extra_tools)
        if made is None:
            made = self._with_tools[extra_tools] = self.loop.replace(
                tools=[*self.loop.tools, *(self.extra_tools[name] for name in extra_tools)])
        return made

    def start(self, goal: str, run_id: str | None = None, state: LoopState | DurableResult | None = None) -> str:
        """Start a durable run of `goal` in this process and return its id at once. Starting
        an id that exists does not start it again: it is the same run. `state` makes it go on
        from an earlier run's conversation (see `run`).

        Raises:
            ValueError: a blank goal or run id, or a `state` that cannot be gone on from.
        """
        run_id = _checked(goal, run_id)
        going_on = conversation(state, self.loop.codec)
        self.launch()
        if DBOS.get_workflow_status(run_id) is None:
            with SetWorkflowID(run_id):
                DBOS.start_workflow(forge_run, self.name, goal, None, going_on, POLLS)
        return run_id

    async def astart(self, goal: str, run_id: str | None = None,
                     state: LoopState | DurableResult | None = None) -> str:
        """`start`, on DBOS's async API: the run is `await loop.arun(...)` on this event loop
        (so the loop's tools, policy and verify may be `async def`), and nothing here blocks
        it. The same run, recovered the same way, as a sync one.

        Raises:
            ValueError: as `start`.
            UsageError: a tool says `on_crash="ask"` (asked about on the sync path only).
        """
        run_id = _checked(goal, run_id)
        going_on = conversation(state, self.loop.codec)
        asked = [t.name for t in self.loop.tools if t.on_crash == "ask"]
        if asked:
            raise UsageError(f"tool {asked[0]!r} says on_crash='ask': a call in doubt is asked about on the sync "
                             "path only; run it with run(), or give the tool on_crash='retry'")
        await asyncio.to_thread(self.launch)
        if await DBOS.get_workflow_status_async(run_id) is None:
            with SetWorkflowID(run_id):
                await DBOS.start_workflow_async(forge_arun, self.name, goal, None, going_on, POLLS)
        return run_id

    def run(self, goal: str, run_id: str | None = None, timeout: float | None = None, *,
            state: LoopState | DurableResult | None = None) -> DurableResult:
        """Run `goal` durably until it finishes or waits for an answer (see `resume`). With
        the `run_id` of a run that exists, wait for that run instead of starting another.

        `state` makes the run go on from a conversation: an earlier durable run's result
        (its `DurableResult`, whose run this one `continues`) or a `LoopState`. The run goes
        on from its observations and messages, as `AgentLoop.run(goal, state=...)`.

        Raises:
            TimeoutError: `timeout` seconds passed first (the run goes on).
            ValueError: `state` is a result that has not finished or waits, or one that
                ended in a fatal error.
        """
        return self.wait(self.start(goal, run_id, state), timeout)

    async def arun(self, goal: str, run_id: str | None = None, timeout: float | None = None, *,
                   state: LoopState | DurableResult | None = None) -> DurableResult:
        """`run`, awaited: `await runs.arun(goal, run_id=...)` (see `astart`)."""
        return await self.await_for(await self.astart(goal, run_id, state), timeout)

    def submit(self, goal: str, run_id: str | None = None, state: LoopState | DurableResult | None = None) -> str:
        """Put a run of `goal` on forge's queue, for a `forge worker` to take; return its id.
        `state` is as for `run`.

        Raises:
            UsageError: as `StoredRuns.submit`, or as `start`.
        """
        run_id = _checked(goal, run_id)
        going_on = conversation(state, self.loop.codec)
        return self.runs.submit(self.name, goal, run_id, going_on)

    def fork(self, source: str, /, at: int, patch: Patch | None = None, run_id: str | None = None) -> str:
        """Start, in this process, a new durable run that is the stored run `source` up to
        transition `at`, with `patch` replacing the outcome recorded there, then live; return
        its id. As `StoredRuns.fork`, which queues it for a worker instead; a patched
        decision is checked against this loop's tools.

        Raises:
            RunNotFound, PatchRefused, UsageError: as `StoredRuns.fork`.
        """
        new, plan, _ = self.runs.fork_plan(source, at, patch, run_id, {t.name: t for t in self.loop.tools})
        if plan is not None:
            with SetWorkflowID(new):
                DBOS.start_workflow(forge_run, self.name, plan.goal, fork_input(plan), None, POLLS)
        return new

    def status(self, run_id: str) -> DurableResult:
        """The run as stored now. Raises RunNotFound (a LookupError) for an unknown run id."""
        return self.runs.get(run_id)

    def wait(self, run_id: str, timeout: float | None = None, answers: int = 0) -> DurableResult:
        """Wait until the run finishes, or waits having had at least `answers` answers.

        Raises:
            TimeoutError: `timeout` seconds passed first.
            RunNotFound: (a LookupError) no such run.
        """
        return self.runs.wait(run_id, timeout, answers, every=0.02)  # this process runs it: ask often

    def resume(self, run_id: str, answer: Answer, timeout: float | None = None) -> DurableResult:
        """Answer a waiting run and wait for what it does next (finish, or wait again); see
        `StoredRuns.resume`.

        Raises:
            AnswerRefused: as `StoredRuns.resume`; nothing was sent.
        """
        answered = self.runs.resume(run_id, answer)
        return self.wait(run_id, timeout, answers=answered.answers + 1)

    def cancel(self, run_id: str) -> None:
        """Cancel a run: it stops at its next step and runs no more tools."""
        self.runs.cancel(run_id)

    async def astatus(self, run_id: str) -> DurableResult:
        """`status`, awaited (in a worker thread)."""
        return await asyncio.to_thread(self.status, run_id)

    async def await_for(self, run_id: str, timeout: float | None = None, answers: int = 0) -> DurableResult:
        """`wait`, awaited (in a worker thread)."""
        return await asyncio.to_thread(self.wait, run_id, timeout, answers)

    async def aresume(self, run_id: str, answer: Answer, timeout: float | None = None) -> DurableResult:
        """`resume`, awaited (in a worker thread)."""
        return await asyncio.to_thread(self.resume, run_id, answer, timeout)


def conversation(state: LoopState | DurableResult | None, codec: Any = None) -> dict[str, Any] | None:
    """What a run that goes on from `state` is started with: the state (in the wire form,
    with the loop's `codec`), and the run it continues when `state` is a stored run's result.

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
    return {"state": encode(state, codec), "continues": continues}


def _checked(goal: str, run_id: str | None) -> str:
    from forge.durable.runs import new_run_id

    if not isinstance(goal, str) or not goal.strip():
        raise UsageError("goal must be a non-blank string")
    return new_run_id(run_id)


class DurableLoop(Durable):
    """Deprecated: `loop.durable(name, db, extra_tools=...)` makes the same `Durable`."""

    def __init__(self, loop: Loop, name: str = "forge", db: str | os.PathLike[str] | None = None, *,
                 extra_tools: Iterable[Tool] = ()) -> None:
        warnings.warn("DurableLoop(loop, name, db) is deprecated: durability is a capability of the loop, "
                      "loop.durable(name, db) returns the same runs", DeprecationWarning, stacklevel=2)
        super().__init__(loop, name, db, extra_tools=extra_tools)
