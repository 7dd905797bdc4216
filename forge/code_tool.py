"""A code tool: the model writes a short program that calls the loop's tools, and each call
the program makes is an ordinary forge tool call (`pip install 'forge-fsm[code]'`).

Why a program: one model turn can then do what would take one turn per call (read five
files and compare them; look something up for each of ten items). Why not run it as one
opaque tool: a side effect inside the program must be approved, journaled, counted and
recovered exactly as if the model had asked for it. So the program runs as a **child run**
(`forge.machine.child`) whose policy is the program itself: the program runs in `pydantic-monty`'s
sandbox (a Python subset in worker processes: no file system, no network, no `os`, bounded
time and memory), and each time it calls one of the listed tools it stops there, and that
call becomes the child run's next decision, `Intent.call(tool, **arguments)`, made through
the child's machine (its approval state too), journaled with its idempotency key and counted
in the parent's step budget. The call's outcome is the program's return value (an error is
raised in the program, which may catch it); when the program ends, its value and what it
printed are the tool's answer, told to the model. A program that fails (a syntax error, an
exception, its time or memory limit) ends with the error told to the model; nothing after
it runs.

The program policy decides from the run's state, as a durable policy must: the program is
made again from its text by answering its first calls from the observations the run has
already recorded (a live program is resumed where it stopped instead, when its run goes
on in this process). So a replay or a fork takes the program to the same point without
calling any tool again, and a durable run going on after a person's approval, days later
in another worker, makes the program again (its calls before the wait answered from the
child run's stored journal) and does the approved side effect once. For that the program
runs the same each time: its `random` is seeded from its run's path and its text, and a
call that is not the one recorded at its place (a program that branched on the clock, say)
ends the program with an error saying so, instead of being answered with another call's
outcome. (Why not store the sandbox's own snapshot of a paused program instead: Monty's
snapshots are opaque bytes it asks to load only from a trusted producer of the same
version, and a run that waits days may be taken on by a worker that was upgraded since;
the program's text and its recorded calls are plain JSON any version reads.)

Raises (when a `CodeTool` is made):
    UsageError: no tools, a tool twice, a side-effecting tool without an `approver`, bad
        limits, or the `code` extra not installed.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from forge.errors import UsageError
from forge.policy import Finish, Intent
from forge.records.trace import error_text

__all__ = ["CodeLimits", "CodeTool", "ProgramPolicy", "program_of"]

CODE_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "the Python program to run"}},
    "required": ["code"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class CodeLimits:
    """What a program may use: `seconds` of its own running time (suspended at a tool call,
    it is not running), `memory` bytes of heap, and `calls` tool calls in all."""

    seconds: float = 2.0
    memory: int = 64 * 1024 * 1024
    calls: int = 50

    def __post_init__(self) -> None:
        if not (isinstance(self.seconds, int | float) and self.seconds > 0):
            raise UsageError(f"CodeLimits.seconds must be a number of seconds above 0, got {self.seconds!r}")
        if not (isinstance(self.memory, int) and self.memory >= 1024 * 1024):
            raise UsageError(f"CodeLimits.memory must be a number of bytes, at least 1 MiB, got {self.memory!r}")
        if not (isinstance(self.calls, int) and self.calls >= 1):
            raise UsageError(f"CodeLimits.calls must be a whole number of tool calls, at least 1, got {self.calls!r}")


def program_of(goal: str) -> str:
    """The program a code tool's child run is given as its goal (`{"code": ...}` as JSON)."""
    try:
        return str(json.loads(goal)["code"])
    except (ValueError, KeyError, TypeError):
        return goal  # a goal given as the program itself


