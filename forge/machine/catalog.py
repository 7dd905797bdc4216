"""The stages a definition may name: actions with their verdicts, and guards on those verdicts.

A non-terminal state runs one *action* when it fires; the action returns a *verdict*, one of
the values it declares. Every *guard* tests one verdict of one action, so the guards on a
state's transitions are mutually exclusive by construction and `forge check` can prove it.
The built-in stages (`forge.machine.stages`) and the ones users supply (`Stage`, passed as
`AgentLoop(..., stages={...})`) live in one `StageCatalog`, which the loader, the engine and
`forge check` all read: a user stage is treated exactly like a built-in one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from forge.errors import UsageError
from forge.records.abstract import AbstractModel, any_verdict
from forge.records.effects import Call, Steps
from forge.records.outcome import StageOutcome

if TYPE_CHECKING:
    from forge.machine.run import Run

__all__ = ["ActionSpec", "GuardSpec", "Stage", "StageCatalog", "import_reference", "import_stages"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """A stage action: `run(run)` is a generator of effects (`forge.records.effects`) whose
    return value is a `StageOutcome` whose verdict is one of `verdicts`."""

    name: str
    run: Callable[[Run], Steps[StageOutcome]]
    verdicts: frozenset[str]
    doc: str
    model: AbstractModel | None = None
    """What `forge check` explores of the action (`forge.records.abstract`); None: any
    declared verdict, changing nothing the stop decision reads (a user stage)."""
    needs: str = ""
    """What the action needs an earlier stage to have produced, said when a path lacks it."""
    observes: bool = False
    """Whether its records' detail is a tool call's outcome (`tool`, `status`): an
    observation, for whoever reads a trace without running it (the replay debugger)."""
    optional: frozenset[str] = frozenset()
    """Verdicts the action returns only when the loop opts in (a policy that asks, a token
    budget): `forge check` warns, rather than errs, when a definition does not handle one,
    and the loop refuses the option (or the run fails, naming the missing edge) instead."""
    failures: frozenset[str] = frozenset()
    """Its verdicts that mean something failed: `forge check --require no-unhandled-error`
    wants each handled by a transition of its own."""
    timed: frozenset[str] = frozenset()
    """Verdicts only a state with a `timeout` returns (its deadline passed): such a state
    must handle them (by its timeout edge), any other never meets them."""
    unwarned: frozenset[str] = frozenset()
    """Optional verdicts a definition may leave out with nothing refused or failing: the
    action then never returns them (a definition without `tools_batched` makes a policy's
    calls one at a time), so `forge check` does not warn of them."""

    @property
    def abstract(self) -> AbstractModel:
        """Its model, or a user stage's: any declared verdict."""
        return self.model if self.model is not None else any_verdict(self.verdicts)


@dataclass(frozen=True, slots=True)
class GuardSpec:
    """A guard: true exactly when `action` returned `verdict`.

    `stops_in` names the terminal state a true guard must lead to, for guards that mean the
    run is over (a stop reason or a selection failure); `forge check` holds definitions to it.
    `test` replaces the verdict comparison (for experiments and tests: `forge check` proves
    exclusivity from `verdict`, so a custom test must agree with it to keep that proof).
    """

    name: str
    action: str
    verdict: str
    stops_in: str | None = None
    test: Callable[[str | None], bool] | None = None

    def holds(self, verdict: str | None) -> bool:
        """Whether this guard enables its transition after the action returned `verdict`."""
        return verdict == self.verdict if self.test is None else bool(self.test(verdict))


