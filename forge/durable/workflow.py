"""The durable run itself: a DBOS workflow per run, `forge_run(loop_name, goal)`, and for a
run a worker took from the queue one more per answer (`forge_resume`, below).

The workflow is one `AgentLoop.run` whose performer keeps the run's journal in the runs'
database (`forge.durable.performer`): a recovered workflow replays it and goes on live where
it ends. When the run reaches a needs-input state (any terminal state with
`outcome = "needs_input"`, the built-in ones and a definition's own), the performer asks
(`forge.machine.asking`): the workflow publishes what the run needs and waits durably
(`DBOS.recv`) for an `Answer`, which the journal keeps as the outcome of that call; the run
goes on in the same run, with one journal and one trace however many answers it takes. A
tool that was running at a crash and says `on_crash="ask"` waits the same way, in
`in_doubt`. The only DBOS operations of a run are its events (what it publishes), its waits
for answers and the deadline of a wait that has one; a recovered run makes them again in
the same order (DBOS answers them from what it recorded).

A run a worker took from forge's queue (`parks`: every enqueued run) does not wait in its
workflow: it publishes what it waits for and *parks* — its workflow ends (`Parked`), holding
no worker slot and no thread. The answer, stored once in `forge_answers`, queues
`forge_resume(..., run_id, question)` with the id `RUN~N` (`continuation_id`), which runs
the same run again from its journal (calling nothing), takes the answer and goes on live;
a question with a deadline queues it delayed to the deadline, and whichever comes first
claims the question. Readers follow a run's workflows question by question
(`forge.durable.runs.StoredRuns`), so a run is still one run: one id, one journal, one trace.

What the workflow publishes, as the DBOS event `run` (read by any process): `status`
(running / waiting / finished), the run's `trace` as v2 JSON, and when waiting, what for.
(Runs stored before answers were calls of the run published one trace per answer; they
stay readable, `forge.durable.result`.)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from dbos import DBOS, SetEnqueueOptions, SetWorkflowID

from forge.durable.answers import CANCELLED, Answer, AnswerRefused, Waiting
from forge.durable.database import RunsDatabase
from forge.durable.idempotency import StoredRegistry
from forge.durable.live import LiveRuns
from forge.durable.performer import DurablePerformer, ForkSeed, ProcessStopping, StoredCalls, WorkerHooks
from forge.durable.result import StoredChild
from forge.machine.asking import fingerprint_of
from forge.machine.child import finished_children, loop_at
from forge.machine.run import Run
from forge.machine.start import RunStart
from forge.records.journal import ForkOrigin
from forge.records.tally import Timing, timing
from forge.records.trace import error_text
from forge.records.wire import decode, encode
from forge.tools import Tool

if TYPE_CHECKING:
    from forge.agent.observations import LoopState
    from forge.records.definition import MachineDefinition
    from forge.records.journal import Journal
    from forge.result import LoopResult
    from forge.spec import LoopSpec

__all__ = ["ANSWER_TOPIC", "ASYNC_RESUME_NAME", "ASYNC_WORKFLOW_NAME", "EVENT", "HOST", "LOOPS", "POLLS", "QUEUE_NAME",
           "RESUMES", "RESUME_NAME", "STATE_EVENT", "STOPPING", "WAITING_HERE", "WORKFLOW_NAME", "Host", "HostedLoop",
           "Loop", "ProcessStopping", "continuation_id", "forge_arun", "forge_aresume", "forge_resume", "forge_run"]

WORKFLOW_NAME = "forge_run"
ASYNC_WORKFLOW_NAME = "forge_arun"
RESUME_NAME = "forge_resume"
ASYNC_RESUME_NAME = "forge_aresume"
RESUMES = {WORKFLOW_NAME: RESUME_NAME, ASYNC_WORKFLOW_NAME: ASYNC_RESUME_NAME, RESUME_NAME: RESUME_NAME,
           ASYNC_RESUME_NAME: ASYNC_RESUME_NAME}
"""The workflow that takes a parked run on, by the name of the workflow it parked in."""
QUEUE_NAME = "forge"
EVENT = "run"
POLLS = "poll"
"""`forge_run`'s `parks` for a run started in a program: it waits there (see `forge_run`)."""
STATE_EVENT = "state"
"""The DBOS event holding the run's `LoopState` as it waits, or as it ended (wire form)."""
ANSWER_TOPIC = "forge_answer"


