"""Policies: what decides the next step. A policy is `(goal, LoopState) -> Intent | Finish | Ask`,
or several `Intent`s at once (a list: calls without side effects are made together).

How a replay (and a fork, a cassette) treats a policy:

- A policy is code, like a user stage: a replay runs it again and checks that it decides
  what the journal records, so a changed decision fails the replay (`JournalMiss`, naming
  both decisions) at the step where it changed. That is the default: a policy decides from
  what it is given (the goal and the `LoopState`), as the seed's stages do.
- A policy that asks a model through forge's client seam (`ModelPolicy`: `ChatPolicy` is
  one) is code too; each request it sends is a call to the world, journaled with the request
  itself as its identity, so a replay answers it from the journal and fails, naming the
  first field that differs, when the request is not the recorded one (another system
  prompt, a tool's description, the model).
- A policy that is not a function of its inputs (it reads a clock, a random source, the
  network, or counts its own calls, as `ScriptedPolicy` does) is wrapped in
  `RecordedPolicy`: its decisions are the world, answered from the journal without calling
  it.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from forge.agent.observations import LoopState
from forge.errors import ForgeError, UsageError

__all__ = ["ASK", "Ask", "Decision", "Finish", "Handoff", "Intent", "ModelPolicy", "Policy", "RecordedPolicy", "ScriptExhausted",
           "ScriptedPolicy", "answered_from_journal", "asks_a_model"]


@dataclass(frozen=True, slots=True, init=False)
class Intent:
    """What the policy wants next: the capabilities it needs (or, with `Intent.call`, the
    tool by name) and the arguments to pass.

    `idempotency_key`, when given, names the side effect across retries and runs; without
    it a side-effecting call is keyed by its tool and a fingerprint of its arguments.
    `tool`, when given, selects exactly that tool; capabilities then play no part.
    `call_id`, when given, is the id the model gave the call (`ChatPolicy` sets it), so
    telemetry and the trace can pair the call with its result (`gen_ai.tool.call.id`).
    """

    capabilities: frozenset[str]
    arguments: Mapping[str, Any]
    idempotency_key: str | None
    tool: str | None
    call_id: str | None

    def __init__(self, capabilities: Iterable[str], arguments: Mapping[str, Any] | None = None,
                 idempotency_key: str | None = None, *, tool: str | None = None, call_id: str | None = None) -> None:
        if isinstance(capabilities, str):
            raise UsageError("Intent.capabilities must be a set of strings, not a string")
        try:
            object.__setattr__(self, "capabilities", frozenset(capabilities))
        except TypeError:
            raise UsageError(f"Intent.capabilities must be a set of strings, got {capabilities!r:.200}") from None
        odd = [c for c in self.capabilities if not isinstance(c, str)]
        if odd:
            raise UsageError(f"Intent.capabilities must be strings; {odd[0]!r:.100} is a {type(odd[0]).__name__}")
        object.__setattr__(self, "arguments", {} if arguments is None else arguments)
        object.__setattr__(self, "idempotency_key", idempotency_key)
        object.__setattr__(self, "tool", tool)
        object.__setattr__(self, "call_id", call_id)
        if not isinstance(self.arguments, Mapping):
            raise UsageError(f"Intent.arguments must be a mapping, got {type(self.arguments).__name__}")
        named = [k for k in self.arguments if not isinstance(k, str)]
        if named:
            raise UsageError(f"Intent.arguments are passed by name, so their keys must be strings; "
                             f"{named[0]!r:.100} is a {type(named[0]).__name__}")
        if self.idempotency_key is not None and not self.idempotency_key:
            raise UsageError("Intent.idempotency_key must be None or a non-empty string")
        if tool is not None and (not isinstance(tool, str) or not tool.strip()):
            raise UsageError(f"Intent.tool must be None or a tool's name, got {tool!r}")

    @classmethod
    def call(cls, name: str, /, **arguments: Any) -> Intent:
        """Call the tool called `name` with `arguments`: `Intent.call("read_file", path="a.md")`.

        An unknown name ends the run in `capability_gap`, the error naming the closest tools.
        """
        return cls(frozenset(), arguments, tool=name)

    def keyed(self, idempotency_key: str) -> Intent:
        """This intent with `idempotency_key` naming its side effect across retries and runs."""
        return Intent(self.capabilities, self.arguments, idempotency_key, tool=self.tool, call_id=self.call_id)


@dataclass(frozen=True, slots=True)
class Finish:
    """The policy's final answer: no tool call is needed, or the work is done.

    It is recorded as an observation of the pseudo-tool `finish` with this Finish as its
    payload, and `verify` is asked about it: acceptance ends the run in `verified_success`,
    rejection replans within the step budget.
    """

    answer: Any


FINISH = "finish"
"""The tool name a `Finish` is recorded under."""


@dataclass(frozen=True, slots=True)
class Ask:
    """The policy's question to the user: a value the goal lacks, which no tool can find.

    It is recorded as an observation of the pseudo-tool `ask_user` with this Ask as its
    payload, and the run ends in `input_required` (a needs-input state) with
    `result.question` set. The user's reply is the goal of the conversation's next turn:
    `loop.run(reply, state=result.state)`; a durable run waits for `Answer.text(reply)`.

    Raises:
        ValueError: `question` is not a non-blank string.
    """

    question: str

    def __post_init__(self) -> None:
        if not isinstance(self.question, str) or not self.question.strip():
            raise UsageError(f"Ask.question must be a non-blank string, got {self.question!r:.100}")


ASK = "ask_user"
"""The tool name an `Ask` is recorded under (and the tool `ChatPolicy` offers the model)."""


@dataclass(frozen=True, slots=True)
class Handoff:
    """The policy hands the conversation to another loop: `to` names it among the loop's
    handoffs (`loop.with_handoffs(billing=billing_loop)`, which its definition allows by
    name: `[handoffs] to = ["billing"]`), and `note` tells it why (its goal; the run's own
    goal when blank).

    The other loop runs as a child run of this one (`PARENT/billing.1`), going on from this
    run's conversation (its observations and messages), within the steps and tokens this run
    has left; its answer is this run's final answer (a `Finish`, which `verify` is asked
    about). One that does not end in success ends this run in `fatal_error`, naming why.

    Raises:
        ValueError: `to` is not a non-blank string, or `note` is not a string.
    """

    to: str
    note: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.to, str) or not self.to.strip():
            raise UsageError(f"Handoff.to must name a loop to hand off to, got {self.to!r:.100}")
        if not isinstance(self.note, str):
            raise UsageError(f"Handoff.note must be a string, got {type(self.note).__name__}")


Decision = Intent | Finish | Ask | Handoff | Sequence[Intent]
"""What a policy returns: the next call, the final answer, a question for the user, the
conversation handed to another loop, or several calls at once: a plan, whose calls are all
made in order (the leading ones without side effects together, `Limits.max_parallel` at a
time, a side effect alone); a plain policy is asked again once they are made, a model policy
after each step (it answers its calls still pending). A planned call the run does not make is
said in the trace and `LoopResult.dropped`."""


class Policy(Protocol):
    def __call__(self, goal: str, state: LoopState, /) -> Decision: ...


@runtime_checkable
class ModelPolicy(Protocol):
    """A policy that asks a model through forge (the client seam): the loop sends each
    request, so the request and the model's reply are an entry of the run's journal.

    `requests(goal, state)` is the decision written as a generator: it yields each request
    to send (a JSON object: the model, the messages, the tools and the options), receives
    the model's reply (JSON, what `send` returned), and returns the decision. `send(request)`
    sends one request and returns the reply, or, when `forge.records.effects.can_await()`,
    an awaitable of it (under `arun`). A replay answers every request from the journal
    and runs the rest of the policy again.
    """

    def requests(self, goal: str, state: LoopState, /) -> Generator[Mapping[str, Any], Any, Decision]: ...

    def send(self, request: Mapping[str, Any], /) -> Any: ...


@dataclass(frozen=True, slots=True)
class RecordedPolicy:
    """`policy`, whose decisions a replay, a fork and a cassette take from the journal
    without calling it: for a policy that is not a function of the goal and the state (it
    reads a clock, a random source or the network itself, or counts its own calls). Its
    decisions are journaled with the messages it added, as the world's answers are.

    `AgentLoop(tools, RecordedPolicy(my_policy), ...)`.
    """

    policy: Policy

    def __call__(self, goal: str, state: LoopState) -> Decision:
        return self.policy(goal, state)


def asks_a_model(policy: Any) -> bool:
    """Whether `policy` is a `ModelPolicy` (it has `requests` and `send`): checked by its
    two methods, not `isinstance` on the protocol, which takes microseconds on every new
    loop."""
    return callable(getattr(policy, "requests", None)) and callable(getattr(policy, "send", None))


def answered_from_journal(policy: Any) -> bool:
    """Whether a replay takes `policy`'s decisions from the journal rather than running it
    (`RecordedPolicy`, `ScriptedPolicy`)."""
    return isinstance(policy, (RecordedPolicy, ScriptedPolicy))


class ScriptExhausted(ForgeError, RuntimeError):
    """The loop asked a ScriptedPolicy for more intents than were scripted."""


class ScriptedPolicy:
    """Hands out a fixed list of intents (and `Finish`es) in order: deterministic loops for
    tests and docs.

    Asking for more intents than scripted raises ScriptExhausted (the run then ends in
    `fatal_error` with it as `result.error`), so a script that is too short fails loudly.
    It counts what it handed out, so a replay takes its decisions from the journal (as a
    `RecordedPolicy`'s): a replay with the loop that recorded the run replays cleanly.
    """

    def __init__(self, intents: Iterable[Intent | Finish | Ask | Sequence[Intent]]) -> None:
        self._intents = tuple(tuple(i) if isinstance(i, list) else i for i in intents)
        for position, intent in enumerate(self._intents):
            several = isinstance(intent, tuple) and intent and all(isinstance(i, Intent) for i in intent)
            if not several and not isinstance(intent, (Intent, Finish, Ask)):
                raise UsageError(f"ScriptedPolicy item {position} is {intent!r}, not an Intent, Finish or Ask "
                                 "(or a list of Intents)")
        self._next = 0

    def __call__(self, goal: str, state: LoopState) -> Decision:
        if self._next >= len(self._intents):
            raise ScriptExhausted(
                f"scripted policy has no intent left: all {len(self._intents)} were used "
                f"and the loop asked for intent {self._next + 1}"
            )
        intent = self._intents[self._next]
        self._next += 1
        return intent

    def reset(self) -> None:
        """Start the script again from its first intent."""
        self._next = 0

    @property
    def consumed(self) -> int:
        """How many intents have been handed out."""
        return self._next

    @property
    def remaining(self) -> tuple[Decision, ...]:
        """The intents not yet handed out."""
        return self._intents[self._next :]

    def assert_consumed(self) -> None:
        """Raise AssertionError naming the unused intents, if any are left."""
        if self.remaining:
            raise AssertionError(f"{len(self.remaining)} scripted intent(s) never used: {self.remaining!r}")
