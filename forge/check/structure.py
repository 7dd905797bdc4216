"""Structural findings: reachability, ways out, verdict coverage, stop states, determinism.

The loader already refuses unknown names, missing initial states, terminal states with
outgoing transitions and dead ends; these are the properties of the graph as a whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import combinations

from forge.agent.stopping import StopReason
from forge.check.findings import Finding, Severity
from forge.machine.catalog import StageCatalog
from forge.machine.stages import BUILTIN_STAGES
from forge.records.definition import FAILURE_STATE, MachineDefinition, StateDef, TransitionDef

__all__ = ["can_end", "reachable_from", "required_stop_states", "structural_findings"]

_Emit = Callable[[Severity, str, str, str], Finding]


def required_stop_states(definition: MachineDefinition, stages: StageCatalog = BUILTIN_STAGES) -> tuple[str, ...]:
    """The terminal states a run of the definition can demand: `fatal_error`, where any
    failing hook ends a run, and every stop its actions' guards mean (verify_and_decide's
    stop reasons, select_tool's selection failures, …), less the optional verdicts' stops
    that the definition does not handle (`ActionSpec.optional`)."""
    used = {state.action for state in definition.states if state.action}
    guarded = {t.guard for t in definition.transitions}
    demanded = (spec.stops_in for spec in stages.guards.values() if spec.stops_in and spec.action in used
                and (spec.verdict not in stages.actions[spec.action].optional or spec.name in guarded))
    return tuple(dict.fromkeys((FAILURE_STATE, *demanded)))


def guards_on(stages: StageCatalog, action: str, verdicts: Iterable[str]) -> list[str]:
    """The names of the guards that test one of `verdicts` of `action`, sorted."""
    wanted = set(verdicts)
    return sorted(g.name for g in stages.guards.values() if g.action == action and g.verdict in wanted)


def reachable_from(definition: MachineDefinition, start: str) -> set[str]:
    seen, frontier = {start}, [start]
    while frontier:
        state = frontier.pop()
        for t in definition.outgoing(state):
            if t.dest not in seen:
                seen.add(t.dest)
                frontier.append(t.dest)
    return seen


def can_end(definition: MachineDefinition) -> set[str]:
    """The states from which some terminal state can be reached: one search backwards from
    the terminal states, so checking every state stays linear in the definition's size."""
    incoming: dict[str, list[str]] = {}
    for t in definition.transitions:
        incoming.setdefault(t.dest, []).append(t.source)
    ending = {s.name for s in definition.terminal_states}
    frontier = list(ending)
    while frontier:
        for source in incoming.get(frontier.pop(), ()):
            if source not in ending:
                ending.add(source)
                frontier.append(source)
    return ending


def structural_findings(definition: MachineDefinition, stages: StageCatalog = BUILTIN_STAGES) -> Iterator[Finding]:
    def finding(severity: Severity, code: str, entry: str, message: str) -> Finding:
        return Finding(severity, code, definition.path, entry, message)

    reachable = reachable_from(definition, definition.initial)
    ending = can_end(definition)
    names = {s.name: s for s in definition.states}
    if definition.initial in names and names[definition.initial].terminal:
        yield finding(Severity.ERROR, "terminal-initial", "machine.initial",
                      f"the initial state {definition.initial!r} is terminal, so every run ends before any stage "
                      "runs (and nothing was verified); start in a working state such as 'select'")
    yield from _success_findings(definition, stages, names, finding)
    for state in definition.states:
        entry = f"states.{state.name}"
        if state.name not in reachable:
            yield finding(Severity.WARNING, "unreachable", entry,
                          f"no path from the initial state {definition.initial!r} reaches it; "
                          "add a transition into it or delete it")
        elif not state.terminal and state.name not in ending:
            yield finding(Severity.ERROR, "no-way-out", entry,
                          "no terminal state can be reached from it, so a run that gets here never ends; "
                          "add a transition towards a terminal state")
        if not state.terminal and state.action:
            handled = {stages.guards[t.guard].verdict for t in definition.outgoing(state.name) if t.guard}
            unguarded = any(t.guard is None for t in definition.outgoing(state.name))
            spec = stages.actions[state.action]
            untimed = spec.timed if state.timeout is None else frozenset()
            missing = sorted(spec.verdicts - spec.optional - untimed - handled)
            optional = sorted(spec.optional - spec.unwarned - handled)
            if optional and not unguarded:
                guards = guards_on(stages, state.action, optional)
                yield finding(Severity.WARNING, "unhandled-optional-verdict", entry,
                              f"action {state.action!r} returns {', '.join(optional)} only when the loop opts in "
                              f"(a policy that asks the user, a token budget), and no transition handles it: "
                              f"such a loop is refused or its run fails; add transitions guarded by "
                              f"{', '.join(guards)} to allow it")
            if missing and not unguarded:
                guards = guards_on(stages, state.action, missing)
                yield finding(Severity.ERROR, "unhandled-verdict", entry,
                              f"action {state.action!r} can return {', '.join(missing)}, which no transition "
                              f"handles, so the run would stop with NoTransitionEnabled; add transitions "
                              f"guarded by {', '.join(guards)}")
    yield from _stop_findings(definition, stages, reachable, finding)
    yield from _determinism_findings(definition, stages, finding)