class Loop(Protocol):
    """What the durable layer uses of a `forge.AgentLoop` (a protocol, so that durability,
    which a loop attaches to itself with `loop.durable(...)`, sits below the loop)."""

    @property
    def tools(self) -> tuple[Tool, ...]: ...

    @property
    def definition(self) -> MachineDefinition: ...

    @property
    def spec(self) -> LoopSpec: ...

    @property
    def codec(self) -> Any: ...

    def replace(self, **changes: Any) -> Loop: ...

    def result(self, run: Run) -> LoopResult: ...

    def run(self, goal: RunStart) -> LoopResult: ...

    async def arun(self, goal: RunStart) -> LoopResult: ...


class HostedLoop(Protocol):
    """What the workflow uses of a loop's durability (`forge.durable.durability.Durable`; a
    protocol, so the workflow sits below the durability that registers itself here)."""

    @property
    def name(self) -> str: ...

    @property
    def loop(self) -> Loop: ...

    @property
    def extra_tools(self) -> Mapping[str, Tool]: ...

    @property
    def database(self) -> RunsDatabase: ...

    def loop_for(self, extra_tools: tuple[str, ...]) -> Loop: ...


@dataclass(eq=False)
class Host:
    """What this process hosts of durable runs, the one process-wide value forge keeps for
    them (DBOS itself is one per process): the loops it can run by name (a recovered or
    dequeued run names its loop: what DBOS's registration of `forge_run` needs), what
    `launch` opened (the runs database's URL and forge's tables in it, and forge's queue),
    whether it is ready to run one (`ready`) and whether `shutdown()` is under way (a run
    waiting here then leaves its thread, staying stored), the runs waiting here for an
    answer, each with an event set once its wait ends, and the runs under way here (whose
    transitions are stored while a page follows them)."""

    loops: dict[str, HostedLoop] = field(default_factory=dict)
    url: str | None = None
    database: RunsDatabase | None = None
    queue: Any = None
    stopping: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)
    """Set once `launch` has opened everything a run needs; cleared while it is under way
    and from the moment `shutdown` begins (DBOS may hand this process a run in between)."""
    waiting: dict[str, threading.Event] = field(default_factory=dict)
    live: LiveRuns = field(default_factory=LiveRuns)


_log = logging.getLogger("forge.durable")

HOST = Host()
LOOPS, STOPPING, WAITING_HERE = HOST.loops, HOST.stopping, HOST.waiting  # the names earlier releases exported


@DBOS.workflow(name=WORKFLOW_NAME)
def forge_run(loop_name: str, goal: str, forked_from: Mapping[str, Any] | None = None,
              conversation: Mapping[str, Any] | None = None, parks: bool | str = False) -> dict[str, Any]:
    """A durable run of `goal` on the loop registered as `loop_name` in this process;
    `forked_from` (`forge.durable.forks`) when it is a fork of a stored run; `conversation`
    when it goes on from an earlier one: the `state` it goes on from and the run it
    `continues`. A run that `parks` (one a worker took from forge's queue) ends its workflow
    when it must wait for an answer, and the answer starts `forge_resume` (see the module);
    one started in a program (`parks == POLLS`) waits in it, looking for its answer in
    `forge_answers`, its question kept in `forge_status` (see the module); one started by
    forge 0.1.0 waits in DBOS's `recv`, as it began."""
    durable = _hosted_loop(loop_name, goal)
    if durable is None:
        return _unknown_loop(loop_name, goal)
    return _Workflow(durable, WorkflowInputs(goal, forked_from, conversation), parks=parks).run()


@DBOS.workflow(name=RESUME_NAME)
def forge_resume(loop_name: str, goal: str, forked_from: Mapping[str, Any] | None, conversation: Mapping[str, Any] | None,
                 run_id: str, question: int) -> dict[str, Any]:
    """The run `run_id`, which a worker left waiting on its `question`, goes on: started by
    the answer (`forge.durable.runs.StoredRuns.resume`), or by the question's deadline. Its
    arguments are the run's own, then the run and the question."""
    durable = _hosted_loop(loop_name, goal)
    if durable is None:
        return _unknown_loop(loop_name, goal)
    return _Workflow(durable, WorkflowInputs(goal, forked_from, conversation), parks=True, run_id=run_id,
                     resumed=question).run()


