"""Forks: a recorded run made again up to a transition, one outcome changed there, then live.

A run is its definition plus its journal (`forge.records.journal`). To fork it at
transition K, a run replays the journal's calls made before K, calling nothing in the
world; at K, a `Patch` may stand in for the outcome recorded there (a tool's result or
error, a policy decision, a verify answer, an approver answer); from K on, the run performs
live, with the loop's current tools and policy. `fork_plan` works out, before anything
runs, which calls are replayed and whether the patch fits the call recorded at K.

A patch's JSON form (`forge runs fork --patch FILE.json`, `Patch.from_json`) is one of::

    {"tool_result": VALUE}
    {"tool_error": "message", "retryable": false}
    {"decision": {"tool": "name", "arguments": {...}}}   or   {"decision": {"finish": ANSWER}}
    {"verified": true}
    {"approved": true}
    {"answered": {"kind": "approve", "value": FINGERPRINT}}   or   {"answered": null}

A person's answer to a waiting run (`forge.machine.asking`) is an outcome like any other:
`{"answered": {"kind": "text", "value": "the other reply"}}` makes the fork go on from
another reply; `null`, as if the wait's deadline had passed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from forge.errors import UsageError, WrongType
from forge.records.journal import WITHIN_CALLS, ForkOrigin, JournalEntry

__all__ = ["CALLS_OF_ACTION", "ForkPlan", "ForkSource", "Patch", "PatchRefused", "RecordedChild", "RecordedRun",
           "fork_plan", "goal_of", "read_recorded", "recorded_child"]

PATCH_KINDS = {"tool_result": "tool", "tool_error": "tool", "decision": "policy", "verified": "verify",
               "approved": "approver", "answered": "answer"}
"""Each form of patch, and the kind of call it replaces the outcome of."""


CALLS_OF_ACTION = {"select_tool": "policy", "call_tool": "tool", "verify_and_decide": "verify",
                   "request_approval": "approver"}
"""The kind of call each built-in stage makes to the world (record_observation makes none)."""


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """A run as far as it went: its trace and its journal (what a fork is made from, like a
    `LoopResult`; the debugger forks the run it is stepping through), and the child runs
    its tools made (`RecordedChild`s, as `LoopResult.children`)."""

    trace: Sequence[Any]
    journal: Sequence[JournalEntry]
    children: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class RecordedChild:
    """A child run read from its parent's trace file: as `forge.ChildRun`, with the child's
    recorded run in place of its `LoopResult`."""

    path: str
    tool: str
    transition: int
    result: RecordedRun


def read_recorded(path: str | os.PathLike[str], codec: Any = None) -> RecordedRun:
    """The run a trace file holds, with the child runs written in it (`forge.records.trace`).

    Raises:
        OSError, TraceFormatError: the file cannot be read.
    """
    from forge.records.trace import child_headers, read_journal, read_trace

    path = os.fspath(path)
    headers = child_headers(path)

    def run(run_id: str | None) -> RecordedRun:
        journal = read_journal(path, codec, run=run_id)
        own = run_id if run_id is not None else (headers[0]["parent"] if headers else journal.run_id)
        children = tuple(RecordedChild(str(h["run_id"]), str(h.get("tool", "")), int(h.get("transition", 0)),
                                       run(str(h["run_id"]))) for h in headers if h.get("parent") == own)
        return RecordedRun(read_trace(path, run=run_id), journal, children)

    return run(None)


def recorded_child(source: Any, child: str) -> tuple[Any, str | None]:
    """The child run of recorded run `source` (a `LoopResult` or `RecordedRun`) that `child`
    names, and the path below it when `child` names a grandchild: `child` is a path after
    the source's run id (`research.1`, `research.1/notes.1`) or a child's whole path.

    Raises:
        PatchRefused: the source has no such child run (naming the ones it has).
    """
    children = getattr(source, "children", ())
    if not isinstance(child, str) or not child.strip():
        raise PatchRefused(f"child must name a child run by its path (research.1), got {child!r}")
    for recorded in children:
        own = recorded.path.rsplit("/", 1)[0]
        relative = child[len(own) + 1:] if child.startswith(own + "/") else child
        head, _, rest = relative.partition("/")
        if recorded.path == f"{own}/{head}":
            return recorded, rest or None
    names = ", ".join(c.path.rsplit("/", 1)[1] for c in children) or "none: its tools ran no other loop"
    raise PatchRefused(f"the run has no child run {child!r}; its child runs are: {names}")


class PatchRefused(UsageError):
    """A fork's patch does not fit the call recorded at its transition (another kind of call,
    no call there, a tool the loop lacks, arguments the tool's contract refuses), or the
    transition is not one of the run's. Raised before anything runs."""


