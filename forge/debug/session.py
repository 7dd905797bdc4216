"""`DebugSession`: a live run stepped one transition at a time.

Stepping into new territory fires the machine for real (tools run). Every step keeps a
snapshot of the run, so `back()` restores it exactly, and stepping forward again over a
transition already taken restores the recorded outcome instead of running tools again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from forge.agent.observations import LoopState
from forge.debug.stepper import SessionFinished, Stepper
from forge.errors import UsageError
from forge.machine.engine import LoopEngine
from forge.machine.fork import Patch, RecordedRun
from forge.machine.run import Furthest, Run, RunSnapshot
from forge.records.definition import MachineDefinition
from forge.records.trace import TransitionRecord
from forge.result import LoopResult


class SteppedLoop(Protocol):
    """What a session uses of the `AgentLoop` whose run it steps (a protocol, so the
    debugger sits below the loop that makes sessions)."""

    @property
    def definition(self) -> MachineDefinition: ...

    @property
    def engine(self) -> LoopEngine: ...

    def result(self, run: Run) -> LoopResult: ...

    def debug_fork(self, source: RecordedRun, at: int | None = None, patch: Patch | None = None, *,
                   goal: str | None = None) -> DebugSession: ...


__all__ = ["DebugSession"]


class DebugSession(Stepper):
    """Made by `AgentLoop.debug(goal)`; nothing has run yet."""

    def __init__(self, loop: SteppedLoop, run: Run) -> None:
        super().__init__(loop.definition)
        self.loop = loop
        self._run = run
        self.parent: DebugSession | None = None
        """The session whose next transition calls this run as a child run (`step_into`);
        None for a run of its own."""
        self._furthest = Furthest.of(run)  # stepping back cuts the live run; forward again takes from it
        self._records = self._furthest.records
        self._snapshots: list[RunSnapshot] = [run.snapshot()]
        self._position = 0

    @property
    def goal(self) -> str:
        return self._run.goal

    @property
    def state(self) -> str:
        return self._run.state

    @property
    def loop_state(self) -> LoopState:
        return self._run.loop_state

    @property
    def messages(self) -> tuple[dict[str, Any], ...]:
        """The policy's messages so far (an LLM policy's chat history)."""
        return tuple(self._run.loop_state.messages)

    @property
    def run(self) -> Run:
        """The run being debugged (read it; stepping is the session's job)."""
        return self._run

    @property
    def result(self) -> LoopResult | None:
        """The run's LoopResult once it is done, else None."""
        return self.loop.result(self._run) if self.done else None

    def fork(self, patch: Patch | None = None) -> DebugSession:
        """A new session over a fork of this run at its next transition: the transitions
        taken so far replayed (nothing runs again), then live from here, with `patch`
        answering the next transition's call to the world (the observation it makes, for a
        tool call) instead of the world. This session is left as it is.

        Raises:
            PatchRefused: the patch does not fit the next transition's call (another kind,
                or no call: only a tool call takes a payload or an error).
            SessionFinished: the run has ended (step back first).
        """
        if self.done:
            raise SessionFinished(f"the run has ended in {self.state!r}; back() to a transition to fork at")
        recorded = RecordedRun(tuple(self._records[: self._position]), tuple(self._furthest.calls))
        return self.loop.debug_fork(recorded, at=self._position + 1, patch=patch, goal=self.goal)

    def step_into(self) -> DebugSession:
        """A session over the child run that the next transition's tool call makes (a tool
        `AgentLoop.as_tool` made), before anything of it runs: step it, break in it, go back
        in it as in any session, then `finish()` it to return here. Its path, goal and budgets
        are those the call would give it.

        Raises:
            SessionFinished: the run has ended.
            ValueError: (a UsageError) the next transition calls no agent tool, or the call's
                arguments break the tool's contract, or it is a recorded transition ahead
                (the child ran already: step over it).
        """
        from forge.agent.execution import ArgumentContractError, check_arguments
        from forge.machine.child import goal_of, planned

        if self.done:
            raise SessionFinished(f"the run has ended in {self.state!r}; there is no call to step into")
        if self._position < len(self._records):
            raise UsageError("the next transition is recorded (its child run has run): step over it, or fork here")
        run = self._run
        action, intent = run.facts.action, run.facts.intent
        tool = run.config.tools.get(action.tool_name) if action is not None else None
        if self.definition.state(run.state).action != "call_tool" or tool is None or tool.child is None \
                or intent is None:
            what = f"calls {tool.name!r}, which runs no loop" if tool is not None and tool.child is None else \
                "calls no tool"
            raise UsageError(f"the next transition (from {run.state!r}) {what}: step into needs the run to be about "
                             "to call an agent tool (a tool AgentLoop.as_tool made)")
        try:
            check_arguments(tool.contract, intent.arguments)
        except ArgumentContractError as refused:
            raise UsageError(f"the call will not run its child: {refused}") from None
        start = replace(planned(run, tool.child, tool.name), goal=goal_of(tool.schema, intent.arguments))
        child: DebugSession = tool.child.debug(start)
        child.parent = self
        return child

    def finish(self) -> TransitionRecord:
        """Run this child run to its end, then fire the parent's transition that calls it,
        which takes this run's result as the call's (nothing runs twice); returns that
        transition's record. Go on in `parent`.

        Raises:
            ValueError: (a UsageError) this session's run is not a child run (`step_into`).
        """
        from forge.machine.child import RAN

        if self.parent is None:
            raise UsageError("this run is not a child run: finish returns from a run step_into made")
        while not self.done:
            self._forward()
        result = self.result
        assert result is not None, "a done session has a result"
        token = RAN.set({**RAN.get(), self._run.trace.run_id: result})
        try:
            return self.parent.step()
        finally:
            RAN.reset(token)

    @property
    def replayable(self) -> int:
        """How many transitions ahead are already recorded (stepping over them runs nothing)."""
        return len(self._records) - self._position

    def _forward(self) -> TransitionRecord:
        if self._position < len(self._records):
            self._position += 1
            self._restore()
            return self._records[self._position - 1]
        try:
            record = self._fire()
        except KeyboardInterrupt:  # Ctrl-C inside the transition: the session stays where it was (its firing too)
            self._restore()
            raise
        self._furthest.reached(self._run, record)
        self._snapshots.append(self._run.snapshot())
        self._position += 1
        if self.done:  # the frontier ends once: observers hear of it once
            self._run.observers.finished(self._run, self.loop.result(self._run))
        return record

    @property
    def done(self) -> bool:
        """True once the run is in a terminal state where nobody answers it (a fork of an
        answered run replays the answers: each is a transition of its own)."""
        if self._position < len(self._records):
            return False  # a step back over an answer: the answer is ahead again
        engine = self.loop.engine
        return engine.is_terminal(self._run) and not engine.awaits_answer(self._run)

    def _fire(self) -> TransitionRecord:
        """The run's next transition: the one its state enables, or, waiting where a person
        answered, the answer's (`forge.machine.asking`)."""
        from forge.machine.child import calling

        run, engine = self._run, self.loop.engine
        with calling(run):  # a tool that runs a loop runs it as this run's child
            if not engine.is_terminal(run):
                return engine.fire(run)
            engine.answer(run)
        return run.trace[-1]

    def _backward(self) -> None:
        self._position -= 1
        self._restore()

    def _restore(self) -> None:
        self._run.restore(self._snapshots[self._position], self._furthest)