@dataclass(frozen=True, slots=True, init=False)
class Stage:
    """A stage users supply: `action(run) -> StageOutcome | verdict`, sync or `async def`
    (under `arun`).

    `verdicts` lists every verdict `action` may give; giving another one ends the run in
    `fatal_error`. `guards` maps each guard name a definition may use to the verdict it tests
    (default: one guard per verdict, named like it). `stops_in` maps a guard to the terminal
    state it must lead to, when the verdict means the run is over. The action reads the run
    it is given and returns `StageOutcome(verdict, detail={...})`: the detail goes into the
    trace (or it returns the verdict alone). Assigning `run.detail` still works for this
    release, with a DeprecationWarning.

    Raises:
        ValueError: no verdicts, a guard on an undeclared verdict, or a name that is not an
            identifier.
    """

    action: Callable[[Run], Any]
    verdicts: frozenset[str]
    guards: Mapping[str, str]
    stops_in: Mapping[str, str]
    doc: str
    failures: frozenset[str]

    def __init__(self, action: Callable[[Run], Any], verdicts: Iterable[str],
                 guards: Mapping[str, str] | None = None, stops_in: Mapping[str, str] | None = None,
                 doc: str = "", failures: Iterable[str] = ()) -> None:
        if not callable(action):
            raise UsageError(f"Stage action must be callable, got {action!r}")
        if isinstance(verdicts, str):
            raise UsageError("Stage verdicts must be a set of strings, not a string")
        declared = frozenset(verdicts)
        if not declared:
            raise UsageError("a Stage needs at least one verdict")
        chosen = dict(guards) if guards is not None else {v: v for v in sorted(declared)}
        for name, verdict in chosen.items():
            if not _NAME.fullmatch(name):
                raise UsageError(f"guard name {name!r} is not an identifier")
            if verdict not in declared:
                raise UsageError(f"guard {name!r} tests {verdict!r}, which is not a declared verdict "
                                 f"({', '.join(sorted(declared))})")
        for name in stops_in or {}:
            if name not in chosen:
                raise UsageError(f"stops_in names {name!r}, which is not one of the stage's guards")
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "verdicts", declared)
        object.__setattr__(self, "guards", chosen)
        object.__setattr__(self, "stops_in", dict(stops_in or {}))
        object.__setattr__(self, "doc", doc)
        failed = frozenset([failures] if isinstance(failures, str) else failures)
        if failed - declared:
            raise UsageError(f"failures name {sorted(failed - declared)[0]!r}, which is not a declared verdict "
                             f"({', '.join(sorted(declared))})")
        object.__setattr__(self, "failures", failed)

    def __hash__(self) -> int:
        return hash((self.action, self.verdicts, tuple(self.guards.items()), tuple(self.stops_in.items()),
                     self.failures))

    def spec(self, name: str) -> ActionSpec:
        """This stage as the action called `name` (the same spec for an equal stage, so
        loops built with equal stages share a catalog, a parsed definition and an engine)."""
        return _spec_of(self, name)


_NO_DETAIL: Mapping[str, Any] = {}


@lru_cache(maxsize=256)
def _spec_of(stage: Stage, name: str) -> ActionSpec:
    action, verdicts = stage.action, stage.verdicts

    def steps(run: Run) -> Steps[StageOutcome]:
        firing = run.firing
        firing.detail = _NO_DETAIL  # what a stage that still assigns run.detail replaces
        returned = yield Call(action, (run,), f"stage {name!r}")
        outcome = returned if isinstance(returned, StageOutcome) else StageOutcome(returned, firing.detail)
        if outcome.verdict not in verdicts:
            raise UsageError(f"stage {name!r} returned {outcome.verdict!r}, not one of its declared verdicts "
                             f"({', '.join(sorted(verdicts))})")
        return outcome

    steps.user_action = action  # type: ignore[attr-defined]  # lets run() refuse an async stage up front
    return ActionSpec(name, steps, verdicts, stage.doc or f"user stage {name}", failures=stage.failures)