@dataclass(frozen=True, slots=True)
class Patch:
    """One recorded outcome, replaced: what the call at the fork's transition returns (or
    raises) instead of what it did. Make one with a classmethod:

    - `Patch.tool_result(value)`: the tool returned `value`;
    - `Patch.tool_error("message", retryable=False)`: the tool failed (`retryable=True`:
      with a `ToolError`, which the policy replans on; else a `PermanentToolError`), or
      `Patch.tool_error(exception)` with an exception of your own;
    - `Patch.decision(Intent.call("tool", ...))` or `Patch.decision(Finish(answer))`: the
      policy decided that;
    - `Patch.verified(True)`: verify answered that;
    - `Patch.approved(False)`: the approver answered that;
    - `Patch.answered(Answer.text("..."))`: a person answered the waiting run that (None:
      nobody did before the wait's deadline).
    """

    form: str
    value: Any = None
    error: BaseException | None = None

    @property
    def kind(self) -> str:
        """The kind of call this patch fits: tool, policy, verify or approver."""
        return PATCH_KINDS[self.form]

    @classmethod
    def tool_result(cls, value: Any) -> Patch:
        return cls("tool_result", value)

    @classmethod
    def tool_error(cls, error: BaseException | str, retryable: bool = False) -> Patch:
        if isinstance(error, str):
            from forge.agent.retry import PermanentToolError, ToolError

            error = ToolError(error) if retryable else PermanentToolError(error)
        if not isinstance(error, BaseException):
            raise WrongType(f"Patch.tool_error takes an exception or its message, got {type(error).__name__}")
        return cls("tool_error", None, error)

    @classmethod
    def decision(cls, decision: Any) -> Patch:
        from forge.policy import Finish, Intent

        if not isinstance(decision, (Intent, Finish)):
            raise WrongType(f"Patch.decision takes an Intent or a Finish, got {type(decision).__name__}")
        return cls("decision", decision)

    @classmethod
    def verified(cls, verified: bool) -> Patch:
        if not isinstance(verified, bool):
            raise WrongType(f"Patch.verified takes True or False, got {verified!r}")
        return cls("verified", verified)

    @classmethod
    def approved(cls, approved: bool | None) -> Patch:
        if approved is not None and not isinstance(approved, bool):
            raise WrongType(f"Patch.approved takes True, False or None (no answer), got {approved!r}")
        return cls("approved", approved)

    @classmethod
    def answered(cls, answer: Any) -> Patch:
        from forge.records.answers import Answer

        if answer is not None and not isinstance(answer, Answer):
            raise WrongType(f"Patch.answered takes an Answer or None (the deadline passed), got {answer!r}")
        return cls("answered", None if answer is None else answer.to_json())

    @classmethod
    def from_json(cls, data: Any) -> Patch:
        """The patch a JSON object describes (see the module).

        Raises:
            ValueError: (a UsageError) the object is not one of the forms, naming them.
        """
        forms = ", ".join(PATCH_KINDS)
        if not isinstance(data, dict):
            raise UsageError(f"a patch must be a JSON object with one of: {forms}; got {type(data).__name__}")
        given = [key for key in data if key in PATCH_KINDS]
        if len(given) != 1:
            raise UsageError(f"a patch names exactly one of: {forms}; got {', '.join(map(repr, data)) or 'nothing'}")
        form = given[0]
        extra = set(data) - {form, "retryable"} if form == "tool_error" else set(data) - {form}
        if extra:
            raise UsageError(f"a {form} patch takes no {', '.join(sorted(extra))}")
        retryable = data.get("retryable", False)
        if not isinstance(retryable, bool):
            raise UsageError(f"'retryable' must be true or false, got {retryable!r}")
        try:
            return cls._of(form, data[form], retryable)
        except WrongType as wrong:
            raise UsageError(f"{form!r}: {wrong}") from None

    @classmethod
    def _of(cls, form: str, value: Any, retryable: bool) -> Patch:
        if form == "tool_result":
            return cls.tool_result(value)
        if form == "tool_error":
            if not isinstance(value, str):
                raise UsageError(f"'tool_error' must be the error's message, got {value!r}")
            return cls.tool_error(value, retryable=retryable)
        if form == "decision":
            return cls.decision(_decision_of(value))
        if form == "verified":
            return cls.verified(value)
        if form == "answered":
            return cls.answered(_answer_of(value))
        return cls.approved(value)

    def to_json(self) -> dict[str, Any]:
        """This patch as `from_json` reads it (an error as its message)."""
        if self.form == "tool_error":
            from forge.agent.retry import ToolError

            return {"tool_error": str(self.error), "retryable": isinstance(self.error, ToolError)}
        if self.form == "decision":
            from forge.policy import Finish

            if isinstance(self.value, Finish):
                return {"decision": {"finish": self.value.answer}}
            decision: dict[str, Any] = {"arguments": dict(self.value.arguments)}
            if self.value.tool is not None:
                decision["tool"] = self.value.tool
            else:
                decision["capabilities"] = sorted(self.value.capabilities)
            return {"decision": json.loads(json.dumps(decision, default=repr))}
        return {self.form: json.loads(json.dumps(self.value, default=repr))}


