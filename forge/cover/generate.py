"""Tests for the transitions no recorded run took: `forge cover --generate DIR`.

For each transition a definition has and the recorded runs never took, a search finds the
shortest script that makes a real run take it, as XState's test models do: the loop runs on
its definition with stub tools (`forge.cover.stubs`), and each step of a script is one move:
the policy calls a tool (a new call, the previous call again, a side-effecting tool, two
calls at once, an intent two tools tie for, a tool that does not exist, a call that spends the run's token
budget), finishes (with an answer that is not the loop's output, where the definition can
take one: its loop's output is `forge.cover.stubs.DONE`) or asks the user; the tool returns or
raises (`ToolError`, `PermanentToolError`, `TransientToolError` once or always); verify
answers True, False or raises; the approver approves, rejects or does not answer. A script
whose run asks for one more decision is extended (the policy that runs out of script
raises, which is a transition too); one whose run ended is not. The loop runs with
`max_steps=3`, `repeat_limit=2`, `max_attempts=2`, so budgets and repetition are reachable in
a few steps.

Each script found becomes a pytest test that builds the loop with a `ScriptedPolicy`, the
stubs and the answers the run used, runs it, and asserts the transition was taken. A
transition no script reaches within the search's bound is named with why.
"""

from __future__ import annotations

import dataclasses
import itertools
import keyword
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.cover import Edge, edge_of
from forge.cover.stubs import ScriptedFailure, perform
from forge.files import write_atomically
from forge.machine.stages import BUILTIN_STAGES
from forge.records.definition import MachineDefinition

__all__ = ["LIMITS", "Forced", "Generated", "Unforced", "force", "write_tests"]

LIMITS: dict[str, Any] = {"max_steps": 3, "repeat_limit": 2, "max_attempts": 2}
"""The loop's limits every generated test runs with (as `AgentLoop` arguments: `max_steps`,
and the others inside `Limits` and `Retry`, see `_options`)."""

TOKENS = 100
"""The token budget of a definition that can stop at one, and what a "spend" move costs."""

DEPTH = 4
"""The longest script (in steps) the search tries."""

_TOOL_OUTCOMES: tuple[tuple[str, ...], ...] = (("ok",), ("retryable",), ("fatal",), ("transient", "ok"),
                                               ("transient", "transient"))
_VERIFY: tuple[Any, ...] = (False, True, "raise")
_APPROVALS: tuple[bool | None, ...] = (True, False, None)


@dataclass(frozen=True, slots=True)
class Move:
    """One step of a script: what the policy decides, what the tool's attempts do, what
    verify answers, what the approver answers."""

    decision: str
    outcomes: tuple[str, ...] = ()
    verify: Any = None
    approval: bool | None = None


@dataclass(frozen=True, slots=True)
class Script:
    """What a run used, in order: the policy's decisions (as source text), each stub's
    outcomes, verify's and the approver's answers."""

    decisions: tuple[str, ...]
    outcomes: tuple[tuple[str, tuple[str, ...]], ...]
    verify: tuple[Any, ...]
    approvals: tuple[Any, ...]
    spent: tuple[int, ...] = ()
    """The decisions (by index) before which the policy spent `TOKENS` of model usage."""


@dataclass(frozen=True, slots=True)
class Forced:
    edge: Edge
    script: Script


@dataclass(frozen=True, slots=True)
class Unforced:
    edge: Edge
    why: str


@dataclass(frozen=True, slots=True)
class Generated:
    """What `write_tests` wrote: the file (None when there was nothing to force), the
    transitions it forces and those it could not, with why."""

    path: Path | None
    forced: tuple[Forced, ...]
    unforced: tuple[Unforced, ...]


