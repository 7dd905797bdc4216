"""How a served run asks the MCP client's user: elicitation, in the round trips the client's
protocol allows.

A served run that waits for a person (a `forge.Ask` question, an approval its approver leaves
to a person, a tie, a capability gap; a child run's too) asks the client's user through a
form of one field (`form_for`). Its performer (`Eliciting`) asks in one of two ways:

- **in place**, where the call can send requests to the client (protocol 2025-11-25 and
  before): the run waits for the reply and goes on;
- **by round trips** from protocol 2026-07-28 on, where a tool call sends no request of its
  own: the call returns an `InputRequiredResult` carrying the question, and its
  `request_state` carries the run's journal so far (`Round`: the served run's calls and each
  child run's, signed with this server's key, so a client can neither alter nor forge what
  the run did). The client retries the call with the reply; the run is made again from that
  journal, calling nothing it called before (a tool that ran is not run again: its result is
  the recorded one), takes the reply as the answer where it asked, and goes on live. A run
  may ask again: each question is another round.

A declined approval is a rejection of that exact call (the policy hears of it and replans);
a question declined or cancelled ends the call with an error result saying so (`Unanswered`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from forge.errors import ForgeError
from forge.machine.performers import ForkingPerformer, Recording
from forge.records.answers import Answer, Waiting, read_answer
from forge.records.journal import JournalCodec, JournalEntry, SharedRequests, journal_lines

__all__ = ["STATE_LIFETIME", "Eliciting", "NeedsInput", "Round", "Unanswered", "answer_of", "form_for", "opened", "sealed"]

_KEY = os.urandom(32)
"""What signs this server's request states: a state is only good in the process that made it."""


class Unanswered(ForgeError, RuntimeError):
    """The MCP client's user declined or cancelled a question the run asked (not an
    approval: declining one rejects the call); the served call ends with an error result."""


class NeedsInput(BaseException):
    """Carries a question out of a served run that asks by round trips: what it waits for,
    where it asked (`where`: the asking run's key in `Round.calls`, its transition and step)
    and the journals so far of every run on the way up (a BaseException, so no stage takes
    it for a tool's or the policy's failure)."""

    def __init__(self, waiting: Waiting) -> None:
        super().__init__(waiting.asks)
        self.waiting = waiting
        self.where: tuple[str, int, int] | None = None
        self.journals: dict[str, tuple[JournalEntry, ...]] = {}
        self.children: dict[str, list[tuple[str, int]]] = {}


@dataclass(frozen=True, slots=True)
class _Replayed:
    """A child run a replayed round made before its question: counted when the next child
    of the same tool is numbered, not run again (its answer is the parent's recorded call)."""

    path: str
    tool: str
    transition: int


@dataclass(frozen=True, slots=True)
class Round:
    """What a served call's next round is made from: the run id, the goal, each run's calls
    so far (`calls`, by key: "" for the served run, a child's path after the run id), the
    child runs each had made (`children`: tool and transition), and the reply to the
    question it asked (`answer`, at `where`); `tool`, the served tool the call is of, is
    what its request state is good for."""

    run_id: str
    goal: str
    calls: Mapping[str, tuple[JournalEntry, ...]] = field(default_factory=dict)
    children: Mapping[str, Sequence[tuple[str, int]]] = field(default_factory=dict)
    tool: str = ""

    def encode(self, needed: NeedsInput, codec: JournalCodec | None) -> str:
        """The request state that asks `needed`'s question: this round's journals as far as
        the runs went, the question and where it was asked, signed."""
        return sealed({"run_id": self.run_id, "goal": self.goal, "waiting": needed.waiting.to_json(),
                       "where": needed.where, "children": needed.children,
                       "calls": {key: journal_lines(entries, codec) for key, entries in needed.journals.items()}},
                      self.tool)

    @classmethod
    def decode(cls, state: str, reply: Any, codec: JournalCodec | None, tool: str = "") -> Round:
        """The next round of the state `encode` made for `tool`, the client's reply the
        answer where the question was asked.

        Raises:
            Unanswered: the state is not one this server made for `tool`, or the user did
                not answer a question (declined or cancelled it).
        """
        body = opened(state, tool)
        waiting = Waiting.from_json(body["waiting"])
        key, transition, step = body["where"]
        calls = {name: _read_calls(entries, codec) for name, entries in body["calls"].items()}
        answered = JournalEntry(body["run_id"], transition, step, "answer", waiting.state, waiting.identity,
                                answer_of(waiting, reply))
        calls[key] = (*calls.get(key, ()), answered)
        return cls(body["run_id"], body["goal"], calls, {k: [tuple(c) for c in v] for k, v in body["children"].items()},
                   tool)

    def key(self, path: str) -> str:
        """A run's key in `calls`: "" for the served run, a child's path after the run id."""
        return path[len(self.run_id) + 1:] if path.startswith(self.run_id + "/") else ""


