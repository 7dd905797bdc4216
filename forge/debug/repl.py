"""The `forge debug` / `forge replay` REPL: a person's face over a Stepper.

Built on the standard library's `cmd`. Every command is one method of the session; a
mistake (unknown command, bad argument, stepping a finished run) prints one line and the
session goes on. Colour only on a terminal, and never with NO_COLOR set.
"""

from __future__ import annotations

import cmd
import os
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

from forge.debug.replay import ReplaySession
from forge.debug.session import DebugSession
from forge.debug.stepper import AtStart, SessionFinished, Stepper
from forge.diagram import GraphvizNotInstalled, render
from forge.errors import ForgeError, UsageError
from forge.narrate import decided_by, describe, shorten
from forge.records.details import arguments_of, chosen_call, finish_of, payload_of
from forge.records.trace import TransitionRecord, summary

__all__ = ["DebugShell"]

_EXPECTED = (SessionFinished, AtStart, ValueError, GraphvizNotInstalled, OSError, ForgeError)


class DebugShell(cmd.Cmd):
    """`step [N]`, `step into`, `finish`, `continue`, `break STATE|TRIGGER`, `delete [ID|all]`,
    `breaks`, `where`, `obs [N]`, `show [K]`, `messages`, `trace`, `back [N]`,
    `fork [payload JSON | error TEXT]`, `diagram PATH`, `help`, `quit` (or Ctrl-D); Ctrl-C at
    the prompt cancels the line."""

    def __init__(self, session: Stepper, stdin: IO[str] | None = None, stdout: IO[str] | None = None,
                 colour: bool | None = None) -> None:
        super().__init__(stdin=stdin, stdout=stdout)
        self.session = session
        self.use_rawinput = stdin is None
        out = stdout or sys.stdout
        self.colour = (out.isatty() and "NO_COLOR" not in os.environ) if colour is None else colour
        kind = "replay of a recorded run (nothing executes)" if isinstance(session, ReplaySession) else "live run"
        goal = f"\ngoal: {session.goal}" if isinstance(session, DebugSession) else ""
        self.intro = f"forge debugger · {session.definition.name} · {kind}{goal}\ntype help for commands"
        self._update_prompt()

    # presentation
    def _paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour else text

    def say(self, text: str = "") -> None:
        self.stdout.write(text + "\n")

    def error(self, text: str) -> None:
        """A mistake, on stderr (stdout keeps the session's own output)."""
        sys.stderr.write(self._paint(f"error: {text}", "31") + "\n")
        sys.stderr.flush()

    def _update_prompt(self) -> None:
        state = self._paint(self.session.state, "1;36")
        self.prompt = f"(forge {state} step {self.session.step_number}) "

    def precmd(self, line: str) -> str:
        if not self.stdin.isatty() and line != "EOF":
            self.say(line)  # piped commands are not echoed by a terminal: keep transcripts readable
        return line

    def postcmd(self, stop: bool, line: str) -> bool:
        self._update_prompt()
        return stop

    def onecmd(self, line: str) -> bool:
        try:
            return super().onecmd(line)
        except _EXPECTED as error:
            self.error(str(error).splitlines()[0])
            return False

    def emptyline(self) -> bool:
        return False

    def default(self, line: str) -> None:
        self.error(f"unknown command {line.split()[0]!r}; type help for the commands")

    def _show(self, record: Any) -> None:
        self.say(describe(record))
        if self.session.done:
            self.say(self._paint(f"run ended in {self.session.state}", "1"))

    # commands
    def do_step(self, arg: str) -> None:
        """step [N]: fire the next transition (or the next N; stops early at the end).
        step into: go into the child run the next transition's agent tool makes (finish
        returns)."""
        if arg.strip() == "into":
            self._step_into()
            return
        count = _count(arg)
        for _ in range(count):
            self._show(self.session.step())
            if self.session.done:
                break

    def _step_into(self) -> None:
        if not isinstance(self.session, DebugSession):
            raise UsageError("step into steps a live run's child run; a replay has none to run")
        child = self.session.step_into()
        self.session = child
        self.say(self._paint(f"in child run {child.run.trace.run_id} ({child.definition.name}); goal: "
                             f"{shorten(child.goal, 200)}", "1"))
        self.say("finish runs it to its end and returns to the calling run")

    def do_finish(self, arg: str) -> None:
        """finish: run the child run to its end and return to the run that called it (its
        calling transition fired with the child's answer)."""
        _no_argument("finish", arg)
        child = self.session
        if not isinstance(child, DebugSession) or child.parent is None:
            raise UsageError("not in a child run: step into one first")
        record = child.finish()
        result = child.result
        assert result is not None, "a finished child run has a result"
        self.session = child.parent
        self.say(self._paint(f"child run {child.run.trace.run_id} ended in {result.reason}", "1"))
        self._show(record)

    def do_continue(self, arg: str) -> None:
        """continue: run to the next breakpoint or the end of the run (Ctrl-C stops it)."""
        _no_argument("continue", arg)
        shown, last = [0], [time.monotonic()]

        def progress(record: Any) -> None:  # the first lines as they come, then a line a second
            shown[0] += 1
            if shown[0] <= 20:
                self.say(describe(record))
            elif time.monotonic() - last[0] >= 1.0:
                last[0] = time.monotonic()
                self.say(f"… {shown[0]} transitions so far, at {record.dest} in step {record.step}")
            self.stdout.flush()

        outcome = self.session.continue_(progress)
        if len(outcome.fired) > 20:
            self.say(f"… {len(outcome.fired)} transitions in all; the last: {describe(outcome.fired[-1]).strip()}")
        if outcome.interrupted:
            self.say(self._paint(f"interrupted after {len(outcome.fired)} transitions; the session is at "
                                 f"{self.session.state}, step {self.session.step_number}", "33"))
        elif outcome.hit is not None:
            self.say(self._paint(f"stopped at breakpoint {outcome.hit}", "33"))
        elif self.session.done:
            self.say(self._paint(f"run ended in {self.session.state}", "1"))

    def do_break(self, arg: str) -> None:
        """break STATE|TRIGGER: stop continue on entering STATE or firing TRIGGER
        (write state:NAME or trigger:NAME when a name is both)."""
        name = arg.strip()
        if not name or len(name.split()) != 1:
            raise UsageError("usage: break STATE|TRIGGER")
        states = {s.name for s in self.session.definition.states}
        triggers = {t.trigger for t in self.session.definition.transitions}
        kind, _, target = name.partition(":") if ":" in name else ("", "", name)
        if kind == "state" or (not kind and target in states):
            point = self.session.break_at(target)
        elif kind == "trigger" or (not kind and target in triggers):
            point = self.session.break_at(trigger=target)
        else:
            raise UsageError(f"{name!r} is neither a state ({', '.join(sorted(states))}) "
                             f"nor a trigger ({', '.join(sorted(triggers))})")
        self.say(f"breakpoint {point}")

    def do_delete(self, arg: str) -> None:
        """delete [ID|all]: remove one breakpoint, or all of them."""
        target = arg.strip()
        if target in ("", "all"):
            self.session.clear_breakpoints()
            self.say("all breakpoints deleted")
            return
        removed = self.session.remove_breakpoint(_count(target.lstrip("#")))
        self.say(f"deleted breakpoint {removed}")

    def do_breaks(self, arg: str) -> None:
        """breaks: list the breakpoints."""
        _no_argument("breaks", arg)
        points = self.session.breakpoints
        self.say("\n".join(str(p) for p in points) if points else "no breakpoints")

    def do_where(self, arg: str) -> None:
        """where: the current state, the step, and the last transition with every guard's value."""
        _no_argument("where", arg)
        session = self.session
        status = "ended" if session.done else "at"
        self.say(f"{status} {self._paint(session.state, '1;36')} · step {session.step_number} · "
                 f"{len(session.trace)} transitions taken")
        if session.trace:
            last = session.trace[-1]
            decider = decided_by(last)
            why = "unguarded" if decider == "(unguarded)" else f"decided by {decider}"
            self.say(f"last: {last.source} ─{last.trigger}→ {last.dest} ({why})")
            for guard in last.guards:
                self.say(f"  {guard.name:<32} {self._paint(str(guard.value), '32' if guard.value else '2')}")
            call = _call_of_step(session.trace, last.step)
            if call is not None and not session.done:
                self.say(f"call: {shorten(call, 200)}")
            payload = payload_of(last, _NONE)
            if payload is not _NONE:
                self.say(f"payload: {shorten(str(payload), 200)}")
        if isinstance(session, DebugSession) and session.replayable:
            ahead = session.replayable
            plural = "s" if ahead != 1 else ""
            self.say(f"{ahead} transition{plural} ahead recorded: stepping replays them, nothing executes")

    def do_obs(self, arg: str) -> None:
        """obs [N]: the observations recorded so far, a line each; with N, observation #N
        whole (its payload not cut)."""
        session = self.session
        rows: Sequence[Any] = ()
        if isinstance(session, DebugSession):
            rows = session.loop_state.observations
        elif isinstance(session, ReplaySession):
            rows = session.observations
        if arg.strip():
            number = _count(arg)
            if not 1 <= number <= len(rows):
                raise UsageError(f"there is no observation #{number}: {len(rows)} recorded so far")
            row = rows[number - 1]
            self.say(f"#{row.sequence} {row.tool_name}: {row.status}")
            self.say(_whole(getattr(row, "payload", None)))
            return
        if not rows:
            self.say("no observations yet")
        calls = _calls_of(session.trace)  # the arguments of each observation the trace recorded, in order
        offset = len(rows) - len(calls)  # observations of earlier turns of a conversation come first
        for index, row in enumerate(rows):
            payload = getattr(row, "payload", None)
            shown = "" if payload is None else f" · {shorten(summary(payload, 200), 80)}"
            called = getattr(row, "arguments", None) if isinstance(session, ReplaySession) else (
                calls[index - offset] if index >= offset else None)
            called = None if called == '{}' else called
            self.say(f"#{row.sequence} {row.tool_name}{'' if called is None else ' ' + shorten(called, 60)}: "
                     f"{row.status}{shown}")

    def do_messages(self, arg: str) -> None:
        """messages: the policy's conversation so far (an LLM policy's chat history)."""
        _no_argument("messages", arg)
        messages = self.session.messages
        if not messages:
            self.say("no messages yet (only a chat policy keeps a conversation)")
        for message in messages:
            calls = message.get("tool_calls") or ()
            said = ", ".join(f"{c['function']['name']}({c['function'].get('arguments', '')})" for c in calls)
            text = message.get("content") or ""
            if message.get("role") == "tool":
                text = f"[{message.get('tool_call_id')}] {text}"
            self.say(shorten(f"{message.get('role')}: {text}{' → ' + said if said else ''}", 160))

    def do_trace(self, arg: str) -> None:
        """trace: every transition taken so far."""
        _no_argument("trace", arg)
        trace = self.session.trace
        self.say("\n".join(describe(r) for r in trace) if trace else "no transitions yet")

    def do_back(self, arg: str) -> None:
        """back [N]: return to the state before the last transition (or the last N; nothing
        is undone twice)."""
        for _ in range(_count(arg)):
            record = self.session.back()
            move = f"{record.source} ─{record.trigger}→ {record.dest}"
            self.say(f"back over {record.sequence}: {move}; now in {self.session.state}")
            if not self.session.trace:
                break

    def do_show(self, arg: str) -> None:
        """show [K]: transition K (default: the last taken) whole: its guards and every
        fact of its detail, nothing cut."""
        trace = self.session.trace
        if not trace:
            raise UsageError("no transition taken yet")
        number = _count(arg) if arg.strip() else len(trace)
        if not 1 <= number <= len(trace):
            raise UsageError(f"there is no transition {number} taken: 1 to {len(trace)}")
        record = trace[number - 1]
        self.say(describe(record))
        for guard in record.guards:
            self.say(f"  {guard.name:<32} {guard.value}")
        self.say(_whole(dict(record.detail)))

    def cmdloop(self, intro: Any = None) -> None:
        """The prompt loop; Ctrl-C at the prompt cancels the line being typed, not the
        session (Ctrl-D or `quit` ends it)."""
        while True:
            try:
                super().cmdloop(intro)
                return
            except KeyboardInterrupt:
                self.say("^C")
                intro = ""

    def do_fork(self, arg: str) -> None:
        """fork [payload JSON | error TEXT | fatal TEXT]: fork the run at the next transition
        and go on live from there; with `payload`, the next tool call returns that JSON
        instead of running; with `error`, it fails with TEXT for the policy to replan
        (a ToolError); with `fatal`, it fails for good (a PermanentToolError)."""
        import json

        from forge.machine.fork import Patch

        session = self.session
        if not isinstance(session, DebugSession):
            raise UsageError("fork goes on live, which needs the loop's code: open the recorded run with "
                             "forge debug RUN.jsonl --scenario FILE")
        kind, _, rest = arg.strip().partition(" ")
        patch: Patch | None = None
        if kind == "payload":
            try:
                patch = Patch.tool_result(json.loads(rest))
            except json.JSONDecodeError as error:
                raise UsageError(f"fork payload takes JSON: {error.msg} in {rest!r}") from None
        elif kind in ("error", "fatal"):
            if not rest.strip():
                raise UsageError(f"usage: fork {kind} TEXT")
            patch = Patch.tool_error(rest.strip(), retryable=kind == "error")
        elif kind:
            raise UsageError("usage: fork, fork payload JSON, fork error TEXT or fork fatal TEXT")
        at = len(session.trace) + 1
        self.session = session.fork(patch)
        what = "" if patch is None else f", its tool call answered with {patch.to_json()}"
        self.say(f"forked at transition {at}{what}: stepping on runs live")

    def do_diagram(self, arg: str) -> None:
        """diagram PATH: write the machine with the path so far (format from the suffix)."""
        path = arg.strip()
        if not path:
            raise UsageError("usage: diagram PATH (e.g. diagram run.svg)")
        written = render(self.session.definition, path, trace=self.session.trace)
        self.say(f"wrote {written}")

    def do_quit(self, arg: str) -> bool:
        """quit: leave the debugger (Ctrl-D too)."""
        return True

    def do_EOF(self, arg: str) -> bool:
        self.say()
        return True