def _success_findings(definition: MachineDefinition, stages: StageCatalog, names: dict[str, StateDef],
                      finding: _Emit) -> Iterator[Finding]:
    """Only a verify that said yes may lead into a success state."""
    verified = StopReason.VERIFIED_SUCCESS.value
    for t in definition.transitions:
        dest = names.get(t.dest)
        if dest is None or not dest.terminal or dest.outcome != "success":
            continue
        spec = stages.guards.get(t.guard) if t.guard else None
        if spec is None or spec.action != "verify_and_decide" or spec.verdict != verified:
            yield finding(Severity.ERROR, "unverified-success", t.entry,
                          f"this transition ends runs in the success state {t.dest!r} "
                          f"{'unguarded' if t.guard is None else f'on {t.guard!r}'}, but only a verify that said "
                          "yes may: guard it with decided_verified_success from a verify_and_decide state")


def _stop_findings(definition: MachineDefinition, stages: StageCatalog, reachable: set[str],
                   finding: _Emit) -> Iterator[Finding]:
    names = {s.name: s for s in definition.states}
    for stop in required_stop_states(definition, stages):
        state = names.get(stop)
        if state is None or not state.terminal:
            yield finding(Severity.ERROR, "missing-stop-state", f"states.{stop}",
                          f"every run that stops with {stop!r} needs a terminal state of that name; "
                          f"add [states.{stop}] with terminal = true")
        elif stop not in reachable and stop != FAILURE_STATE:  # a failing hook reaches it from anywhere
            yield finding(Severity.ERROR, "missing-stop-state", f"states.{stop}",
                          f"the terminal state for {stop!r} is never reached from {definition.initial!r}; "
                          "add the transition that ends the loop there")
    for t in definition.transitions:
        spec = stages.guards.get(t.guard) if t.guard else None
        if spec is not None and spec.stops_in and not _stops_in(definition, t.dest, spec.stops_in):
            yield finding(Severity.ERROR, "wrong-stop-state", t.entry,
                          f"guard {t.guard!r} means the run stops with {spec.stops_in!r}, but this transition "
                          f"goes to {t.dest!r}; point it at {spec.stops_in!r}")


def _stops_in(definition: MachineDefinition, dest: str, stop: str) -> bool:
    """Whether a transition into `dest` stops the run in `stop`: `dest` is it, or a wrap-up
    state (`MachineDefinition.with_wrap_up`) every edge of which goes into it."""
    if dest == stop:
        return True
    try:
        action = definition.state(dest).action
    except KeyError:  # no such state: another finding says so
        return False
    outgoing = definition.outgoing(dest)
    return action == "wrap_up" and bool(outgoing) and all(t.dest == stop for t in outgoing)


def _exclusive(a: TransitionDef, b: TransitionDef, stages: StageCatalog) -> bool:
    """Provably exclusive: both guarded, by guards on different values of one verdict."""
    if a.guard is None or b.guard is None:
        return False
    ga, gb = stages.guards.get(a.guard), stages.guards.get(b.guard)
    return ga is not None and gb is not None and ga.action == gb.action and ga.verdict != gb.verdict


def _determinism_findings(definition: MachineDefinition, stages: StageCatalog, finding: _Emit) -> Iterator[Finding]:
    for state in definition.states:
        for a, b in combinations(definition.outgoing(state.name), 2):
            if _exclusive(a, b, stages):
                continue
            if a.guard is None and b.guard is None:
                why = "both are unguarded"
            elif a.guard == b.guard:
                why = f"both are guarded by {a.guard!r}"
            elif a.guard is None or b.guard is None:
                why = "one of them is unguarded, so it is enabled whenever the other is"
            else:
                why = f"guards {a.guard!r} and {b.guard!r} are not drawn from one decision value"
            same = ("the same trigger" if a.trigger == b.trigger
                    else "different triggers, and the engine fires whichever is enabled")
            yield finding(Severity.ERROR, "nondeterministic", f"{a.entry} and {b.entry}",
                          f"both can fire from {state.name!r} ({same}): {why}; file order must not decide, "
                          "so guard each on a different verdict of the state's action")
