"""Loop definitions: a machine's states and transitions as validated, hashable values.

`forge.machine.loader` reads them from TOML files and checks every name they use.

File format (see machines/single_agent.toml)::

    [machine]
    name = "single_agent"          # required; also the built-in name
    title = "…"                    # optional, shown on diagrams
    initial = "select"             # required, a state below

    [states.select]                # one table per state, in display order
    action = "select_tool"         # non-terminal: the stage action run when it fires
    doc = "…"                      # optional

    [states.verified_success]
    terminal = true                # a way a run ends; the state's name is the stop reason
    outcome = "success"            # success | failure | needs_input

    [[transitions]]
    source = "select"
    trigger = "choose"
    dest = "execute"
    guard = "tool_selected"        # optional; a guard on the source state's action verdict

    [checks]
    require = ["approval-before-side-effect"]   # optional: properties `forge check` must prove

A waiting state may have a deadline: `timeout = "15m"` (s, m, h, d, or ms) on a
needs-input terminal state, or on a state running `request_approval`, with one transition
from it whose trigger is `timeout` (from an approval state, guarded by
`approval_timed_out`): to an escalation state, to a rejection that replans, or to a
terminal state. The deadline is absolute: a durable run restarted after it takes the
timeout edge at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from forge.errors import ForgeError, UsageError

__all__ = [
    "ANSWER_TRIGGER",
    "FAILURE_STATE",
    "FAILURE_TRIGGER",
    "PROPERTIES",
    "TIMEOUT_TRIGGER",
    "OUTCOMES",
    "DefinitionError",
    "Outcome",
    "MachineDefinition",
    "Problem",
    "StateDef",
    "TransitionDef",
]

Outcome = Literal["success", "failure", "needs_input"]
"""What a terminal state means; each definition's terminal states name one (`forge.result`
shows it on every result)."""

OUTCOMES: frozenset[str] = frozenset({"success", "failure", "needs_input"})

FAILURE_STATE = "fatal_error"
"""Every definition has this terminal state: where any failing hook ends a run."""

PROPERTIES = ("approval-before-side-effect", "wait-has-timeout", "no-unhandled-error", "guarded-side-effects")
"""What `forge check --require` and a definition's `[checks] require` can ask to be proved:
every side-effecting call approved on every path to it; every waiting state with a
deadline; every failure verdict handled by an edge of its own; every side-effecting call
checked by a guard that covers its tool on every path to it."""

TIMEOUT_TRIGGER = "timeout"
"""The trigger of a waiting state's deadline edge (see the module)."""

ANSWER_TRIGGER = "answer"
"""The trigger of the implicit edge from a needs-input state back to the initial state,
taken when a person answers the run waiting there (`forge.machine.asking`)."""

WRAP_UP_STATE = "wrap_up"
"""The state `MachineDefinition.with_wrap_up` adds."""

FAILURE_TRIGGER = "fail"
"""The implicit edge from any non-terminal state to `FAILURE_STATE`, taken when a hook
(stage action, guard, callback, observer) raises; reserved, so definitions cannot use it."""


@dataclass(frozen=True, slots=True)
class StateDef:
    """One state. Terminal states have an `outcome` and no action; the others have both
    an `action` (or None, for a pass-through state) and at least one outgoing transition."""

    name: str
    terminal: bool = False
    outcome: Outcome | None = None
    action: str | None = None
    doc: str = ""
    timeout: float | None = None
    """Seconds a waiting state waits before its `timeout` edge is taken (None: no deadline)."""


@dataclass(frozen=True, slots=True)
class TransitionDef:
    """One edge. `index` is its position in the file's `[[transitions]]` list."""

    index: int
    source: str
    trigger: str
    dest: str
    guard: str | None = None
    doc: str = ""

    @property
    def entry(self) -> str:
        """How error messages and findings name this edge."""
        guard = f" [{self.guard}]" if self.guard else ""
        return f"transitions[{self.index}] ({self.source} -{self.trigger}-> {self.dest}{guard})"