def _answer_of(value: Any) -> Any:
    from forge.records.answers import Answer

    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        raise UsageError(f"'answered' must be an answer, {{\"kind\": …, \"value\": …}}, or null; got {value!r}")
    return Answer.from_json(value)


def _decision_of(value: Any) -> Any:
    from forge.policy import Finish

    if not isinstance(value, dict):
        raise UsageError(f"'decision' must be an object: {{\"tool\": …, \"arguments\": …}} or {{\"finish\": …}}, "
                         f"got {value!r}")
    if "finish" in value:
        if set(value) != {"finish"}:
            raise UsageError(f"a 'decision' with 'finish' takes nothing else, got {', '.join(sorted(set(value) - {'finish'}))}")
        return Finish(value["finish"])
    unknown = set(value) - {"tool", "capabilities", "arguments"}
    if unknown:
        raise UsageError(f"'decision' takes 'tool' or 'capabilities', and 'arguments'; not {', '.join(sorted(unknown))}")
    return _call_decision(value)


def _call_decision(value: Mapping[str, Any]) -> Any:
    """A patched decision that calls a tool, by name or by capabilities, read from JSON.

    Raises:
        UsageError: naming what is wrong."""
    from forge.policy import Intent

    arguments = value.get("arguments", {})
    if not isinstance(arguments, dict):
        raise UsageError(f"'decision.arguments' must be an object, got {arguments!r}")
    if "tool" in value and "capabilities" in value:
        raise UsageError("'decision' names a 'tool' or 'capabilities', not both")
    if "tool" in value:
        if not isinstance(value["tool"], str) or not value["tool"].strip():
            raise UsageError(f"'decision.tool' must be a tool's name, got {value['tool']!r}")
        return Intent(frozenset(), arguments, tool=value["tool"])
    if "capabilities" in value:
        capabilities = value["capabilities"]
        if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
            raise UsageError(f"'decision.capabilities' must be a list of strings, got {capabilities!r}")
        return Intent(capabilities, arguments)
    raise UsageError("'decision' names a 'tool' (or 'capabilities') to call, or a 'finish' answer")


@dataclass(frozen=True, slots=True)
class ForkPlan:
    """What a fork replays: `replayed`, the recorded calls made before transition `at`,
    then the patched call at `at` when there is a patch (`patched`: its index in
    `replayed`, else None); and `origin`, what the fork's journal says it came from. With
    `at` None, every recorded call, replayed as long as the run makes them (the fork goes
    live at the first it does not: `origin.transition` is set once that is known)."""

    at: int | None
    replayed: tuple[JournalEntry, ...]
    patched: int | None
    origin: ForkOrigin
    goal: str
    pending: Patch | None = None
    """A patch for a transition past the recorded ones (the debugger's next transition):
    it answers the first call of its kind made at `at`."""


def goal_of(recorded: Sequence[JournalEntry]) -> str | None:
    """The goal a recorded run's first policy call was asked, if it made one."""
    return next((e.identity[0] for e in recorded if e.kind == "policy" and isinstance(e.identity, tuple)), None)


@dataclass(frozen=True)
class ForkSource:
    """A recorded run as a fork reads it: its `journal`, how many `transitions` it fired,
    its `run_id` (empty: the journal's), the `goal` it was given (None: the goal its
    first policy call was asked) and `next_action`, the action of the state it was left
    in when that state is not terminal (a patch may then answer the call it makes next)."""

    journal: Sequence[JournalEntry]
    transitions: int
    run_id: str = ""
    goal: str | None = None
    next_action: str | None = None