def _count(text: str) -> int:
    text = text.strip()
    if not text:
        return 1
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"expected a positive whole number, got {text!r}")
    return int(text)


def _calls_of(trace: Sequence[TransitionRecord]) -> list[str | None]:
    """For each observation a trace recorded, in order, the arguments of the call that made
    it (None for a finish): the select before it said which, and only that select."""
    calls: list[str | None] = []
    arguments: str | None = None
    for record in trace:
        if arguments_of(record) is not None or finish_of(record) is not None:
            arguments = arguments_of(record)
        if record.verdict == "recorded":  # record_observation's verdict: an observation was recorded
            calls.append(arguments)
            arguments = None
    return calls


def _whole(value: Any) -> str:
    """`value` in full: JSON, indented, when it has a JSON form, else its repr."""
    import json

    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def _no_argument(command: str, arg: str) -> None:
    if arg.strip():
        raise UsageError(f"{command} takes no argument")


def _call_of_step(trace: Sequence[TransitionRecord], step: int) -> str | None:
    """`tool {arguments}` as the select record of `step` chose it, if the trace has one."""
    for record in reversed(trace):
        if record.step != step:
            return None
        arguments = arguments_of(record)
        if arguments is not None:
            chosen = chosen_call(record)
            return f"{chosen[0] if chosen is not None else '?'} {arguments}"
    return None


_NONE = object()
