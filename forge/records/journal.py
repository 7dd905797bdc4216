"""The journal: every call a run made to the world, in order, with what came back.

A run's transitions are decided by its stage actions, and an action reaches outside the
machine only through effects (`forge.records.effects`). Of those, the ones whose outcome the
run depends on and cannot compute again for free are *calls to the world*: a policy
decision, a tool attempt, a verify, an approver's answer, and a wait between retries. Each
one performed is a `JournalEntry`: its identity (run id, transition, step, kind, name and a
canonical hash of what it was asked) and its outcome (a value, or the exception it raised).
A policy decision also keeps the messages it added to the conversation. A request a policy
sends to a model through forge (`forge.policy.ModelPolicy`) is a call of its own, whose
identity is the request itself.

Given a run's definition, its configuration and its journal, the run can be made again
without calling anything (`AgentLoop.replay`): the journal *is* the run's history, and the
trace follows from it. Local code (user stages, `redact`, observers) is not journaled: it
runs again on replay.

JSON Lines form, written with the trace (`write_trace(trace, path, journal=result.journal)`,
read back by `forge.records.trace.read_journal`)
as lines of trace version 3, each a call made while the transition of the same `transition`
number fired (so it stands before that transition's record)::

    {"v": 3, "type": "call", "run_id": "3f2a…", "transition": 4, "step": 2, "kind": "tool",
     "name": "read_file", "args_sha256": "9c1e…", "value": {"text": "…"}}

- `kind` is `model`, `policy`, `tool`, `verify`, `approver`, `wait`, `answer` or `handoff`;
  `name` is the tool's name for a tool attempt, the model's for a model request, the waiting
  state's for a person's answer, the loop handed to for a handoff (`forge.Handoff`: its value
  is that loop's answer), and the kind otherwise.
- `args_sha256` is the SHA-256 of the canonical JSON (sorted keys, no spaces) of what the
  call was asked: a tool's arguments; for the policy `[goal, observations seen]`; for verify
  the observation's sequence; for the approver the call's fingerprint; for a wait its
  seconds; for an answer the question (`Waiting.identity`), whose value is the answer
  (`Answer.to_json()`), or null when the wait's deadline passed. Values without a
  canonical form hash their `repr`. (Kept small in memory: a run holds a few entries per
  step.)
- Exactly one of `value` (what it returned) and `error` (what it raised:
  `{"type": "module:QualName", "kind": …, "message": …, "args": […], "attributes": {…}}`,
  see `forge.records.recorded`: reading it imports nothing) is present.
  A policy's decision is `{"$forge": "intent", …}`, a list of them (calls asked at once),
  `{"$forge": "finish", "answer": …}` or `{"$forge": "ask", "question": …}`.
- `asked` (policy calls only) is what the policy was asked: `{"goal": …, "observations": n}`,
  with `"code": true` when the policy ran as code (a replay runs it again and checks its
  decision; without it, the decision is the world's answer, taken from the journal: see
  `DecidedAsCode`); a replay from the file takes its goal from the first one.
- `request` (model calls only) is the request sent: the model, the messages, the tools and
  the options, as JSON; its value is the reply, `{"message": {…}, "usage": {…}}`. A replay
  that sends another request names the first field that differs (`messages[0].content`).
- `messages` (policy calls only, when it added any) lists the messages it added.

Values are written in forge's one wire form (`forge.records.wire`): plain JSON as it is
(tuples as lists), a typed answer (a pydantic model or dataclass) as its JSON with its
schema. Another value JSON cannot hold exactly (an object, a set, a dict with non-string
keys) is refused with `JournalEncodeError` naming the call, unless the journal has a codec
(`AgentLoop(codec=...)`, a `JournalCodec`): the codec's `encode` makes it JSON and its
`decode` makes it back, written as `{"$codec": …}`.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from forge.errors import ForgeError, UsageError, WrongType
from forge.records.columns import Columns
from forge.records.recorded import RecordedError, error_from  # noqa: F401 (RecordedError lived here first)
from forge.records.wire import NoWireForm, decode, encode, error_form

__all__ = [
    "ContractRefused",
    "DecidedAsCode",
    "JOURNAL_KINDS",
    "WITHIN_CALLS",
    "Journal",
    "JournalCodec",
    "JournalEncodeError",
    "JournalEntry",
    "JournalMiss",
    "ForkOrigin",
    "SharedRequests",
    "decided_as_code",
    "first_difference",
    "identity_hash",
    "journal_lines",
    "same_decision",
    "shared_prefix",
]

JOURNAL_KINDS = ("model", "policy", "guard", "tool", "verify", "approver", "wait", "answer", "handoff", "sampling")
"""The kinds of call a journal records, in the order a step usually makes them. A
`sampling` call is one made inside a tool call (an MCP server asking the run's model,
`forge.mcp.asking`): journaled as it settles, before the tool call it was made in, and
replayed with that call (`WITHIN_CALLS`)."""

WITHIN_CALLS = frozenset({"sampling"})
"""The kinds of call made inside a tool call: a replay answering the tool call takes them
with it, and a tool call made again after a crash is answered them in order."""

class DecidedAsCode(NamedTuple):
    """What a policy that runs as code was asked (a decision's identity, equal to the plain
    `(goal, observations)` tuple every decision has): a replay runs the policy again and
    checks that it decides what the journal records. A decision whose identity is a plain
    tuple is the world's answer, taken from the journal without running the policy (a
    `RecordedPolicy`'s, an answer a person gave, a fork's patch, and every decision of a
    journal written before forge ran policies as code)."""

    goal: str
    observations: int


def decided_as_code(entry: JournalEntry) -> bool:
    """Whether `entry` is a decision a replay checks by running the policy again."""
    return isinstance(entry.identity, DecidedAsCode)


class JournalCodec(Protocol):
    """How a journal writes values JSON cannot hold exactly, and reads them back.

    `encode(value)` returns JSON-safe data for `value`, or raises TypeError for a value it
    does not handle (the journal then refuses it, naming the call); `decode(data)` returns
    the value `encode` was given."""

    def encode(self, value: Any) -> Any: ...

    def decode(self, data: Any) -> Any: ...


class JournalMiss(ForgeError, LookupError):
    """A replay made a call its journal does not have where it was due: the journal ended,
    or the call recorded there is another one (another kind, name, transition, step or
    other arguments), or the run ended before the journal did. `expected` is the recorded
    entry (None when the journal ended), `made` the call the run made instead (None when
    the run ended first)."""

    def __init__(self, expected: JournalEntry | None, made: JournalEntry | None, ended_in: str = "") -> None:
        if made is None:
            assert expected is not None
            what = (f"the run ended in {ended_in!r} without making {expected.describe()}, which the journal "
                    "records next")
        elif expected is None:
            what = f"the journal has no more calls, but the run made {made.describe()}"
        else:
            what = _miss_text(expected, made)
        super().__init__(f"journal miss: {what}")
        self.expected, self.made = expected, made


class ContractRefused(JournalMiss):
    """A replay met a call its journal records as made, which the tool's argument contract
    refuses today (an argument renamed or retyped since it was recorded): a live run would
    refuse it before any handler ran, so the replay does not answer it. `recorded` is the
    entry, `refusal` today's refusal."""

    def __init__(self, recorded: JournalEntry, refusal: BaseException) -> None:
        JournalMiss.__init__(self, recorded, recorded)
        self.args = (f"journal miss: the journal records {recorded.describe()} as made, but its argument "
                     f"contract refuses it today ({type(refusal).__name__}: {refusal}): a live run would refuse "
                     "it before calling the handler; record the run again",)
        self.recorded, self.refusal = recorded, refusal


