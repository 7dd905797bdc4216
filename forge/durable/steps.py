"""The parts of a loop that touch the world, each wrapped as a DBOS step.

A durable run is the same machine as any run; what changes is that every policy decision,
every tool attempt, every verify and every approver call goes through `DBOS.run_step`, so
its outcome (value or exception) is written once and, when the workflow is recovered after
a crash, handed back instead of being computed again. The machine then takes the same
transitions and the trace comes out the same.

What a step changes besides its value is recorded with it: the messages a chat policy added
to the conversation are put back when its decision is replayed.
"""

from __future__ import annotations

import functools
import pickle
import threading
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from dbos import DBOS

from forge.agent.idempotency import IdempotencyConflict, IdempotencyRegistry
from forge.agent.observations import LoopState
from forge.policy import Intent, Policy
from forge.tools import Tool

if TYPE_CHECKING:
    from forge.observe import RunView

__all__ = ["StepPolicy", "StoredRegistry", "idempotency_key", "step_approver", "step_tool", "step_verify"]

_KEY: ContextVar[str | None] = ContextVar("forge_durable_key", default=None)
CURRENT_RUN: ContextVar[RunView | None] = ContextVar("forge_durable_run", default=None)


def idempotency_key() -> str | None:
    """Inside a durable run's tool handler, the key of this call: the intent's own
    `idempotency_key`, else `RUN_ID/STEP/TOOL`. The same after a crash, so a handler that
    passes it on (an HTTP `Idempotency-Key`, a unique column) makes being called again
    harmless. None outside a durable tool call."""
    return _KEY.get()


def _executed(function: Callable[..., Any], ran: list[bool]) -> Callable[..., Any]:
    """`function`, noting in `ran` that it really ran (a replayed step does not)."""
    @functools.wraps(function)
    def running(*args: Any, **kwargs: Any) -> Any:
        ran.append(True)
        return function(*args, **kwargs)
    return running


class StepPolicy:
    """The policy, one DBOS step per decision. `pinned` is an intent to give first, without
    asking (the waiting call an answer continues with; it came from a recorded answer)."""

    def __init__(self, policy: Policy, pinned: Intent | None = None) -> None:
        self.policy, self.pinned = policy, pinned

    def with_tools(self, tools: Any) -> StepPolicy:
        offer = getattr(self.policy, "with_tools", None)
        return StepPolicy(offer(tools) if callable(offer) else self.policy, self.pinned)

    def __call__(self, goal: str, state: LoopState) -> Any:
        if self.pinned is not None:
            pinned, self.pinned = self.pinned, None
            return pinned
        before = len(state.messages)

        def decide() -> tuple[Any, list[dict[str, Any]]]:
            return self.policy(goal, state), list(state.messages[before:])

        ran: list[bool] = []
        decision, said = DBOS.run_step({"name": "policy"}, _executed(decide, ran))
        if not ran:  # replayed: the conversation gets back what the policy said then
            state.messages.extend(said)
        return decision


def step_verify(verify: Callable[..., bool]) -> Callable[..., bool]:
    """`verify`, one DBOS step per call (its signature is kept: the loop reads it)."""
    @functools.wraps(verify)
    def verified(*args: Any) -> bool:
        return DBOS.run_step({"name": "verify"}, verify, *args)
    return verified


def step_approver(approver: Callable[..., Any] | None, answered: Mapping[str, bool]) -> Callable[..., Any]:
    """The approver of a durable run: an answer given for the request's fingerprint wins;
    else the loop's own approver, as a step; else no answer (the run waits for one)."""
    def approve(request: Any) -> Any:
        if request.fingerprint in answered:
            return answered[request.fingerprint]
        if approver is None:
            return None
        return DBOS.run_step({"name": "approver"}, approver, request)
    return approve