def _moves(with_approval: bool, with_budget: bool = False, with_output: bool = False) -> Iterator[Move]:
    for decision in ("call", "finish", "repeat", "effect", "tie", "missing", "ask", "spend", "invalid", "together"):
        if (decision == "spend" and not with_budget) or (decision == "invalid" and not with_output):
            continue
        if decision in ("tie", "missing", "ask", "invalid"):
            yield Move(decision)
        elif decision == "together":
            yield from (Move(decision, ("ok",), v) for v in _VERIFY)
        elif decision == "finish":
            yield from (Move(decision, (), v) for v in _VERIFY)
        elif decision == "effect" and with_approval:
            for approval in _APPROVALS:
                outcomes = _TOOL_OUTCOMES if approval else ((),)
                yield from (Move(decision, o, v, approval) for o in outcomes for v in _VERIFY)
        else:
            yield from (Move(decision, o, v) for o in _TOOL_OUTCOMES for v in _VERIFY)


class _OutOfScript(Exception):
    """The run asked for a decision past the script: it can be extended."""


@dataclass
class _Harness:
    """Runs scripts on one loop whose parts read the move of the step under way, and
    notes what each run used."""

    definition: MachineDefinition
    moves: Sequence[Move] = ()
    step: int = -1
    attempts: int = 0
    last_n: int = 0
    used: dict[str, list[Any]] = field(default_factory=dict)
    loop: Any = None

    def __post_init__(self) -> None:
        from forge.loop import AgentLoop
        from forge.tools import Tool

        tools = [Tool(name, frozenset(capabilities), self._handler(name), optional={"n"}, side_effect=name == "effect")
                 for name, capabilities in _TOOLS]
        self.loop = AgentLoop(tools, self._policy, self._verify, definition=self.definition,
                              approver=self._approver if _asks_approval(self.definition) else None,
                              **_options(self.definition))

    def run(self, moves: Sequence[Move]) -> tuple[Any, bool]:
        """The run of `moves`, and whether it asked for more."""
        self.moves, self.step, self.last_n = moves, -1, 0
        self.used = {"decisions": [], "verify": [], "approvals": [], "spent": [], **{name: [] for name, _ in _TOOLS}}
        result = self.loop.run("forge cover")
        return result, isinstance(result.error, _OutOfScript)

    def script(self) -> Script:
        return Script(tuple(self.used["decisions"]),
                      tuple((name, tuple(self.used[name])) for name, _ in _TOOLS),
                      tuple(self.used["verify"]), tuple(self.used["approvals"]), tuple(self.used["spent"]))

    def _policy(self, goal: str, state: Any) -> Any:
        from forge.cover.stubs import spend
        from forge.policy import Ask, Finish, Intent

        self.step += 1
        self.attempts = 0
        if self.step >= len(self.moves):
            raise _OutOfScript()
        move = self.moves[self.step]
        decision: Any
        if move.decision == "finish":
            decision, text = Finish("done"), 'Finish("done")'
        elif move.decision == "tie":
            decision, text = Intent({"shared"}), 'Intent({"shared"})'
        elif move.decision == "missing":
            decision, text = Intent.call("missing"), 'Intent.call("missing")'
        elif move.decision == "ask":
            decision, text = Ask("which one?"), 'Ask("which one?")'
        elif move.decision == "invalid":
            decision, text = Finish("not done"), 'Finish("not done")'
        elif move.decision == "together":
            n = self.step + 1
            decision = [Intent.call("plain", n=n), Intent.call("plain", n=n + 10)]
            text = f'[Intent.call("plain", n={n}), Intent.call("plain", n={n + 10})]'
        else:
            if move.decision == "spend":
                spend(state, TOKENS)
                self.used["spent"].append(len(self.used["decisions"]))
            tool = "effect" if move.decision == "effect" else "plain"
            n = self.last_n if move.decision == "repeat" and self.last_n else self.step + 1
            self.last_n = n
            decision, text = Intent.call(tool, n=n), f'Intent.call("{tool}", n={n})'
        self.used["decisions"].append(text)
        return decision

    def _handler(self, name: str) -> Any:
        def handle(n: int = 0) -> str:
            outcomes = self.moves[self.step].outcomes
            outcome = outcomes[min(self.attempts, len(outcomes) - 1)] if outcomes else "ok"
            self.attempts += 1
            self.used[name].append(outcome)
            return perform(name, outcome, n)
        return handle

    def _verify(self, observation: Any) -> Any:
        answer = self.moves[self.step].verify if 0 <= self.step < len(self.moves) else False
        answer = False if answer is None else answer
        self.used["verify"].append(answer)
        if answer == "raise":
            raise ScriptedFailure("verify raised, as scripted")
        return answer

    def _approver(self, request: Any) -> Any:
        answer = self.moves[self.step].approval
        self.used["approvals"].append(answer)
        return answer