class ProgramPolicy:
    """The policy of a code tool's child run: the program, run until its next tool call
    (see the module). `tools` are the tools it may call, by name."""

    def __init__(self, tools: Mapping[str, Any], limits: CodeLimits) -> None:
        self.tools, self.limits = dict(tools), limits
        self._parameters = {name: list((tool.schema or {}).get("properties", {})) for name, tool in self.tools.items()}
        self._live: OrderedDict[int, _Paused] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, goal: str, state: Any) -> Intent | Finish:
        observations = state.observations
        paused = self._take(id(state), observations)
        if paused is not None:
            return self._went_on(paused, state, _answer(observations[-1]))
        return self._made_again(program_of(goal), state, _run_under_way())

    def _take(self, key: int, observations: Any) -> _Paused | None:
        """The live program of this run, if it stopped at the call just observed."""
        with self._lock:
            paused = self._live.pop(key, None)
        if paused is not None and len(observations) == paused.answered + 1 and \
                (paused.answered == 0 or observations[paused.answered - 1] is paused.last):
            return paused
        if paused is not None:
            paused.close()
        return None

    def _made_again(self, code: str, state: Any, run: Any) -> Intent | Finish:
        """The program from its start, its first calls answered from the observations of
        `run` (the child run under way; None outside one), each checked against the call
        its run recorded at that place."""
        from pydantic_monty import CollectString, MontyError

        seed = _seed(run.trace.run_id if run is not None else "", code)
        session = _pool().checkout(limits=_limits_of(self.limits), os_policy={"random_start": {"seed": seed}})
        session.__enter__()
        printed = CollectString()
        paused = _Paused(session, None, printed, 0, None)
        if run is not None:
            paused.recorded = [entry.value for entry in run.journal
                               if entry.kind == "policy" and isinstance(entry.value, Intent)]
        try:
            paused.snapshot = session.feed_start(code, print_callback=printed)
        except MontyError as error:
            paused.close()
            return _failed(error, printed)
        return self._went_on(paused, state, None)

    def _went_on(self, paused: _Paused, state: Any, answer: Any) -> Intent | Finish:
        """Resume `paused` (with `answer` for the call it stopped at, if any) and answer its
        next recorded calls from the observations, until one is past them or it ends."""
        from pydantic_monty import FunctionSnapshot, MontyComplete, MontyError

        observations = state.observations
        try:
            if answer is not None:
                paused.snapshot = paused.snapshot.resume(answer)
                paused.answered += 1
            while True:
                snapshot = paused.snapshot
                if isinstance(snapshot, MontyComplete):
                    paused.close()
                    return Finish({"value": _plain(snapshot.output), "printed": str(paused.printed.output)})
                if not isinstance(snapshot, FunctionSnapshot) or snapshot.is_os_function:
                    paused.snapshot = snapshot.resume_not_handled() if isinstance(snapshot, FunctionSnapshot) \
                        else snapshot.resume_auto()
                    continue
                refused = self._refused(snapshot)
                if refused is not None:
                    paused.snapshot = snapshot.resume({"exception": refused})
                    continue
                if paused.answered < len(observations):  # made already: its outcome is recorded
                    other = self._not_recorded(snapshot, paused)
                    if other is not None:
                        paused.close()
                        return Finish({"error": other, "printed": str(paused.printed.output)})
                    paused.snapshot = snapshot.resume(_answer(observations[paused.answered]))
                    paused.answered += 1
                    continue
                if paused.answered >= self.limits.calls:
                    paused.close()
                    return Finish({"error": f"the program made {paused.answered} tool calls, its limit "
                                            f"(CodeLimits.calls): it was stopped there",
                                   "printed": str(paused.printed.output)})
                intent = Intent.call(snapshot.function_name, **self._arguments(snapshot))
                paused.last = observations[-1] if observations else None
                self._keep(id(state), paused)
                return intent
        except MontyError as error:
            paused.close()
            return _failed(error, paused.printed)

    def _not_recorded(self, snapshot: Any, paused: _Paused) -> str | None:
        """Why the call the program makes again is not the one its run recorded at that
        place (its tool, its arguments), or None when it is."""
        if paused.answered >= len(paused.recorded):
            return None
        recorded = paused.recorded[paused.answered]
        tool, arguments = snapshot.function_name, _plain(self._arguments(snapshot))
        if (tool, arguments) == (recorded.tool, _plain(dict(recorded.arguments))):
            return None
        return (f"the program, made again to go on, made call {paused.answered + 1} as {tool}({arguments}), but "
                f"its run recorded {recorded.tool}({dict(recorded.arguments)}) there: a program must make the same "
                "calls each time it runs (not branch on the clock), so it was stopped there")

    def _refused(self, snapshot: Any) -> BaseException | None:
        """Why the program cannot make this call (an error raised in the program, as Python
        would raise it), or None."""
        name = snapshot.function_name
        if name not in self.tools:
            return NameError(f"name {name!r} is not defined: the program may call {', '.join(sorted(self.tools))}")
        names = self._names(name)
        if len(snapshot.args) > len(names):
            return TypeError(f"{name}() takes {len(names)} arguments ({', '.join(names)}), "
                             f"{len(snapshot.args)} were given")
        twice = sorted(set(names[:len(snapshot.args)]) & set(snapshot.kwargs))
        if twice:
            return TypeError(f"{name}() got {twice[0]!r} twice")
        return None

    def _arguments(self, snapshot: Any) -> dict[str, Any]:
        """The call's arguments by name, positional ones named in the tool's order (a call
        `_refused` let through)."""
        names = self._names(snapshot.function_name)
        return {**dict(zip(names, snapshot.args, strict=False)), **snapshot.kwargs}

    def _names(self, tool: str) -> list[str]:
        """The tool's parameters, in order."""
        return self._parameters[tool]

    @property
    def live(self) -> int:
        """How many programs are paused live, each at its next tool call."""
        return len(self._live)

    def forget(self) -> None:
        """Close every live program: each run that goes on makes its program again from its
        recorded calls, as a new process (another worker, a restart) does."""
        with self._lock:
            live, self._live = list(self._live.values()), OrderedDict()
        for paused in live:
            paused.close()

    def _keep(self, key: int, paused: _Paused) -> None:
        with self._lock:
            self._live[key] = paused
            while len(self._live) > LIVE_PROGRAMS:  # the oldest is made again if its run goes on
                self._live.popitem(last=False)[1].close()