def _hosted_loop(loop_name: str, goal: str) -> HostedLoop | None:
    """Once this process can run a durable run (`_hosted`), the loop named; None when it
    has none of that name (the run's end then published, `_unknown_loop`)."""
    _hosted()
    durable = LOOPS.get(loop_name)
    if durable is None:
        DBOS.set_event(EVENT, _unknown_loop(loop_name, goal))
    return durable


LAUNCH_WAIT = 120.0
"""Seconds a run handed to this process while `launch` is still under way waits for it."""


def _hosted() -> None:
    """Return once this process can run a durable run: DBOS may hand it one before `launch`
    has finished opening forge's side, or after `shutdown` has begun to close it.

    Raises:
        ProcessStopping: the process is stopping, or never became ready: the run is left
            pending, as a run stopped at its next call is, and another process takes it
            (nothing of it ran here).
    """
    if HOST.ready.is_set():
        return
    if HOST.stopping.is_set() or not HOST.ready.wait(LAUNCH_WAIT) or HOST.stopping.is_set():
        raise ProcessStopping(str(DBOS.workflow_id))


@DBOS.workflow(name=ASYNC_WORKFLOW_NAME)
async def forge_arun(loop_name: str, goal: str, forked_from: Mapping[str, Any] | None = None,
                     conversation: Mapping[str, Any] | None = None, parks: bool | str = False) -> dict[str, Any]:
    """`forge_run` on DBOS's async API: the run is `await loop.arun(...)`, so tools, the
    policy and verify may be `async def`, and the run's waits do not hold a thread."""
    durable = await _ahosted(loop_name, goal)
    if durable is None:
        return _unknown_loop(loop_name, goal)
    return await _Workflow(durable, WorkflowInputs(goal, forked_from, conversation), parks=parks).arun()


@DBOS.workflow(name=ASYNC_RESUME_NAME)
async def forge_aresume(loop_name: str, goal: str, forked_from: Mapping[str, Any] | None,
                        conversation: Mapping[str, Any] | None, run_id: str, question: int) -> dict[str, Any]:
    """`forge_resume`, for a run of `forge_arun`."""
    durable = await _ahosted(loop_name, goal)
    if durable is None:
        return _unknown_loop(loop_name, goal)
    return await _Workflow(durable, WorkflowInputs(goal, forked_from, conversation), parks=True, run_id=run_id,
                           resumed=question).arun()


async def _ahosted(loop_name: str, goal: str) -> HostedLoop | None:
    """`_hosted`, on an event loop; the loop named, or None (its end then published)."""
    if not HOST.ready.is_set():
        import asyncio

        await asyncio.to_thread(_hosted)
    durable = LOOPS.get(loop_name)
    if durable is None:
        await DBOS.set_event_async(EVENT, _unknown_loop(loop_name, goal))
    return durable


def _unknown_loop(loop_name: str, goal: str) -> dict[str, Any]:
    """The event that ends a run whose loop this process does not have: `fatal_error`, with
    the reason where `forge runs show` and the run's page read it (not a DBOS error with a
    traceback in the worker's log)."""
    error = (f"UsageError: the worker has no durable loop named {loop_name!r} (it has: "
             f"{', '.join(sorted(LOOPS)) or 'none'}); every worker must make each loop a run may name")
    _log.error("run %s: %s", DBOS.workflow_id, error)
    event = {"status": "finished", "loop": loop_name, "goal": goal, "trace": [], "answers": 0, "tokens": 0,
             "reason": "fatal_error", "outcome": "failure", "summary": f"fatal_error after 0 steps: {error}",
             "steps": 0, "error": error}
    return event


def continuation_id(run_id: str, question: int) -> str:
    """The workflow that takes the parked run `run_id` on after its `question`: one per
    question, so the answer and the deadline start it once between them."""
    return f"{run_id}~{question}"