_TOOLS = (("plain", ("plain",)), ("effect", ("effect",)), ("left", ("shared",)), ("right", ("shared",)))


def _asks_approval(definition: MachineDefinition) -> bool:
    return any(state.action == "request_approval" for state in definition.states)


def _takes(definition: MachineDefinition, verdict: str) -> bool:
    """Whether the definition has a transition for this verdict of a built-in stage."""
    return any(t.guard and BUILTIN_STAGES.guards.get(t.guard) is not None
               and BUILTIN_STAGES.guards[t.guard].verdict == verdict for t in definition.transitions)


def _budgeted(definition: MachineDefinition) -> bool:
    """Whether the definition can stop a run at its token budget (so its loop takes one)."""
    return _takes(definition, "budget_exhausted")


def _validates(definition: MachineDefinition) -> bool:
    """Whether the definition can replan after an invalid answer (so its loop takes an output)."""
    return _takes(definition, "answer_invalid")


def _options(definition: MachineDefinition) -> dict[str, Any]:
    """The AgentLoop arguments a generated test's loop takes (`LIMITS`, grouped; `DONE` as
    its output where the definition can take an invalid answer)."""
    from forge.cover.stubs import DONE
    from forge.options import Limits, Retry

    options: dict[str, Any] = {
        "max_steps": LIMITS["max_steps"],
        "limits": Limits(LIMITS["repeat_limit"], token_budget=TOKENS if _budgeted(definition) else None),
        "retry": Retry(LIMITS["max_attempts"])}
    if _validates(definition):
        options["output"] = DONE
    return options


def _code(value: Any) -> str:
    """`value` as the code a test file makes it with: a grouped value by its fields that are
    not their defaults."""
    from forge.cover.stubs import DONE

    if value is DONE:
        return "DONE"
    if not dataclasses.is_dataclass(value):
        return repr(value)
    given = ", ".join(f"{each.name}={getattr(value, each.name)!r}" for each in dataclasses.fields(value)
                      if getattr(value, each.name) != each.default)
    return f"{type(value).__name__}({given})"


def force(definition: MachineDefinition, targets: Sequence[Edge], budget: int = 60_000
          ) -> tuple[list[Forced], list[Unforced]]:
    """The shortest script found for each of `targets` (edges of `definition`), and the
    targets no script of up to `DEPTH` steps (and `budget` runs) reached, with why."""
    builtin = set(BUILTIN_STAGES.actions)
    foreign = sorted({s.action for s in definition.states if s.action and s.action not in builtin})
    if foreign:
        why = (f"the definition runs stage {foreign[0]!r}, which forge cover cannot script (it forces only the "
               "built-in stages' verdicts)")
        return [], [Unforced(edge, why) for edge in targets]
    harness = _Harness(definition)
    wanted = set(targets)
    found: dict[Edge, Script] = {}
    frontier: list[tuple[Move, ...]] = [()]
    runs = 0
    moves = list(_moves(_asks_approval(definition), _budgeted(definition), _validates(definition)))
    for _depth in range(DEPTH):
        extendable: list[tuple[Move, ...]] = []
        for prefix, move in itertools.product(frontier, moves):
            if runs >= budget or wanted <= set(found):
                break
            script = (*prefix, move)
            result, more = harness.run(script)
            runs += 1
            for record in result.trace:
                edge = edge_of(definition, record)
                if edge in wanted and edge not in found:
                    found[edge] = harness.script()
            if more:
                extendable.append(script)
        frontier = extendable
        if not frontier or wanted <= set(found):
            break
    forced = [Forced(edge, found[edge]) for edge in targets if edge in found]
    why = (f"no script of up to {DEPTH} steps reaches it: the policy calls a tool (new or again, side-effecting, two at once, "
           "tied, unknown, spending the token budget), finishes (validly or not) or asks, the tool returns or "
           "raises, verify and the approver answer either way")
    return forced, [Unforced(edge, why) for edge in targets if edge not in found]