def fork_plan(source: ForkSource, at: int | None, patch: Patch | None,
              tools: Mapping[str, Any] | Collection[str]) -> ForkPlan:
    """Plan a fork of the run `source` at transition `at` (1-based), with `patch`
    replacing the outcome of the first call recorded at `at`. `tools` are the forking
    loop's tools by name (a patched decision must call one of them, with arguments its
    contract accepts), or only their names where the tools themselves are not at hand
    (`forge runs fork`): then a decision's tool is checked by name, and its arguments when
    the run reaches them. `at` may be one past the recorded transitions when
    `source.next_action` says which kind of call a patch there would answer.

    Raises:
        PatchRefused: `at` is not one of the run's transitions; the patch is not a Patch;
            the run made no call at `at`, or one of another kind; a patched decision calls
            a tool the loop lacks, or with arguments its contract refuses.
        ValueError: no goal is given and the journal records no policy call.
    """
    recorded, transitions, next_action = source.journal, source.transitions, source.next_action
    _check_fork(transitions, at, patch, next_action)
    goal = source.goal if source.goal is not None else goal_of(recorded)
    if goal is None:
        raise UsageError("the journal records no policy call to take the goal from: pass goal=...")
    run_id = source.run_id or (recorded[0].run_id if len(recorded) else "")
    if at is None:
        return ForkPlan(None, tuple(recorded), None, ForkOrigin(run_id, 0), goal)
    before = tuple(entry for entry in recorded if entry.transition < at)
    origin = ForkOrigin(run_id, at, None if patch is None else patch.to_json())
    if patch is None:
        return ForkPlan(at, before, None, origin, goal)
    there = [entry for entry in recorded if entry.transition == at and entry.kind not in WITHIN_CALLS]
    if not there and at > transitions and next_action is not None:
        _check_pending(patch, tools, at, next_action)
        return ForkPlan(at, before, None, origin, goal, pending=patch)
    if not there:
        made = sorted({entry.transition for entry in recorded})
        raise PatchRefused(f"transition {at} made no call to the world, so there is no outcome to patch; "
                           f"calls were made at transitions {_ranges(made)}")
    if patch.kind == "policy" and there[0].kind == "model":  # a model policy: its last reply at `at` says the decision
        return _model_decision_plan(ForkPlan(at, before, None, origin, goal), there, patch, tools)
    call = there[0]
    if call.kind != patch.kind:
        raise PatchRefused(f"transition {at} called {_called(call)}; a {patch.form} patch replaces what "
                           f"{_KIND_NAMES[patch.kind]} returns, so it does not fit")
    patched = replace(call, value=patch.value, error=patch.error)
    if patch.form == "decision":
        patched = _decision_entry(patched, call, patch.value, tools, at)
    return ForkPlan(at, (*before, patched), len(before), origin, goal)


def _check_fork(transitions: int, at: int | None, patch: Patch | None, next_action: str | None) -> None:
    """Refuse a fork at no transition of the run, or with a patch that is not one.

    Raises:
        PatchRefused: naming what is wrong."""
    if at is None and patch is not None:
        raise PatchRefused("a patch replaces the outcome at one transition: pass at=K with it")
    last = transitions + 1 if next_action is not None else max(transitions, 1)
    if at is not None and (isinstance(at, bool) or not isinstance(at, int) or not 1 <= at <= last):
        raise PatchRefused(f"cannot fork at transition {at!r}: the run fired transitions 1 to {transitions}")
    if patch is not None and not isinstance(patch, Patch):
        raise PatchRefused(f"patch must be a forge Patch (Patch.tool_result(...), Patch.decision(...), …), "
                           f"got {type(patch).__name__}")


def _check_pending(patch: Patch, tools: Mapping[str, Any] | Collection[str], at: int, next_action: str) -> None:
    """Refuse a patch for the transition past the recorded ones that its action would not
    make (a tool's result where the policy decides), or a decision the loop cannot make.

    Raises:
        PatchRefused: naming what is wrong."""
    kind = CALLS_OF_ACTION.get(next_action)
    if kind != patch.kind:
        calls = f"which calls {_KIND_NAMES[kind]}" if kind else "which calls nothing in the world"
        raise PatchRefused(f"transition {at} runs {next_action}, {calls}; a {patch.form} patch does not fit")
    if patch.form == "decision":
        _checked_decision(patch.value, tools, at)