STATE_LIFETIME = 24 * 3600.0
"""Seconds a request state is good for after it is made: an older one is refused (so the
record of states already used need keep none older)."""


class _Spent:
    """The request states already used, by signature, with when each was made: a state
    answers its question once (a captured retry sent again would run the run again from
    its journal with the same answer, and the calls after the answer twice)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._issued: dict[str, float] = {}

    def spend(self, signature: str, issued: float, now: float) -> bool:
        """Mark the state used; False when it was already."""
        with self._lock:
            if signature in self._issued:
                return False
            if len(self._issued) >= 4096 and len(self._issued) & 1023 == 0:  # now and then, forget the expired
                self._issued = {key: at for key, at in self._issued.items() if now - at <= STATE_LIFETIME}
            self._issued[signature] = issued
            return True


_SPENT = _Spent()


def sealed(body: Mapping[str, Any], tool: str) -> str:
    """`body` as a request state good for one retried call of `tool`, within
    STATE_LIFETIME: its JSON, the tool's name and when it was made, signed with this
    server's key."""
    text = base64.urlsafe_b64encode(json.dumps({**body, "tool": tool, "issued": time.time()}, separators=(",", ":"),
                                               default=str).encode()).decode()
    return f"{text}.{_signature(text)}"


def opened(state: str, tool: str) -> dict[str, Any]:
    """What `sealed` sealed for `tool`, the state spent: it is good once.

    Raises:
        Unanswered: the state is not one this server made (changed, or made before a
            restart), was made for another tool, is older than STATE_LIFETIME, or was
            used already.
    """
    text, _, signature = state.rpartition(".")
    if not text or not hmac.compare_digest(signature, _signature(text)):
        raise Unanswered("the request state is not one this server made (it was changed, or the server "
                         "restarted): call the tool again")
    body: dict[str, Any] = json.loads(base64.urlsafe_b64decode(text))
    if body.get("tool") != tool:
        raise Unanswered(f"the request state is a call of {body.get('tool')!r}'s, not of {tool!r}'s: "
                         f"retry the call of {body.get('tool')!r} with it, or call {tool!r} again")
    issued, now = float(body.get("issued") or 0.0), time.time()
    if now - issued > STATE_LIFETIME:
        raise Unanswered(f"the request state expired (it is good for {STATE_LIFETIME:.0f} s after it is made): "
                         f"call {tool!r} again")
    if not _SPENT.spend(signature, issued, now):
        raise Unanswered(f"the request state was used already: a state answers its question once, so nothing of "
                         f"the run is done again; call {tool!r} again")
    return body


def _signature(text: str) -> str:
    return hmac.new(_KEY, text.encode(), hashlib.sha256).hexdigest()


Ask = Callable[[Waiting], Any]
"""How the served run's question reaches the client: `ask(waiting)` returns the answer as
the journal keeps it (or an awaitable of it), or raises `NeedsInput` to ask by round trip."""