def write_tests(definition: MachineDefinition, targets: Sequence[Edge], folder: Path, reference: str) -> Generated:
    """Force `targets` (see `force`) and write a test for each one forced to
    `folder/test_cover_NAME.py`, building the loop on `reference` (how the test names the
    definition: a built-in name or the file's path). Returns what was written."""
    forced, unforced = force(definition, targets)
    if not forced:
        return Generated(None, (), tuple(unforced))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"test_cover_{_identifier(definition.name)}.py"
    approver = _asks_approval(definition)
    limits = _options(definition)
    parts = [_HEADER.format(name=definition.name, reference=reference, limits=", ".join(f"{k}={_code(v)}" for k, v in
                                                                                      limits.items()))]
    seen: set[str] = set()
    for item in forced:
        name = _identifier(f"{item.edge.source}_{item.edge.trigger}_{item.edge.dest}_{item.edge.guard or ''}")
        while name in seen:
            name += "_"
        seen.add(name)
        parts.append(_test(name, item, reference, approver, limits))
    text = "\n\n\n".join(parts) + "\n"
    write_atomically(path, text)
    return Generated(path, tuple(forced), tuple(unforced))


_HEADER = '''"""Tests `forge cover --generate` wrote for transitions of {name} that no recorded run took.

Each forces one transition by the shortest script forge cover found: a ScriptedPolicy,
stub tools that return or raise in turn, and scripted verify and approver answers, on a
loop with {limits}. Regenerate rather than edit.
"""

from forge import AgentLoop, Ask, Finish, Intent, Limits, Retry, ScriptedPolicy
from forge.cover import took
from forge.cover.stubs import DONE, Answers, Spending, Stub

DEFINITION = {reference!r}'''


def _test(name: str, item: Forced, reference: str, approver: bool, limits: dict[str, Any]) -> str:
    script, edge = item.script, item.edge
    stubs = ",\n        ".join(
        f'Stub("{tool}", {{{", ".join(repr(c) for c in capabilities)}}}, {list(dict(script.outcomes)[tool])!r}'
        + (", side_effect=True)" if tool == "effect" else ")")
        for tool, capabilities in _TOOLS)
    decisions = ", ".join(script.decisions)
    policy = f"ScriptedPolicy([{decisions}])"
    if script.spent:
        policy = f"Spending({policy}, at={list(script.spent)!r}, tokens={TOKENS})"
    approval = f", approver=Answers(\"the approver\", {list(script.approvals)!r})" if approver else ""
    options = ", ".join(f"{k}={_code(v)}" for k, v in limits.items())
    guard = f", {edge.guard!r}" if edge.guard else ""
    return f'''def test_{name}():
    """{edge}"""
    stubs = [
        {stubs},
    ]
    loop = AgentLoop([stub.tool for stub in stubs], {policy},
                     Answers("verify", {list(script.verify)!r}), definition=DEFINITION{approval}, {options})
    result = loop.run("reach {edge.source} -{edge.trigger}-> {edge.dest}")
    assert took(result, {edge.source!r}, {edge.trigger!r}, {edge.dest!r}{guard}), result.trace'''


def _identifier(text: str) -> str:
    name = re.sub(r"\W+", "_", text).strip("_") or "transition"
    return f"{name}_" if keyword.iskeyword(name) else name