class JournalEncodeError(ForgeError, TypeError):
    """A journal entry's value has no JSON form and the journal has no codec for it."""

    def __init__(self, entry: JournalEntry, value: Any, why: str) -> None:
        super().__init__(
            f"cannot write the journal: {entry.describe()} returned a {type(value).__name__}, {why}; "
            "return plain data (str, int, float, bool, None, lists and dicts with string keys) "
            "or give the loop a codec: AgentLoop(..., codec=MyCodec()) with encode(value) and decode(data)")
        self.entry, self.value = entry, value


def identity_hash(identity: Any) -> str:
    """SHA-256 of `identity`'s canonical JSON (sorted keys, no spaces; a value with no JSON
    form hashed by its repr)."""
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One call to the world: who made it and when, what it was asked, what came back.

    `identity` is what the call was asked (held as it was in memory; None for an entry read
    from a file, which keeps only `args_sha256`). `value` is what it returned, `error` what it
    raised (then `value` is None). `messages` are those a policy decision added.
    """

    run_id: str
    transition: int
    step: int
    kind: str
    name: str
    identity: Any = field(default=None, compare=False, repr=False)
    value: Any = field(default=None, compare=False)
    error: BaseException | None = field(default=None, compare=False)
    messages: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)
    stored_hash: str | None = field(default=None, compare=False, repr=False)

    @property
    def args_sha256(self) -> str:
        return self.stored_hash if self.stored_hash is not None else identity_hash(self.identity)

    def same_call(self, other: JournalEntry) -> bool:
        """Whether `other` is the same call: kind, name, transition, step and arguments."""
        return not self.differences(other)

    def differences(self, other: JournalEntry) -> list[str]:
        """What differs between this call and `other`: of kind, name, transition, step and
        arguments (compared as they are when both are in memory, else by their hashes); for
        two model requests, the first field that differs (`request field messages[0].content`)."""
        differs = [name for name, mine, theirs in (
            ("kind", self.kind, other.kind), ("name", self.name, other.name),
            ("transition", self.transition, other.transition), ("step", self.step, other.step),
        ) if mine != theirs]
        in_memory = self.stored_hash is None and other.stored_hash is None
        if not (in_memory and self.identity == other.identity) and self.args_sha256 != other.args_sha256:
            path = first_difference(self.identity, other.identity) if self.kind == other.kind == "model" else None
            differs.append(f"request field {path}" if path else "arguments")
        return differs

    def describe(self) -> str:
        if self.kind == "model":
            return f"a request to model {self.name!r} at transition {self.transition} (step {self.step})"
        what = f"tool {self.name!r}" if self.kind == "tool" else self.kind
        shown = self.identity if self.identity is not None else f"sha256 {self.args_sha256[:12]}…"
        return f"{what} at transition {self.transition} (step {self.step}) with {_short(shown)}"

    def to_json(self, codec: JournalCodec | None = None, *, identity: bool = False) -> dict[str, Any]:
        """The entry's JSON line (see the module). With `identity`, what the call was asked
        is kept too, as JSON (`"identity"`: a tool's arguments, a wait's seconds, an answer's
        question), as the runs' database keeps a journal: its readers show it. Raises
        JournalEncodeError for a value JSON cannot hold exactly, unless `codec` encodes it."""
        line: dict[str, Any] = {"v": 3, "type": "call", "run_id": self.run_id, "transition": self.transition,
                                "step": self.step, "kind": self.kind, "name": self.name,
                                "args_sha256": self.args_sha256}
        if self.error is not None:
            line["error"] = error_form(self.error)
        else:
            line["value"] = _encode(self.value, codec, self)
        if self.kind == "policy" and isinstance(self.identity, tuple):  # the goal: what a replay from the file starts with
            line["asked"] = {"goal": self.identity[0], "observations": self.identity[1]}
            if isinstance(self.identity, DecidedAsCode):
                line["asked"]["code"] = True
        if self.kind == "model" and self.identity is not None:  # a replay names the field a new request changed
            line["request"] = json.loads(json.dumps(self.identity, default=str))
        if self.messages:
            line["messages"] = json.loads(json.dumps(list(self.messages), default=str))
        if identity and self.kind not in ("policy", "model") and self.identity is not None:
            line["identity"] = json.loads(json.dumps(self.identity, default=repr))
        return line

    @classmethod
    def from_json(cls, data: Mapping[str, Any], codec: JournalCodec | None = None, *,
                  needs_codec: bool = True) -> JournalEntry:
        """An entry from its decoded line. Raises ValueError naming what is wrong (a value a
        codec wrote, with no `codec`, too: unless not `needs_codec`, when it is kept as stored)."""
        try:
            kind = data["kind"]
            if kind not in JOURNAL_KINDS:
                raise UsageError(f"unknown call kind {kind!r} (expected one of {', '.join(JOURNAL_KINDS)})")
            error = error_from(data["error"]) if "error" in data else None
            value = None if error is not None else decode(data["value"], codec, needs_codec=needs_codec)
            messages = data.get("messages", [])
            if not isinstance(messages, list):
                raise UsageError("'messages' must be a list")
            asked = data.get("asked") if kind == "policy" else data.get("request") if kind == "model" else \
                data.get("identity")
            if kind == "policy" and isinstance(asked, dict):
                goal, seen = _text(asked["goal"]), _number(asked["observations"])
                asked = DecidedAsCode(goal, seen) if asked.get("code") is True else (goal, seen)
            return cls(_text(data["run_id"]), _number(data["transition"]), _number(data["step"]), kind,
                       _text(data["name"]), asked, value, error, tuple(messages), _text(data["args_sha256"]))
        except KeyError as missing:
            raise UsageError(f"a call line is missing {missing}") from None


@dataclass(frozen=True, slots=True)
class ForkOrigin:
    """Where a forked run came from: the run it was forked from (`run_id`), the transition
    it went live at (`transition`), and the patch that replaced the recorded outcome there
    (its JSON form, `forge.machine.fork.Patch.to_json`; None for a plain continuation).

    Written as the first line of a forked run's trace file::

        {"v": 3, "type": "fork", "run_id": "…", "forked_from": {"run_id": "…", "transition": 10,
         "patch": {"tool_result": 999}}}
    """

    run_id: str
    transition: int
    patch: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "transition": self.transition, "patch": self.patch}

    @classmethod
    def from_json(cls, data: Any) -> ForkOrigin:
        """Raises ValueError naming what is wrong."""
        if not isinstance(data, dict):
            raise UsageError("'forked_from' must be an object")
        patch = data.get("patch")
        if patch is not None and not isinstance(patch, dict):
            raise UsageError("'forked_from.patch' must be an object or null")
        return cls(_text(data.get("run_id")), _number(data.get("transition")), patch)


class Journal(Columns[JournalEntry]):
    """A run's journal: its entries in the order the calls were made.

    Kept as columns, like the trace, and made into `JournalEntry`s when read: a long run
    keeps a few of these per step. `codec` is what `write_trace` writes odd values with,
    and `masking(entries, records)` what it writes instead of the entries (the loop's
    `redact` applied, `forge.machine.redaction`; None: the entries as they are);
    `forked_from` is set on a forked run's journal (`AgentLoop.fork`); `children` are the
    runs of other loops its tool calls made (`forge.machine.child`), in the order they were called:
    the call's value is the child's answer, the child's whole run is kept here.
    """

    __slots__ = (
        "_error",
        "_identity",
        "_kind",
        "_kind_ids",
        "_kinds",
        "_last_model",
        "_messages",
        "_step",
        "_transition",
        "_value",
        "children",
        "codec",
        "forked_from",
        "masking",
        "run_id",
    )

    def __init__(self, entries: Iterable[JournalEntry] = (), run_id: str = "", codec: JournalCodec | None = None) -> None:
        self.run_id, self.codec = run_id, codec
        self.forked_from: ForkOrigin | None = None
        self.children: list[Any] = []
        self.masking: Callable[[Sequence[JournalEntry], Sequence[Any]], Sequence[JournalEntry]] | None = None
        self._kinds: list[tuple[str, str]] = []
        self._kind_ids: dict[tuple[str, str], int] = {}
        self._kind = array("i")
        self._transition = array("i")
        self._step = array("i")
        self._identity: list[Any] = []
        self._value: list[Any] = []
        self._error: dict[int, BaseException] = {}
        self._messages: dict[int, tuple[dict[str, Any], ...]] = {}
        self._last_model: tuple[int, list[Any]] | None = None  # the last model request's place and messages
        for entry in entries:
            self.append(entry)

    def add(self, transition: int, step: int, kind: str, name: str, identity: Any, value: Any,
            error: BaseException | None = None, messages: tuple[dict[str, Any], ...] = ()) -> None:
        """Record the next call from its parts (the performer's path)."""
        pair = (kind, name)
        index = self._kind_ids.get(pair)
        if index is None:
            index = self._kind_ids[pair] = len(self._kinds)
            self._kinds.append(pair)
        position = len(self._kind)
        self._kind.append(index)
        self._transition.append(transition)
        self._step.append(step)
        self._identity.append(self._shared(position, identity) if kind == "model" else identity)
        self._value.append(value)
        if error is not None:
            self._error[position] = error
        if messages:
            self._messages[position] = messages

    def append(self, entry: JournalEntry) -> None:
        if not self.run_id:
            self.run_id = entry.run_id
        self.add(entry.transition, entry.step, entry.kind, entry.name,
                 entry.identity if entry.stored_hash is None else _Hashed(entry.stored_hash, entry.identity),
                 entry.value, entry.error, entry.messages)

    def _shared(self, position: int, identity: Any) -> Any:
        """A model request as kept: one that begins with messages of the request before it
        keeps only where that one is, how many it shares, and its own (`_SharedRequest`), so
        a conversation's journal grows with the conversation, not with its square."""
        request = identity.identity if isinstance(identity, _Hashed) else identity
        messages = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(messages, list):
            return identity
        last, self._last_model = self._last_model, (position, messages)
        shared = shared_prefix(last[1], messages) if last is not None else 0
        if last is None or shared < 2:
            return identity
        kept = _SharedRequest(last[0], shared, {k: v for k, v in request.items() if k != "messages"},
                              tuple(messages[shared:]))
        return _Hashed(identity.sha256, kept) if isinstance(identity, _Hashed) else kept

    def _request(self, index: int) -> Any:
        """The identity kept at `index`, its request's messages made whole again."""
        identity = self._identity[index]
        kept = identity.identity if isinstance(identity, _Hashed) else identity
        if not isinstance(kept, _SharedRequest):
            return identity
        chain = []
        while isinstance(kept, _SharedRequest):
            chain.append(kept)
            base = self._identity[kept.base]
            kept = base.identity if isinstance(base, _Hashed) else base
        messages: list[Any] = list(kept["messages"])
        for link in reversed(chain):
            messages = [*messages[:link.shared], *link.tail]
        whole = {**chain[0].request, "messages": messages}
        return _Hashed(identity.sha256, whole) if isinstance(identity, _Hashed) else whole

    def _item(self, index: int) -> JournalEntry:
        kind, name = self._kinds[self._kind[index]]
        identity = self._request(index) if kind == "model" else self._identity[index]
        stored = None
        if isinstance(identity, _Hashed):
            stored, identity = identity.sha256, identity.identity
        return JournalEntry(self.run_id, self._transition[index], self._step[index], kind, name, identity,
                            self._value[index], self._error.get(index),
                            self._messages.get(index, ()), stored)

    def __len__(self) -> int:
        return len(self._kind)

    def move_to(self, count: int, entries: Sequence[JournalEntry]) -> None:
        """Keep the first `count` entries, cutting back or appending from `entries` (the
        furthest the run got): the debugger steps back and forth with it."""
        if count < len(self):
            for column in (self._kind, self._transition, self._step, self._identity, self._value):
                del column[count:]
            for extra in (self._error, self._messages):
                for position in [p for p in extra if p >= count]:
                    del extra[position]
            if self._last_model is not None and self._last_model[0] >= count:
                self._last_model = self._last_request_before(count)
        for entry in entries[len(self):count]:
            self.append(entry)

    def _last_request_before(self, count: int) -> tuple[int, list[Any]] | None:
        """The last model request among the first `count` entries: its place and messages."""
        for index in range(count - 1, -1, -1):
            if self._kinds[self._kind[index]][0] == "model":
                request = self._request(index)
                request = request.identity if isinstance(request, _Hashed) else request
                if isinstance(request, dict) and isinstance(request.get("messages"), list):
                    return index, request["messages"]
        return None

    def __repr__(self) -> str:
        return f"Journal({len(self)} calls of run {self.run_id or '?'})"


@dataclass(frozen=True, slots=True)
class _SharedRequest:
    """A model request kept as the `shared` first messages of the request at `base`, then
    `tail`; `request` is the rest of it (the model, the tools, the options)."""

    base: int
    shared: int
    request: dict[str, Any]
    tail: tuple[Any, ...]


def shared_prefix(before: Sequence[Any], messages: Sequence[Any]) -> int:
    """How many first messages `messages` shares with `before` (the same objects, or equal)."""
    count = 0
    for mine, theirs in zip(before, messages, strict=False):
        if mine is not theirs and mine != theirs:
            break
        count += 1
    return count


class SharedRequests:
    """Model requests in a journal's lines, each written with the messages it shares with
    the request before it as a count (`{"$shared": 12, "then": [...]}` in place of its
    `messages` list) and the rest it has the same as that one named (`"$same": ["model",
    "tools"]`), and read back whole: a conversation's journal grows with the
    conversation, not with its square. One per journal written or read, in order; lines
    with whole `messages` (every earlier release's) read as they are."""

    __slots__ = ("last", "request")

    def __init__(self) -> None:
        self.last: list[Any] | None = None
        self.request: dict[str, Any] = {}

    def written(self, line: dict[str, Any]) -> dict[str, Any]:
        """`line` as written: a model request sharing messages with the last one, shortened."""
        request = line.get("request")
        if line.get("kind") != "model" or not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return line
        messages, last, before = request["messages"], self.last, self.request
        self.last, self.request = messages, request
        shared = shared_prefix(last, messages) if last is not None else 0
        if shared < 2:
            return line
        written: dict[str, Any] = {"messages": {"$shared": shared, "then": messages[shared:]}}
        same = sorted(key for key, value in request.items() if key != "messages" and key in before
                      and before[key] == value)
        written.update((key, value) for key, value in request.items() if key != "messages" and key not in same)
        if same:
            written["$same"] = same
        return {**line, "request": written}

    def read(self, line: Mapping[str, Any]) -> Mapping[str, Any]:
        """`line` as read: a shortened model request made whole.

        Raises:
            UsageError: it shares more messages than the request before it has (a line out
                of order, or one whose journal is not all there)."""
        request = line.get("request")
        if line.get("kind") != "model" or not isinstance(request, dict):
            return line
        messages = request.get("messages")
        if isinstance(messages, dict) and "$shared" in messages:
            shared, same = messages["$shared"], request.get("$same", [])
            if self.last is None or not isinstance(shared, int) or len(self.last) < shared or \
                    not isinstance(messages.get("then"), list) or not isinstance(same, list) or \
                    not all(key in self.request for key in same):
                raise UsageError(f"a model request shares {shared!r} messages with the request before it, which the "
                                 "journal does not have: its lines are out of order or some are missing")
            messages = [*self.last[:shared], *messages["then"]]
            request = {**{key: self.request[key] for key in same},
                       **{key: value for key, value in request.items() if key not in ("messages", "$same")},
                       "messages": messages}
            line = {**line, "request": request}
        if isinstance(messages, list):
            self.last, self.request = messages, request
        return line


def journal_lines(entries: Iterable[JournalEntry], codec: JournalCodec | None = None, *,
                  identity: bool = False) -> list[dict[str, Any]]:
    """The JSON lines of a journal's `entries`, in order (`JournalEntry.to_json`), each model
    request written with the messages it shares with the one before it as a count
    (`SharedRequests`). Raises JournalEncodeError as `to_json` does."""
    shared = SharedRequests()
    return [shared.written(entry.to_json(codec, identity=identity)) for entry in entries]


@dataclass(frozen=True, slots=True)
class _Hashed:
    """The identity of an entry read from a file: its hash (and, for a policy call, what
    it was asked)."""

    sha256: str
    identity: Any = None


def _encode(value: Any, codec: JournalCodec | None, entry: JournalEntry) -> Any:
    """`value` in the wire form (`forge.records.wire`). Raises JournalEncodeError naming
    the call when it has none."""
    try:
        return encode(value, codec)
    except NoWireForm as refused:
        raise JournalEncodeError(entry, value, refused.why) from None


def same_decision(recorded: JournalEntry, value: Any, error: BaseException | None,
                  codec: JournalCodec | None = None) -> bool:
    """Whether a decision made again (`value`, or `error` raised) is the one `recorded`
    holds: compared in their journal form (so a tuple and the list a file keeps are the
    same), an error by its type's name and its message."""
    if (recorded.error is None) != (error is None):
        return False
    if error is not None:
        assert recorded.error is not None
        return (error_form(recorded.error)["message"], type(recorded.error).__name__) == \
            (error_form(error)["message"], type(error).__name__)
    try:  # equal values have one journal form: most decisions made again are equal, and need no encoding
        if recorded.value is value or bool(recorded.value == value):
            return True
    except Exception:  # a value whose == is not a bool (an array): compared in journal form
        pass
    try:
        return bool(_encode(recorded.value, codec, recorded) == _encode(value, codec, recorded))
    except JournalEncodeError:
        return False


def first_difference(recorded: Any, made: Any, path: str = "") -> str | None:
    """Where `made` first differs from `recorded` (JSON values), as a path
    (`messages[0].content`, `tools[1].function.description`, `model`); None when they are
    the same, or when either is not known (an entry read without its request)."""
    if recorded is None or made is None:
        return None
    if isinstance(recorded, dict) and isinstance(made, dict):
        for key in sorted(set(recorded) | set(made), key=str):
            if key not in recorded or key not in made:
                return f"{path}.{key}" if path else str(key)
            found = first_difference(recorded[key], made[key], f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if isinstance(recorded, (list, tuple)) and isinstance(made, (list, tuple)):
        for index, (mine, theirs) in enumerate(zip(recorded, made, strict=False)):
            found = first_difference(mine, theirs, f"{path}[{index}]")
            if found is not None:
                return found
        return f"{path}[{min(len(recorded), len(made))}]" if len(recorded) != len(made) else None
    return None if recorded == made else (path or "(the whole request)")


def _miss_text(expected: JournalEntry, made: JournalEntry) -> str:
    """How a call the run made differs from the recorded one due there: a decision made
    again that is not the recorded one names both; any other call, what differs."""
    differs = expected.differences(made)
    if not differs and expected.kind == "policy":  # the same call, decided otherwise
        return (f"the policy decided {_decision_text(made.value, made.error)} at transition {made.transition} "
                f"(step {made.step}), where the journal records {_decision_text(expected.value, expected.error)}; "
                "a policy that is not a function of the goal and the state (a clock, a random source, the "
                "network, its own counter) replays from the journal when wrapped: RecordedPolicy(policy)")
    what = (f"expected {expected.describe()}, but the run made {made.describe()} "
            f"(they differ in {', '.join(differs)})")
    if expected.kind == made.kind == "model" and any(d.startswith("request field") for d in differs):
        what += "; if the change is meant, record the run again"
    return what


def _decision_text(value: Any, error: BaseException | None) -> str:
    from forge.policy import Finish, Intent

    if error is not None:
        return f"to raise {type(error).__name__}: {_short(str(error))}"
    if isinstance(value, Intent):
        target = f"tool {value.tool!r}" if value.tool else f"a tool with {sorted(value.capabilities)}"
        return f"to call {target} with {_short(dict(value.arguments))}"
    if isinstance(value, Finish):
        return f"to finish with {_short(value.answer)}"
    return _short(value)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=repr) if not isinstance(value, str) else value
    return text if len(text) <= 200 else f"{text[:200]}…"


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise WrongType(f"expected a string, got {value!r}")
    return value


def _number(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WrongType(f"expected an integer, got {value!r}")
    return value