class Eliciting(ForkingPerformer):
    """A served run's performer (and its child runs'): it replays the round's recorded calls
    (none on the first round), then performs live; what the run waits for is asked of the
    client (`ask`), through the parent's performer for a child run (naming the child,
    `Waiting.run`)."""

    __slots__ = ("_ask", "_parent", "_path", "_round")

    def __init__(self, journal: Any, run: Any, round: Round, ask: Ask, parent: Eliciting | None = None) -> None:
        path = run.trace.run_id
        key = round.key(path) if parent is not None else ""
        children = [_Replayed(f"{path}/{tool}", tool, transition) for tool, transition in round.children.get(key, ())]
        super().__init__(Recording(round.calls.get(key, ()), children=children), journal, run, None)
        self._round, self._ask, self._parent, self._path = round, ask, parent, path

    @classmethod
    def maker(cls, round: Round, ask: Ask) -> Callable[[Any, Any], Eliciting]:
        """The performer factory a served call's `RunStart(performer=...)` takes."""
        return lambda journal, run: cls(journal, run, round, ask)

    def child_performer(self, path: str) -> Callable[[Any, Any], Eliciting]:
        """What makes the performer of this run's child run at `path` (`forge.machine.child`)."""
        return lambda journal, run: Eliciting(journal, run, self._round, self._ask, self)

    def asks(self) -> bool:
        return True

    def ask(self, waiting: Waiting) -> Any:
        own = waiting.run is None  # this run's question, not a child's passed up
        try:
            if self._parent is not None:
                return self._parent.ask(replace(waiting, run=self._path) if own else waiting)
            return self._ask(waiting)
        except NeedsInput as needed:
            if waiting.server is not None:  # made again, the call would ask again: a round trip never ends
                raise Unanswered(f"{waiting.asks}: a served run passes its MCP servers' questions on only to a "
                                 "client that is asked in place (protocol 2025-11-25 and before); this one asks by "
                                 "round trips") from None
            key = self._round.key(self._path) if self._parent is not None else ""
            if own:
                needed.where = (key, *self.where())
            needed.journals[key] = tuple(self.journal)
            needed.children[key] = [(child.tool, child.transition) for child in self.journal.children
                                    if getattr(child, "result", None) is not None or isinstance(child, _Replayed)]
            raise


def form_for(waiting: Waiting) -> tuple[dict[str, Any], Callable[[Any], Answer]]:
    """The elicitation form that asks `waiting` (one field), and what makes the run's
    `Answer` of the field's value (through `read_answer`, as every answer from outside)."""
    def form(name: str, field: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {name: field}, "required": [name]}

    fingerprint = waiting.fingerprint or ""
    if "approve" in waiting.answers and "text" not in waiting.answers:  # an approval, and nothing else fits
        return (form("approve", {"type": "boolean", "title": f"Run {waiting.tool}?",
                                 "description": f"{waiting.tool}({json.dumps(dict(waiting.arguments), default=str)})"}),
                lambda yes: read_answer("approve" if yes else "reject", fingerprint))
    if "text" not in waiting.answers:
        field: dict[str, Any] = {"type": "string", "title": "tool", "description": waiting.asks}
        if waiting.tied:
            field["enum"] = list(waiting.tied)
        return form("tool", field), lambda name: read_answer("tool", str(name))
    return (form("reply", {"type": "string", "title": "reply", "description": waiting.asks}),
            lambda text: read_answer("text", str(text)))


def answer_of(waiting: Waiting, reply: Any) -> dict[str, Any]:
    """The answer (as the journal keeps it) that the client's `reply` (an `ElicitResult`) to
    `waiting`'s form gives.

    Raises:
        Unanswered: the user declined or cancelled a question (not an approval).
    """
    schema, answer = form_for(waiting)
    if reply.action != "accept" and waiting.state == "approval_required":
        return answer(False).to_json()
    if reply.action != "accept":
        did = {"decline": "declined to answer", "cancel": "cancelled the question"}.get(reply.action, reply.action)
        raise Unanswered(f"the run waits in {waiting.state}: {waiting.asks} (the client's user {did})")
    return answer((reply.content or {}).get(next(iter(schema["properties"])))).to_json()


def _read_calls(lines: Any, codec: JournalCodec | None) -> tuple[JournalEntry, ...]:
    """A journal's calls from its lines in a request state (`journal_lines`), in order."""
    requests = SharedRequests()
    return tuple(JournalEntry.from_json(requests.read(data), codec) for data in lines)