@dataclass(frozen=True, eq=False)
class StageCatalog:
    """The actions and guards a definition may name, each by a unique name.

    Equal catalogs (the same specs under the same names) hash alike, so loops built with
    the same stages share one parsed definition and one engine.
    """

    actions: Mapping[str, ActionSpec]
    guards: Mapping[str, GuardSpec]

    def _key(self) -> tuple[Any, ...]:
        return tuple(self.actions.items()), tuple(self.guards.items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StageCatalog) and self._key() == other._key()

    def __hash__(self) -> int:
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:  # made once: every loop built looks its definition and engine up by it
            cached = hash(self._key())
            object.__setattr__(self, "_hash", cached)
        return cached

    def with_stages(self, stages: Mapping[str, Stage]) -> StageCatalog:
        """This catalog plus `stages`, keyed by the action name definitions use.

        Raises:
            ValueError: a name is not an identifier, is not a `Stage`, or is already an action
                or guard of this catalog.
        """
        actions, guards = dict(self.actions), dict(self.guards)
        for name, stage in stages.items():
            if not isinstance(stage, Stage):
                raise UsageError(f"stages[{name!r}] must be a forge Stage, got {stage!r}")
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise UsageError(f"stage name {name!r} is not an identifier")
            if name in actions:
                raise UsageError(f"stage {name!r} clashes with the action of that name; choose another name")
            actions[name] = stage.spec(name)
            for guard, verdict in stage.guards.items():
                if guard in guards:
                    raise UsageError(f"guard {guard!r} of stage {name!r} clashes with the guard of that name "
                                     f"(of action {guards[guard].action!r}); name it differently")
                guards[guard] = GuardSpec(guard, name, verdict, stage.stops_in.get(guard))
        return StageCatalog(actions, guards)

    def with_guard_test(self, guard: str, test: Callable[[str | None], bool]) -> StageCatalog:
        """This catalog with `guard`'s test replaced. Raises KeyError for an unknown guard."""
        return StageCatalog(self.actions, {**self.guards, guard: replace(self.guards[guard], test=test)})


def import_reference(reference: str, option: str, example: str) -> Any:
    """The object `package.module:NAME` or `path/to/file.py:NAME` names (the current
    directory on the import path, as for `python -m`; a file's folder first, as `python
    path/to/file.py` has it), for the command-line `option` that took it.

    Raises:
        ValueError: `reference` is not `module:NAME`, the module cannot be imported, or it
            has no NAME.
    """
    import importlib
    import os
    import sys

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module_name, _, attribute = reference.rpartition(":")
    if not module_name or not attribute:
        raise UsageError(f"{option} {reference!r}: expected MODULE:NAME or PATH.py:NAME, e.g. {example}")
    try:
        if module_name.endswith(".py") or os.path.sep in module_name or "/" in module_name:
            from pathlib import Path

            from forge.user_code import import_file  # a file, as `forge worker --loops` takes one

            module: Any = import_file(Path(module_name))
        else:
            module = importlib.import_module(module_name)
    except Exception as error:
        raise UsageError(f"{option} {reference!r}: cannot import {module_name!r}: {type(error).__name__}: {error}") from error
    if not hasattr(module, attribute):
        raise UsageError(f"{option} {reference!r}: module {module_name!r} has no {attribute!r}")
    return getattr(module, attribute)


def import_stages(reference: str) -> Mapping[str, Stage]:
    """The mapping of user stages named by `reference`, `package.module:NAME` (how
    `forge check --stages` finds the stages a definition names). The current directory is
    on the import path, as it is for `python -m`.

    Raises:
        ValueError: `reference` is not `module:NAME`, the module cannot be imported, it has no
            NAME, or NAME is not a mapping of names to `Stage`s.
    """
    stages = import_reference(reference, "--stages", "myagent.stages:STAGES")
    attribute = reference.partition(":")[2]
    if not isinstance(stages, Mapping) or not all(isinstance(v, Stage) for v in stages.values()):
        raise UsageError(f"--stages {reference!r}: {attribute!r} must be a mapping of action names to forge Stage "
                         f"objects, got {type(stages).__name__}")
    return stages