def step_tool(tool: Tool, run_id: str, in_doubt: Callable[[Tool, Mapping[str, Any], str], Any]) -> Tool:
    """`tool` with each attempt a DBOS step, its handler given the call's idempotency key
    (`idempotency_key()`). A tool with `on_crash="ask"` first records that the call
    started; if the workflow is recovered with that record and no outcome after it, the
    call was running at the crash, and `in_doubt(tool, arguments, key)` decides: it
    returns `(True, value)` for "it did run" or `(False, None)` for "run it again"."""
    handler = tool.handler
    attempts: dict[int, int] = {}

    def call(**arguments: Any) -> Any:
        run = CURRENT_RUN.get()
        step = run.step if run is not None else 0
        intent = run.intent if run is not None else None
        key = intent.idempotency_key if intent is not None and intent.idempotency_key else f"{run_id}/{step}/{tool.name}"
        if tool.on_crash == "ask":
            attempts[step] = attempts.get(step, 0) + 1
            marker = f"started {tool.name} at step {step} #{attempts[step]}"  # unique in the workflow
            ran: list[bool] = []
            DBOS.run_step({"name": marker}, _executed(time.time, ran))
            if not ran and _step_after(marker) != f"tool {tool.name}":  # it was running at a crash
                done, value = in_doubt(tool, arguments, key)
                if done:
                    return value
        token = _KEY.set(key)
        try:
            return DBOS.run_step({"name": f"tool {tool.name}"}, handler, **arguments)
        finally:
            _KEY.reset(token)

    return Tool(tool.name, tool.capabilities, call, tool.required, tool.optional, tool.side_effect,
                description=tool.description, schema=tool.schema, errors=tool.errors, is_error=tool.is_error,
                on_crash=tool.on_crash)


def _step_after(marker: str) -> str | None:
    """The name of the step recorded right after the step named `marker` (a name used
    once per workflow), or None when it is the workflow's last: then the call it announced
    was running when the process died; after an in-doubt question, what follows it is the
    question's own record, not the call's."""
    workflow = DBOS.workflow_id
    assert workflow is not None, "durable tools run inside a forge workflow"
    steps: list[Any] = []
    # read in a thread of its own: called from the workflow, DBOS would record the reading as a step
    reader = threading.Thread(target=lambda: steps.extend(DBOS.list_workflow_steps(workflow)))
    reader.start()
    reader.join()
    ids = [s["function_id"] for s in steps if s["function_name"] == marker]
    later = sorted((s["function_id"], s["function_name"]) for s in steps if ids and s["function_id"] > ids[-1])
    return str(later[0][1]) if later else None


class StoredRegistry(IdempotencyRegistry):
    """The idempotency registry of durable runs: its records live in the runs' database
    (the table `forge_idempotency`, beside DBOS's own), so a side-effecting call made again
    in a resumed run, by another process, returns its stored result. Keys the loop makes
    (`TOOL:FINGERPRINT`) are scoped to the run; an intent's own `idempotency_key` is
    shared by every run. Looking up and storing are DBOS steps, so a recovered run sees
    what it saw the first time.

    An intent's own key is claimed in the database before its call runs (`forge_claims`,
    whose unique key decides between runs racing for it), so two runs that make the same
    keyed call at once run it once: the other waits for the stored value and gets it as a
    replay. A failed call releases its claim, so a later run may try again."""

    def __init__(self, table: Any, run_id: str) -> None:
        super().__init__()
        self.table, self.run_id = table, run_id

    def execute_once(self, key: str, fingerprint: str, operation: Callable[[], Any]) -> tuple[Any, bool]:
        scoped = key if not _made_by_the_loop(key, fingerprint) else f"{self.run_id}:{key}"
        shared = scoped == key
        found = DBOS.run_step({"name": "idempotency lookup"}, self.table.lookup, scoped)
        while found is None and shared:
            owner, claimed = DBOS.run_step({"name": "idempotency claim"}, self.table.claim, scoped, fingerprint,
                                           self.run_id)
            if owner == self.run_id:
                break
            if claimed != fingerprint:
                raise IdempotencyConflict(key, claimed, fingerprint)
            found = DBOS.run_step({"name": "idempotency wait"}, self.table.await_value, scoped, owner)
        if found is not None:
            stored, value = found[0], pickle.loads(found[1])
            if stored != fingerprint:
                raise IdempotencyConflict(key, stored, fingerprint)
            return value, True
        try:
            value, _ = super().execute_once(scoped, fingerprint, operation)
        except Exception:
            if shared:
                DBOS.run_step({"name": "idempotency release"}, self.table.release, scoped, self.run_id)
            raise
        DBOS.run_step({"name": "idempotency store"}, self.table.store, scoped, fingerprint, pickle.dumps(value),
                      self.run_id)
        return value, False


def _made_by_the_loop(key: str, fingerprint: str) -> bool:
    return key.endswith(f":{fingerprint}")