LIVE_PROGRAMS = 16
"""How many paused programs one code tool keeps live (each holds a worker process); one
resumed after that is made again from its recorded calls."""


class _Paused:
    """A program stopped at a tool call: its session, snapshot, printed output, how many of
    its calls were answered, and the observation before its call (to know its run again)."""

    def __init__(self, session: Any, snapshot: Any, printed: Any, answered: int, last: Any) -> None:
        self.session, self.snapshot, self.printed, self.answered, self.last = session, snapshot, printed, answered, last
        self.recorded: list[Intent] = []  # made again: the calls its run recorded, in order

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a worker that died already is replaced by the pool
            self.session.__exit__(None, None, None)


def _seed(path: str, code: str) -> str:
    """The seed of the `random` of the program `code` in the run at `path`: the same each time
    the program is made again in that run, another in another run."""
    return hashlib.sha256(f"{path}\n{code}".encode()).hexdigest()


def _run_under_way() -> Any:
    """The run whose policy is deciding (the code tool's child run), or None outside a run."""
    from forge.machine.child import CALLING

    lineage = CALLING.get()
    return lineage[-1] if lineage else None


def _answer(observation: Any) -> Any:
    """What the program's call returns (or raises), from the call's observation."""
    if observation.status == "ok":
        return {"return_value": _plain(observation.payload)}
    error = observation.payload
    text = error_text(error) if isinstance(error, BaseException) else str(error)
    return {"exception": RuntimeError(text)}


def _plain(value: Any) -> Any:
    """`value` as plain data the sandbox and the journal both hold."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def _failed(error: BaseException, printed: Any) -> Finish:
    """A program that failed: its error and what it printed, told to the model."""
    text = str(error).strip() or type(error).__name__
    return Finish({"error": text, "printed": str(printed.output)})


def _limits_of(limits: CodeLimits) -> dict[str, Any]:
    return {"max_feed_duration_secs": limits.seconds, "max_turn_duration_secs": limits.seconds,
            "max_memory": limits.memory, "max_suspensions": limits.calls * 4 + 16}


_POOL: list[Any] = []
_POOL_LOCK = threading.Lock()


def _pool() -> Any:
    """The process's pool of sandbox workers, started when first needed, closed at exit."""
    with _POOL_LOCK:
        if not _POOL:
            from pydantic_monty import Monty

            pool = Monty(min_processes=1, max_processes=LIVE_PROGRAMS + 2, checkout_timeout=60.0)
            pool.__enter__()
            atexit.register(pool.__exit__, None, None, None)
            _POOL.append(pool)
        return _POOL[0]