@dataclass(frozen=True, slots=True)
class MachineDefinition:
    """A validated loop definition. Hashable, so one engine serves every loop that uses it."""

    name: str
    initial: str
    states: tuple[StateDef, ...]
    transitions: tuple[TransitionDef, ...]
    title: str = ""
    description: str = ""
    path: str = "<memory>"
    requires: tuple[str, ...] = ()
    """The properties `forge check` must prove of it (`[checks] require`); a loop on it
    refuses to start when one fails."""
    handoffs: tuple[str, ...] = ()
    """The loops a policy may hand the conversation to (`[handoffs] to`, `forge.Handoff`), by
    the names `AgentLoop.with_handoffs` gives them."""
    _by_name: dict[str, StateDef] = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)
    _outgoing: dict[str, tuple[TransitionDef, ...]] = field(default_factory=dict, init=False, repr=False,
                                                             compare=False, hash=False)
    _hash: list[int] = field(default_factory=list, init=False, repr=False, compare=False, hash=False)

    def __hash__(self) -> int:
        """The fields' hash, made once: every loop built looks its engine up by it."""
        if not self._hash:
            self._hash.append(hash((self.name, self.initial, self.states, self.transitions, self.title,
                                    self.description, self.path, self.requires, self.handoffs)))
        return self._hash[0]

    def __post_init__(self) -> None:
        # lookups by name, built once: a definition of thousands of states stays linear to check
        self._by_name.update((state.name, state) for state in self.states)
        grouped: dict[str, list[TransitionDef]] = {}
        for t in self.transitions:
            grouped.setdefault(t.source, []).append(t)
        self._outgoing.update((name, tuple(ts)) for name, ts in grouped.items())

    def with_handoffs(self, *names: str) -> MachineDefinition:
        """This definition allowing handoffs to the loops `names` (as `[handoffs] to` in a
        file): `AgentLoop(..., definition=load_definition("single_agent").with_handoffs("billing"))
        .with_handoffs(billing=billing_loop)`.

        Raises:
            ValueError: (a UsageError) a name is blank or given twice, or the definition has
                no state where a policy decides (select_tool).
        """
        if not all(isinstance(name, str) and name.strip() for name in names) or len(set(names)) != len(names):
            raise UsageError(f"handoffs are distinct non-blank names, got {names!r}")
        if not any(state.action == "select_tool" for state in self.states):
            raise UsageError(f"definition {self.name!r} has no state where a policy decides (select_tool) to hand off from")
        return replace(self, handoffs=tuple(dict.fromkeys((*self.handoffs, *names))))

    def with_wrap_up(self, into: str = "budget_exhausted") -> MachineDefinition:
        """This definition asking the policy once more, for its answer from what the run has,
        before it ends in `into` (a terminal state, by default the one a token, money or time
        budget ends a run in): each edge into `into` goes to a new state `wrap_up` (action
        `wrap_up`, `forge.machine.stages.wrap_up`) instead, and from there, wrapped up or
        not, into `into`. Drawn and checked as any state: `AgentLoop(...,
        definition=load_definition("single_agent").with_wrap_up())`.

        Raises:
            ValueError: (a UsageError) `into` is no terminal state of the definition, no edge
                goes into it, or the definition has a state named `wrap_up` already.
        """
        target = self._by_name.get(into)
        if target is None or not target.terminal:
            raise UsageError(f"definition {self.name!r} has no terminal state {into!r} to wrap up before: its "
                             f"terminal states are {', '.join(s.name for s in self.terminal_states)}")
        if WRAP_UP_STATE in self._by_name:
            raise UsageError(f"definition {self.name!r} has a state named {WRAP_UP_STATE!r} already")
        moved = tuple(replace(t, dest=WRAP_UP_STATE) if t.dest == into else t for t in self.transitions)
        if moved == self.transitions:
            raise UsageError(f"no edge of definition {self.name!r} goes into {into!r}: nothing to wrap up before")
        state = StateDef(WRAP_UP_STATE, action="wrap_up",
                         doc=f"One last call of the policy for its answer, before the run ends in {into}.")
        count = len(self.transitions)
        added = (TransitionDef(count, WRAP_UP_STATE, "stop", into, "wrapped_up", "the policy gave its answer"),
                 TransitionDef(count + 1, WRAP_UP_STATE, "stop", into, "not_wrapped_up", "no answer to give"))
        return replace(self, states=(*self.states, state), transitions=(*moved, *added))

    def state(self, name: str) -> StateDef:
        """The state called `name`. Raises KeyError when there is none."""
        return self._by_name[name]

    @property
    def terminal_states(self) -> tuple[StateDef, ...]:
        return tuple(state for state in self.states if state.terminal)

    def outgoing(self, source: str) -> tuple[TransitionDef, ...]:
        return self._outgoing.get(source, ())

    def timeout_edge(self, source: str) -> TransitionDef | None:
        """The deadline edge from `source`, if it has one."""
        return next((t for t in self.outgoing(source) if t.trigger == TIMEOUT_TRIGGER), None)

    def answer_edge(self, source: str) -> TransitionDef | None:
        """The implicit `answer` edge from the needs-input state `source` to the initial
        state (index -2: not in the file); None for a state that needs no input."""
        state = self._by_name.get(source)
        if state is None or state.outcome != "needs_input":
            return None
        return TransitionDef(-2, source, ANSWER_TRIGGER, self.initial, doc="a person answered")

    def failure_edge(self, source: str) -> TransitionDef:
        """The implicit `fail` edge from `source` to `fatal_error` (index -1: not in the file)."""
        return TransitionDef(-1, source, FAILURE_TRIGGER, FAILURE_STATE, doc="a hook raised")


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a definition file: the entry it concerns, and what to do.

    `code` classifies it: toml, schema, missing-initial, unknown-state, unknown-callback,
    guard-action-mismatch, terminal-outgoing or dead-end.
    """

    entry: str
    message: str
    code: str = "schema"


class DefinitionError(ForgeError, ValueError):
    """A definition file cannot be used. `path` names the file, `problems` every fault."""

    def __init__(self, path: str, problems: tuple[Problem, ...]) -> None:
        lines = "\n".join(f"  {path}: {p.entry}: {p.message}" for p in problems)
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        super().__init__(f"invalid loop definition {path} ({count}):\n{lines}")
        self.path = path
        self.problems = problems