_KIND_NAMES = {"tool": "a tool", "policy": "the policy", "verify": "verify", "approver": "the approver",
               "model": "the model", "answer": "a person"}


def _model_decision_plan(unpatched: ForkPlan, there: Sequence[JournalEntry], patch: Patch,
                         tools: Mapping[str, Any] | Collection[str]) -> ForkPlan:
    """A decision patch for a policy that asks a model (`forge.policy.ModelPolicy`): the
    policy's code runs again at the fork's transition, and its last request there (of the
    calls made `there`) is answered with the reply a model would have sent to make the
    patched decision, so the conversation says it too. `unpatched` is the fork without it."""
    at = unpatched.origin.transition
    tool_name = _checked_decision(patch.value, tools, at)
    asked = [entry for entry in there if entry.kind == "model"]
    last = asked[-1]
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
    answered = replace(last, value={"message": _decision_message(patch.value, tool_name, f"forge-fork-{at}"),
                                    "usage": usage}, error=None)
    replayed = (*unpatched.replayed, *asked[:-1], answered)
    return replace(unpatched, replayed=replayed, patched=len(replayed) - 1)


def _called(entry: JournalEntry) -> str:
    return f"tool {entry.name!r}" if entry.kind == "tool" else _KIND_NAMES.get(entry.kind, entry.kind)


def _decision_entry(patched: JournalEntry, recorded: JournalEntry, decision: Any,
                    tools: Mapping[str, Any] | Collection[str], at: int) -> JournalEntry:
    """The policy call at `at` answered by `decision`, checked against the loop's tools; a
    chat policy's recorded reply is replaced by one that says the same as the decision."""
    tool_name = _checked_decision(decision, tools, at)
    messages = list(recorded.messages)
    if messages:
        said = _decision_message(decision, tool_name, f"forge-fork-{at}")
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
        if last is None:
            messages.append(said)
        else:
            messages[last] = said
    return replace(patched, messages=tuple(messages))


def _checked_decision(decision: Any, tools: Mapping[str, Any] | Collection[str], at: int) -> str | None:
    """The tool a patched decision selects (None for a Finish). Raises PatchRefused when it
    selects none of `tools`, or its arguments break the tool's contract."""
    from forge.agent.actions import NoMatchingTool, select_action, select_named
    from forge.agent.execution import ArgumentContractError, check_arguments
    from forge.policy import Intent

    tool_name = None
    if isinstance(decision, Intent) and not isinstance(tools, Mapping):
        if decision.tool is not None and decision.tool not in tools:
            raise PatchRefused(f"the patched decision at transition {at} selects no tool of this loop: no tool named "
                               f"{decision.tool!r} (the loop has: {', '.join(sorted(tools))})")
        tool_name = decision.tool
    elif isinstance(decision, Intent) and isinstance(tools, Mapping):
        specs = [tool.spec for tool in tools.values()]
        try:
            action = (select_named(decision.tool, specs) if decision.tool is not None
                      else select_action("fork", decision.capabilities, specs))
        except (NoMatchingTool, ValueError) as refused:
            raise PatchRefused(f"the patched decision at transition {at} selects no tool of this loop: {refused}") \
                from None
        tool_name = action.tool_name
        try:
            check_arguments(tools[tool_name].contract, decision.arguments)
        except ArgumentContractError as refused:
            raise PatchRefused(f"the patched decision at transition {at}: {refused}") from None
    return tool_name


def _decision_message(decision: Any, tool: str | None, call_id: str) -> dict[str, Any]:
    """The assistant message (chat-completions form) a model would have sent to make
    `decision`: a call of `tool` with the intent's arguments under `call_id`, or the final
    answer. It stands in the conversation in place of the recorded reply, so that later
    turns of a chat policy see the call that was made."""
    from forge.policy import Finish

    if isinstance(decision, Finish):
        answer = decision.answer
        return {"role": "assistant", "content": answer if isinstance(answer, str) else json.dumps(answer, default=str)}
    arguments = json.dumps(dict(decision.arguments), default=str)
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": tool or decision.tool or "", "arguments": arguments}}]}


def _ranges(numbers: Sequence[int]) -> str:
    return ", ".join(map(str, numbers[:20])) + (" …" if len(numbers) > 20 else "") if numbers else "none"