class Parked(BaseException):
    """Ends a parked run's workflow (see `_Workflow._parked_wait`): `event` is what it
    published, the workflow's result. Not an Exception, so no stage takes it for a failure."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__("parked")
        self.event = event


def _queue() -> Any:
    """forge's queue in this process (`launch`)."""
    if HOST.queue is None:
        raise ProcessStopping(str(DBOS.workflow_id))
    return HOST.queue


@dataclass(frozen=True, slots=True)
class WorkflowInputs:
    """What a run's workflow was started with beside its loop's name, as DBOS stores its
    inputs (`forge_run`'s arguments, in this order): the `goal`, the stored run it is a fork
    of (`forked_from`, `forge.durable.forks`) and the conversation it goes on from
    (`conversation`: the `state` and the run it `continues`)."""

    goal: str
    forked_from: Mapping[str, Any] | None = None
    conversation: Mapping[str, Any] | None = None


_Op = tuple[Any, ...]
"""What the workflow's flow asks its driver to do: ("publish", event), ("state", LoopState),
("deadline", seconds), ("recv", timeout), ("park", waiting, handed_over), ("poll", seconds), ("run",)."""


class _Workflow:
    """One durable run: one `AgentLoop` run, whose performer keeps its journal in the runs'
    database and asks a person whenever the run needs input. Its DBOS operations are written
    once, as generators (`_flow`, `_question`); `run` drives them with DBOS's sync API,
    `arun` with its async one."""

    def __init__(self, durable: HostedLoop, inputs: WorkflowInputs, *, parks: bool | str = False,
                 run_id: str | None = None, resumed: int | None = None) -> None:
        self.durable, self.goal, self.forked_from = durable, inputs.goal, inputs.forked_from
        self.conversation = inputs.conversation or {}
        self.parks, self.polls, self.resumed = parks is True, parks == POLLS, resumed
        workflow_id = DBOS.workflow_id
        assert workflow_id is not None, "forge_run runs as a DBOS workflow"
        self.run_id = run_id or workflow_id
        self.trace: list[dict[str, Any]] = []
        self.performer: DurablePerformer | None = None
        self.answers = 0
        self.tokens = 0
        self.timing: Timing | None = None
        self.children: list[dict[str, Any]] = []

    def run(self) -> dict[str, Any]:
        try:
            finished: dict[str, Any] = self._drive(self._flow())
        except Parked as parked:
            return parked.event
        except Exception:
            self._chained("error")
            raise
        return finished

    async def arun(self) -> dict[str, Any]:
        try:
            finished: dict[str, Any] = await self._adrive(self._flow())
        except Parked as parked:
            return parked.event
        except Exception:
            self._chained("error")
            raise
        return finished

    def _chained(self, status: str) -> None:
        """Note `status` as the run's now, for a run a worker left waiting once (`forge_chain`)."""
        if self.resumed is not None:
            self.durable.database.chain(self.run_id, status)

    def _drive(self, flow: Generator[_Op, Any, Any]) -> Any:
        reply: Any = None
        while True:
            try:
                op = flow.send(reply)
            except StopIteration as done:
                return done.value
            kind = op[0]
            if kind == "run":
                reply = self._run()
            elif kind in ("publish", "state"):
                DBOS.set_event(EVENT if kind == "publish" else STATE_EVENT, op[1])
                reply = None
            elif kind == "deadline":
                reply = _deadline(op[1])
            elif kind == "park":
                resume = self._park(op[1], op[2])
                if resume is not None:
                    named, delayed = self._parking(op[1], resume[1])
                    with named, delayed:
                        _queue().enqueue(forge_resume, *resume[0])
                reply = None
            elif kind == "poll":
                time.sleep(op[1])
                reply = None
            else:
                reply = DBOS.recv(ANSWER_TOPIC, timeout_seconds=op[1])

    async def _adrive(self, flow: Generator[_Op, Any, Any]) -> Any:
        reply: Any = None
        while True:
            try:
                op = flow.send(reply)
            except StopIteration as done:
                return done.value
            kind = op[0]
            if kind == "run":
                reply = await self._arun()
            elif kind in ("publish", "state"):
                await DBOS.set_event_async(EVENT if kind == "publish" else STATE_EVENT, op[1])
                reply = None
            elif kind == "deadline":
                reply = await _adeadline(op[1])
            elif kind == "park":
                resume = self._park(op[1], op[2])
                if resume is not None:
                    named, delayed = self._parking(op[1], resume[1])
                    with named, delayed:
                        await _queue().enqueue_async(forge_aresume, *resume[0])
                reply = None
            elif kind == "poll":
                import asyncio

                await asyncio.sleep(op[1])
                reply = None
            else:
                reply = await DBOS.recv_async(ANSWER_TOPIC, timeout_seconds=op[1])

    def _event(self, status: str, **more: Any) -> dict[str, Any]:
        """What the run says of itself now (the DBOS event `run`, or `forge_status`)."""
        event = {"status": status, "loop": self.durable.name, "goal": self.goal, "trace": self.trace,
                 "answers": self.answers, "tokens": self.tokens, **more}
        if self.timing is not None:  # what lists show without reading the trace
            event["working_s"], event["waiting_s"] = round(self.timing.working, 3), round(self.timing.waiting, 3)
        if self.children:
            event["children"] = self.children
        if self.forked_from is not None:
            event["forked_from"] = {k: v for k, v in self.forked_from.items() if k not in ("patched", "seeded")}
        if self.conversation.get("continues"):
            event["continues"] = self.conversation["continues"]
        return event

    def _publish(self, status: str, **more: Any) -> Generator[_Op, Any, dict[str, Any]]:
        event = self._event(status, **more)
        yield ("publish", event)
        if status != "waiting":
            self._chained(status)
        return event

    def _flow(self) -> Generator[_Op, Any, dict[str, Any]]:
        if self.forked_from is not None:
            yield from self._publish("running")  # a fork says where it came from while it runs
        result: LoopResult = yield ("run",)
        self._took(result)
        yield ("state", self._stored(result.state))  # apart from the run's event: read only when asked for
        return (yield from self._publish(
            "finished", reason=result.reason, outcome=result.outcome, summary=result.summary, steps=result.steps,
            error=None if result.error is None else error_text(result.error)))

    def _stored(self, state: LoopState) -> Any:
        """`state` as the run's state event keeps it: the wire form, with the loop's codec."""
        return encode(state, self.durable.loop.codec)

    def _going_on(self) -> LoopState | None:
        """The state the run goes on from (`conversation`), read with the loop's codec."""
        state = self.conversation.get("state")
        return None if state is None else decode(state, self.durable.loop.codec)

    def _took(self, result: LoopResult) -> None:
        """Keep what the run's event publishes of `result`: its trace, its tokens, its time
        working and waiting, and its child runs' traces (`StoredChild`)."""
        self.trace = [record.to_json() for record in result.trace]
        self.timing = timing(self.durable.loop.definition, result.trace)
        self.tokens = result.usage.total_tokens
        self.children = [StoredChild.of(child).to_json() for child in result.children]

    def _performer(self, ask: Callable[[Waiting, Any], Any], registry: StoredRegistry
                   ) -> Callable[[Journal, Run], DurablePerformer]:
        """What makes the run's performer: its stored journal, replayed as far as it goes,
        then live; `ask` waits for a person's answer; `registry` is told while it replays (a
        fork's parent's keyed calls are then the fork's own)."""
        stored = StoredCalls(self.durable.database, self.run_id, codec=self.durable.loop.codec)
        forked = self.forked_from

        def perform(journal: Journal, run: Run) -> DurablePerformer:
            seed = ForkSeed(int(forked.get("seeded") or 0), forked.get("patched"), forked.get("patch")) if forked \
                else None
            hooks = WorkerHooks(self.in_doubt, ask, self._configured, HOST.stopping)
            performer = DurablePerformer(stored, journal, run, hooks, seed)
            if forked is not None:
                journal.forked_from = ForkOrigin(forked["run_id"], forked["transition"], forked.get("patch"))
            performer.asks_later = self.polls
            registry.replaying = lambda: performer.remaining > 0
            HOST.live.started(performer)
            self.performer = performer
            return performer

        return perform

    def _configured(self, extra_tools: tuple[str, ...]) -> Any:
        """The run's configuration with the extra tools answers added."""
        return self.durable.loop_for(extra_tools).spec.config

    def _run(self) -> LoopResult:
        try:
            registry = self._registry()
            result = self.durable.loop.run(RunStart(self.goal, state=self._going_on(), run_id=self.run_id,
                                                    registry=registry, performer=self._performer(self._ask, registry)))
        finally:
            HOST.live.ended(self.run_id)
        return self._ended(result)

    async def _arun(self) -> LoopResult:
        try:
            registry = self._registry()
            result = await self.durable.loop.arun(RunStart(self.goal, state=self._going_on(), run_id=self.run_id,
                                                           registry=registry,
                                                           performer=self._performer(self._aask, registry)))
        finally:
            HOST.live.ended(self.run_id)
        return self._ended(result)

    def _ended(self, result: LoopResult) -> LoopResult:
        assert self.performer is not None, "the run made its performer"
        self.performer.flush()  # what the run's end settled: its last verify
        return result

    def _registry(self) -> StoredRegistry:
        return StoredRegistry(self.durable.database, self.run_id,
                              self.forked_from["run_id"] if self.forked_from else None, self.durable.loop.codec)

    def _ask(self, waiting: Waiting, run: Run) -> dict[str, Any] | None:
        answered: dict[str, Any] | None = self._drive(self._question(waiting, run))
        return answered

    async def _aask(self, waiting: Waiting, run: Run) -> dict[str, Any] | None:
        answered: dict[str, Any] | None = await self._adrive(self._question(waiting, run))
        return answered

    def _question(self, waiting: Waiting, run: Run) -> Generator[_Op, Any, dict[str, Any] | None]:
        """Publish what the run, in its waiting state, asks and wait durably for the answer
        (with the state's deadline, stored as a DBOS step, so a recovered run waits for the
        same moment): the answer as the journal keeps it, or None when the deadline passed.
        A child run's question (`waiting.run`) is asked the same way while the run's call
        of the child is under way: the run's trace so far, the child's state and tools."""
        if waiting.run is not None or waiting.server is not None:
            return (yield from self._calls_question(waiting, run))
        result = self.durable.loop.result(run)
        self._took(result)
        more: dict[str, Any] = {}
        if self.polls:  # kept with the question (`forge_status`), in the one write that asks it
            more["state"] = self._stored(result.state)
        else:
            yield ("state", self._stored(result.state))
        seconds = self.durable.loop.definition.state(result.reason).timeout
        if seconds is not None:
            waiting = replace(waiting, deadline=(yield ("deadline", seconds)))  # absolute, and stored
        answer = yield from self._wait(waiting, reason=result.reason, outcome=result.outcome,
                                       summary=result.summary, steps=result.steps, **more)
        return None if answer is None else answer.to_json()

    def _calls_question(self, waiting: Waiting, run: Run) -> Generator[_Op, Any, dict[str, Any] | None]:
        """`_question`, for one asked while the run's call is under way: a child run's
        (`forge.machine.child.AskingParent`) or an MCP server's (`forge.mcp.asking`). The run is in
        the middle of the transition making the call, so its trace so far is published,
        with the question's state as the reason; a child's tools are what its answers name,
        and its state's deadline is the wait's."""
        self.trace = [record.to_json() for record in run.trace]
        self.children = [StoredChild.of(done).to_json() for done in finished_children(run)]
        child = None if waiting.run is None else loop_at(self.durable.loop, waiting.run[len(self.run_id) + 1:])
        seconds = None if child is None else child.definition.state(waiting.state).timeout
        if seconds is not None:
            waiting = replace(waiting, deadline=(yield ("deadline", seconds)))
        steps = run.loop_state.step_count - run.counts.steps_before
        waits = f"the child waits in {waiting.state}" if waiting.run is not None else f"the call of {waiting.tool} waits"
        answer = yield from self._wait(waiting, None if child is None else {tool.name for tool in child.tools},
                                       reason=waiting.state, outcome="needs_input", steps=steps,
                                       summary=f"{waiting.asks} ({waits})")
        return None if answer is None else answer.to_json()

    def _wait(self, waiting: Waiting, tools: set[str] | None = None, **more: Any) -> Generator[_Op, Any, Answer | None]:
        """Publish what the run waits for (its next question, numbered) and wait, durably,
        for a fitting answer to that question; None when its deadline passes first. `tools`
        are those an answer may name (default: the loop's)."""
        waiting = replace(waiting, asked=self.answers + 1)
        if tools is None:
            tools = {tool.name for tool in self.durable.loop.tools}
        if self.parks:
            return (yield from self._parked_wait(waiting, tools, more))
        if self.polls:
            return (yield from self._polled_wait(waiting, tools, more))
        # registered before the run says it waits: a shutdown() that follows the caller seeing "waiting"
        # always finds this thread, and wakes it (else it would wait an hour in recv, and the process with it)
        ended = HOST.waiting[self.run_id] = threading.Event()
        try:
            yield from self._publish("waiting", waiting=waiting.to_json(), tools=sorted(tools),
                                     extra_tools=sorted(self.durable.extra_tools), **more)
            return (yield from self._receive(waiting, tools))
        finally:
            HOST.waiting.pop(self.run_id, None)
            ended.set()

    def _parked_wait(self, waiting: Waiting, tools: set[str], more: Mapping[str, Any]
                     ) -> Generator[_Op, Any, Answer | None]:
        """`_wait`, for a run that parks: the answer the question has in `forge_answers` (a
        question answered before this workflow, one of the run's earlier ones or the one
        that started it), None when its deadline passed; with none, the run publishes what
        it waits for and parks (`Parked`: its workflow ends, and the answer starts the next).
        Started by the question's deadline with no answer yet, the run claims the question
        for the deadline: an answer that comes after it is refused.

        One workflow of a run goes on after each question, however a worker dies: a
        workflow recovered after it parked on this question (`_handed_over`) ends again at
        it, the workflow the answer starts taking the run on; one that died before parking
        takes the answer itself (the answer queues no workflow for a run not parked yet).
        """
        handed_over = self._handed_over(waiting.asked)
        if not handed_over:
            taken, answer = self._stored_answer(waiting, tools, deadline_passed=waiting.asked == self.resumed)
            if taken:
                yield from self._publish("running")
                return answer
        event = yield from self._publish("waiting", waiting=waiting.to_json(), tools=sorted(tools),
                                         extra_tools=sorted(self.durable.extra_tools), **more)
        yield ("park", waiting, handed_over)
        raise Parked(event)

    def _handed_over(self, question: int) -> bool:
        """Whether this workflow parked the run on `question` before (it is being recovered):
        the question is then the next workflow's. A continuation's own question and the
        ones before it never are."""
        if question <= (self.resumed or 0):
            return False
        parked = self.durable.database.parked_at(self.run_id)
        return parked is not None and parked >= question

    def _stored_answer(self, waiting: Waiting, tools: set[str], deadline_passed: bool) -> tuple[bool, Answer | None]:
        """Whether `waiting` has its answer in `forge_answers`, and the answer (None: its
        deadline passed first). With `deadline_passed` and no answer yet, the question is
        claimed for the deadline (an answer that comes after it is refused).

        Raises:
            Parked: the run was cancelled as it waited (DBOS cancels its workflow: it just ends).
        """
        database = self.durable.database
        found, text = database.answer_of(self.run_id, waiting.asked)
        if not found and deadline_passed:
            found, text = (True, None) if database.answer(self.run_id, waiting.asked, None) else \
                database.answer_of(self.run_id, waiting.asked)
        if not found or text is None:
            return found, None
        if text == CANCELLED:
            raise Parked({})
        answer = Answer.from_json(json.loads(text))
        answer.check(waiting, tools, set(self.durable.extra_tools))
        self.answers += 1
        return True, answer

    def _polled_wait(self, waiting: Waiting, tools: set[str], more: Mapping[str, Any]
                     ) -> Generator[_Op, Any, Answer | None]:
        """`_wait`, for a run in a program: what it waits for is stored as its status
        (`forge_status`) in the write that stores what led to it (the approver's "ask a
        person"), and the run looks for its answer in `forge_answers` until one comes (or
        its deadline passes: it then claims the question for the deadline); its status
        "running" goes with the step's next write. No DBOS operation: no commit of its own."""
        assert self.performer is not None, "a run asks through its performer"

        def passed() -> bool:
            return waiting.deadline is not None and time.time() >= waiting.deadline

        ended = HOST.waiting[self.run_id] = threading.Event()
        try:
            taken, answer = self._stored_answer(waiting, tools, passed())  # (taken: a replay's question, say)
            if not taken:
                self.performer.flush(status=json.dumps(self._event(
                    "waiting", waiting=waiting.to_json(), tools=sorted(tools),
                    extra_tools=sorted(self.durable.extra_tools), **more)))
            delay = 0.005
            while not taken:  # looked for until it comes, or the process stops (the run stays waiting)
                if HOST.stopping.is_set():
                    raise ProcessStopping(self.run_id)
                yield ("poll", delay)
                delay = min(delay * 2, 0.2)
                taken, answer = self._stored_answer(waiting, tools, passed())
            self.performer.status_later = json.dumps(self._event("running"))
            return answer
        finally:
            HOST.waiting.pop(self.run_id, None)
            ended.set()

    def _park(self, waiting: Waiting, handed_over: bool) -> tuple[tuple[Any, ...], float] | None:
        """Leave the run waiting with no workflow under way: its calls so far stored, noted
        as parked (`forge_chain`, listed by when it first parked; not again when this
        workflow parked it before, `handed_over`). Returns the arguments of the workflow
        that takes it on and in how many seconds it starts, for the driver to queue: at
        once when the question has its answer already (an answer stored before the run
        said it parked queued nothing), else at the question's deadline (an answer before
        starts it at once); None with neither. Queued twice, it starts once (its id is the
        question's)."""
        database = self.durable.database
        if not handed_over:
            if self.performer is not None:
                self.performer.flush()
            database.chain(self.run_id, "waiting", waiting.asked)
        answered, text = database.answer_of(self.run_id, waiting.asked)
        if answered and not handed_over:
            database.chain(self.run_id, "cancelled" if text == CANCELLED else "queued")
        if not answered and waiting.deadline is None:
            return None
        arguments = (self.durable.name, self.goal, self.forked_from, self.conversation or None, self.run_id,
                     waiting.asked)
        return arguments, 0.0 if answered else max(0.0, (waiting.deadline or 0.0) - time.time())

    def _parking(self, waiting: Waiting, delay: float) -> Any:
        """DBOS's options for the workflow `_park` queues: its id, its delay."""
        return SetWorkflowID(continuation_id(self.run_id, waiting.asked)), SetEnqueueOptions(delay_seconds=delay)

    def _receive(self, waiting: Waiting, tools: set[str]) -> Generator[_Op, Any, Answer | None]:
        deadline = waiting.deadline
        while True:
            if HOST.stopping.is_set():
                raise ProcessStopping(self.run_id)
            data = yield ("recv", 3600 if deadline is None else max(0.0, deadline - time.time()))
            if HOST.stopping.is_set():
                raise ProcessStopping(self.run_id)
            if data is None:
                if deadline is not None and time.time() >= deadline:
                    yield from self._publish("running")
                    return None
                continue
            try:
                answer = Answer.from_json(data)
                if answer.question != waiting.asked:
                    continue  # an answer to another question (an earlier one, or none): never this one's
                answer.check(waiting, tools, set(self.durable.extra_tools))
            except (AnswerRefused, KeyError, TypeError, ValueError):
                continue  # resume() checks before sending; a hand-made message that does not fit is dropped
            self.answers += 1
            yield from self._publish("running")
            return answer

    def in_doubt(self, tool: Tool, arguments: Mapping[str, Any], key: str) -> tuple[bool, Any]:
        """A call of `tool` was running when the process died: ask whether it ran (on the
        sync API: the performer asks from inside the run)."""
        waiting = Waiting("in_doubt", tool.name, dict(arguments), fingerprint_of(tool.name, arguments), key=key)
        answer = self._drive(self._wait(waiting))
        assert answer is not None, "a call in doubt waits with no deadline"
        return (True, answer.value) if answer.kind == "did_run" else (False, None)


@DBOS.step(name="forge_deadline")
def _deadline(seconds: float) -> float:
    """When a wait of `seconds` that starts now ends, as a stored step: a recovered run
    waits for the same moment, not for `seconds` more."""
    return time.time() + seconds


@DBOS.step(name="forge_deadline_async")
async def _adeadline(seconds: float) -> float:
    """`_deadline`, as an async workflow's step."""
    return time.time() + seconds
