"""Properties `forge check --require` proves of a definition, before anything runs, over every
path of its graph (an explicit machine can be searched; a loop written as code cannot):

- `approval-before-side-effect`: every path from the initial state to a state that calls a
  tool (`call_tool`) passes an approval of that same call: a `request_approval` state left
  by `approval_granted` after the `select_tool` that chose it. A side-effecting call never
  leaves an approval state as "not needed", so that edge is not a way around. When no tool
  has a side effect, it holds at once. Without the loop's tools (`forge check` on a file
  without `--tools`), any call may have one.
- `wait-has-timeout`: every waiting state (a terminal state with `outcome = "needs_input"`)
  that a run can reach has a deadline: a `timeout` and its `timeout` edge.
- `guarded-side-effects`: every path from the initial state to a state that calls a tool
  passes a `check_call` state left by `guards_passed` after the `select_tool` that chose
  the call: a guard of the loop checked its arguments. The `call_unguarded` edge is a way
  around only for a side-effecting tool no guard covers (`unguarded`, the loop's: checked
  as `forge check MODULE:LOOP`); a definition checked without its loop's guards may be
  run with none, so that edge counts.
- `no-unhandled-error`: every failure verdict of a state's action (`ActionSpec.failures`:
  the policy that raised, verify that raised or decided a fatal error, a user stage's
  declared `failures`) leaves by a transition guarded on that verdict, not only by an
  unguarded catch-all or the implicit `fail` edge.

A violation comes with a counterexample: the shortest path from the initial state to where
the property fails, as transitions of the definition (`render_counterexample` draws it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from forge.check.structure import guards_on
from forge.errors import UsageError
from forge.machine.catalog import StageCatalog
from forge.machine.stages import BUILTIN_STAGES
from forge.records.definition import PROPERTIES, MachineDefinition, TransitionDef

__all__ = ["PROPERTIES", "Violation", "prove", "violations"]


@dataclass(frozen=True, slots=True)
class Violation:
    """A property that does not hold: which, where (`entry`), why, and the path that shows it."""

    property: str
    entry: str
    message: str
    path: tuple[TransitionDef, ...]

    def lines(self) -> list[str]:
        out = [f"{self.property}: {self.entry}: {self.message}", "    counterexample, from the initial state:"]
        out.extend(f"    {number}. {t.source} -{t.trigger}-> {t.dest}" + (f" [{t.guard}]" if t.guard else "")
                   for number, t in enumerate(self.path, start=1))
        return out


def violations(definition: MachineDefinition, required: Iterable[str], stages: StageCatalog = BUILTIN_STAGES,
               side_effects: bool | None = None, unguarded: Sequence[str] | None = None) -> tuple[Violation, ...]:
    """Every violation of the `required` properties. `side_effects` says whether any of the
    loop's tools has a side effect (None: unknown, so any call may); `unguarded` names the
    side-effecting tools none of the loop's guards covers (None: unknown, so any may be).

    Raises:
        UsageError: a property name that is not one of `PROPERTIES`.
    """
    found: list[Violation] = []
    for name in dict.fromkeys(required):
        found.extend(prove(definition, name, stages, side_effects, unguarded))
    return tuple(found)


def prove(definition: MachineDefinition, name: str, stages: StageCatalog = BUILTIN_STAGES,
          side_effects: bool | None = None, unguarded: Sequence[str] | None = None) -> tuple[Violation, ...]:
    """The violations of property `name` (none: it holds). See `violations`.

    Raises:
        UsageError: `name` is not one of `PROPERTIES`.
    """
    if name == "approval-before-side-effect":
        return () if side_effects is False else _approvals(definition, stages)
    if name == "guarded-side-effects":
        return () if side_effects is False else _guarded(definition, stages, unguarded)
    if name == "wait-has-timeout":
        return _timeouts(definition)
    if name == "no-unhandled-error":
        return _errors(definition, stages)
    raise UsageError(f"unknown property {name!r}; properties are {', '.join(PROPERTIES)}")


def _approvals(definition: MachineDefinition, stages: StageCatalog) -> tuple[Violation, ...]:
    """Each call reached with no approval of it (a side-effecting call never leaves an
    approval state as not needed)."""
    return tuple(Violation("approval-before-side-effect", f"states.{dest}",
                           f"a side-effecting call reaches {dest!r} with no approval of it: put a request_approval "
                           "state, left by approval_granted, on every path from select_tool to it", path)
                 for dest, path in _unchecked_calls(definition, stages, "request_approval", "approved", "not_needed"))


def _guarded(definition: MachineDefinition, stages: StageCatalog,
             unguarded: Sequence[str] | None) -> tuple[Violation, ...]:
    """Each call reached with no guard of its arguments passed: the `call_unguarded` edge is
    a way past only when a side-effecting tool may have no guard (`unguarded`)."""
    around = unguarded is None or bool(unguarded)
    which = (f"{', '.join(unguarded)} (no guard of the loop covers {'it' if len(unguarded) == 1 else 'them'})"
             if unguarded else "a side-effecting call")
    return tuple(Violation("guarded-side-effects", f"states.{dest}",
                           f"{which} reaches {dest!r} unguarded: give the loop a Guard of arguments covering every "
                           "side-effecting tool, and put a check_call state, left by guards_passed, on every path "
                           "from select_tool to it", path)
                 for dest, path in _unchecked_calls(definition, stages, "check_call", "call_passed",
                                                    None if around else "call_unguarded"))


def _unchecked_calls(definition: MachineDefinition, stages: StageCatalog, action: str, passed: str,
                     never: str | None) -> list[tuple[str, tuple[TransitionDef, ...]]]:
    """Each state calling a tool that a path reaches with the call chosen last not having
    left a state running `action` by its `passed` verdict since, and the shortest such path
    from the initial state: a search over (state, whether the call passed). An edge on the
    `never` verdict of `action` is one a side-effecting call never takes."""
    actions = {s.name: s.action for s in definition.states}
    start = (definition.initial, False)
    came: dict[tuple[str, bool], tuple[tuple[str, bool], TransitionDef] | None] = {start: None}
    frontier = deque([start])
    found: list[tuple[str, tuple[TransitionDef, ...]]] = []
    while frontier:
        node = frontier.popleft()
        state, checked = node
        for t in definition.outgoing(state):
            spec = stages.guards.get(t.guard) if t.guard else None
            ours = spec is not None and spec.action == action
            if ours and spec is not None and spec.verdict == never:
                continue
            now = False if actions.get(state) == "select_tool" else checked  # a new call is chosen
            if ours and spec is not None and spec.verdict == passed:
                now = True
            if actions.get(t.dest) == "call_tool" and not now and all(dest != t.dest for dest, _ in found):
                found.append((t.dest, (*_path(came, node), t)))
            following = (t.dest, now)
            if following not in came:
                came[following] = (node, t)
                frontier.append(following)
    return found


def _timeouts(definition: MachineDefinition) -> tuple[Violation, ...]:
    paths = _shortest_paths(definition)
    return tuple(Violation("wait-has-timeout", f"states.{s.name}",
                           f"a run waits in {s.name!r} with no deadline: give it timeout = \"…\" and a transition "
                           "from it with trigger = \"timeout\"", paths[s.name])
                 for s in definition.states
                 if s.terminal and s.outcome == "needs_input" and s.name in paths
                 and definition.timeout_edge(s.name) is None)


def _errors(definition: MachineDefinition, stages: StageCatalog) -> tuple[Violation, ...]:
    paths = _shortest_paths(definition)
    found = []
    for state in definition.states:
        if state.terminal or not state.action or state.name not in paths:
            continue
        spec = stages.actions[state.action]
        handled = {stages.guards[t.guard].verdict for t in definition.outgoing(state.name) if t.guard}
        for verdict in sorted(spec.failures - handled):
            guards = guards_on(stages, state.action, [verdict])
            found.append(Violation("no-unhandled-error", f"states.{state.name}",
                                   f"action {state.action!r} fails with {verdict!r}, which no transition of its own "
                                   f"handles (only a catch-all or the implicit fail edge): add one guarded by "
                                   f"{' or '.join(guards) or 'a guard on it'}", paths[state.name]))
    return tuple(found)


def _shortest_paths(definition: MachineDefinition) -> dict[str, tuple[TransitionDef, ...]]:
    """The shortest path from the initial state to each state a run can reach."""
    paths: dict[str, tuple[TransitionDef, ...]] = {definition.initial: ()}
    frontier = deque([definition.initial])
    while frontier:
        state = frontier.popleft()
        for t in definition.outgoing(state):
            if t.dest not in paths:
                paths[t.dest] = (*paths[state], t)
                frontier.append(t.dest)
    return paths


def _path(came: dict[tuple[str, bool], tuple[tuple[str, bool], TransitionDef] | None],
          node: tuple[str, bool]) -> Sequence[TransitionDef]:
    path: list[TransitionDef] = []
    step = came[node]
    while step is not None:
        node, t = step
        path.append(t)
        step = came[node]
    return path[::-1]