def CodeTool(tools: Iterable[Any], *, limits: CodeLimits | None = None, name: str = "run_code",
             approver: Callable[..., Any] | None = None, guards: Iterable[Any] = (), description: str = "") -> Any:
    """A `Tool` (named `name`, taking `{"code": "..."}`) that runs a model-written program
    whose calls to `tools` are forge tool calls (see the module). `approver` approves each
    side effect the program makes, as the loop's own approver does (pass the same one;
    `lambda request: None` leaves it to a person, who answers as for any call); it is
    required when a tool has a side effect. `guards` (`forge.Guard`s, the loop's own) check
    each call the program makes, its arguments and its result, as they check the model's
    (a refusal that replans is raised in the program). `limits` bounds each program.

    Raises:
        UsageError: no tools, two of one name, a side-effecting tool without an approver,
            or `pydantic-monty` not installed (`pip install 'forge-fsm[code]'`).
    """
    from forge.loop import AgentLoop
    from forge.options import Hooks, Limits

    try:
        import pydantic_monty  # noqa: F401
    except ModuleNotFoundError:
        raise UsageError("CodeTool runs programs in pydantic-monty: pip install 'forge-fsm[code]'") from None
    listed = tuple(tools)
    if not listed:
        raise UsageError("CodeTool needs the tools its programs may call: CodeTool(tools=[...])")
    limits = limits if limits is not None else CodeLimits()
    if not isinstance(limits, CodeLimits):
        raise UsageError(f"CodeTool's limits are a forge.code_tool.CodeLimits, got {limits!r:.100}")
    effects = [tool.name for tool in listed if getattr(tool, "side_effect", False)]
    if effects and approver is None:
        raise UsageError(f"{', '.join(effects)} {'has a side effect' if len(effects) == 1 else 'have side effects'}: "
                         "give CodeTool the approver that approves them (the loop's own, or lambda request: None "
                         "to leave each to a person)")
    policy = ProgramPolicy({tool.name: tool for tool in listed}, limits)
    checks = tuple(guards)
    definition = {(False, False): "single_agent", (True, False): "approval", (False, True): "guarded",
                  (True, True): "guarded_approval"}[(approver is not None, bool(checks))]
    program = AgentLoop(listed, policy, _finished, max_steps=limits.calls + 1, definition=definition,
                        approver=approver, limits=Limits(repeat_limit=limits.calls + 1), hooks=Hooks(guards=checks))
    return program.as_tool(name, description or program_description(listed, limits), input=dict(CODE_SCHEMA))


def _finished(observation: Any) -> bool:
    return bool(observation.tool_name == "finish")


def program_description(tools: Iterable[Any], limits: CodeLimits) -> str:
    """What the model is told of the code tool: the language, the functions it may call
    with their parameters, and what it gives back."""
    lines = ["Run a short Python program (a subset: no imports of os, files or the network) that calls these "
             "functions; each call is made as a tool call. The program's last expression is its value; the result "
             "is {\"value\": ..., \"printed\": \"...\"}, or {\"error\": \"...\"} when it fails. Functions:"]
    for tool in tools:
        properties = (tool.schema or {}).get("properties", {})
        signature = ", ".join(f"{name}: {spec.get('type', 'any')}" for name, spec in properties.items())
        lines.append(f"- {tool.name}({signature}): {tool.description or ''}".rstrip(": "))
    lines.append(f"At most {limits.calls} calls and {limits.seconds:g} s of running time per program.")
    return "\n".join(lines)
