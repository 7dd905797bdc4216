"""`forge check`: prove a loop definition sound before it runs.

Loading problems (unknown names, dead ends, …), structure (reachability, ways out, verdicts
without a transition, stop states), determinism (transitions of one state whose guards are
not provably exclusive) and boundedness (every run ends within a computed number of
transitions for the given `max_steps`); and the properties asked for (`--require`, or the
definition's `[checks] require`), each proved over every path or refuted with a
counterexample (`forge.check.properties`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from forge.check.bounds import Boundedness, explore
from forge.check.findings import Finding, Severity
from forge.check.properties import Violation, violations
from forge.check.structure import structural_findings
from forge.machine.catalog import Stage, StageCatalog
from forge.machine.loader import catalog_of, parse_definition, resolve_definition
from forge.machine.stages import BUILTIN_STAGES
from forge.records.definition import MachineDefinition

__all__ = [
    "CheckReport",
    "Violation",
    "Finding",
    "Severity",
    "check_definition",
    "check_definitions",
    "check_loop",
    "default_definitions",
    "soundness_errors",
    "unguarded",
]


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Everything `forge check` found in one definition file."""

    path: str
    findings: tuple[Finding, ...]
    boundedness: Boundedness | None
    violations: tuple[Violation, ...] = ()
    """The required properties that do not hold, each with its counterexample."""
    definition: MachineDefinition | None = None

    @property
    def ok(self) -> bool:
        return not any(f.severity is Severity.ERROR for f in self.findings)

    def lines(self) -> list[str]:
        """The human-readable report, one line per finding, then the verdict."""
        out = [str(f) for f in self.findings if f.code != "property"]  # a violation prints its path below
        for violation in self.violations:
            out.extend(violation.lines())
        b = self.boundedness
        if b is not None and b.bound is not None:
            out.append(
                f"{self.path}: every run ends within {b.bound} transitions "
                f"(max_steps={b.max_steps}, repeat_limit={b.repeat_limit}; {b.explored:,} abstract states explored)"
            )
        elif b is not None and b.needs:
            out.append(f"{self.path}: counterexample, a run that reaches a stage without what it needs:")
            out.extend(f"    {t.entry}" for t in b.counterexample[-12:])
            out.append(f"    … then {b.needs}")
        elif b is not None:
            out.append(f"{self.path}: counterexample, a run that never ends:")
            shown = b.counterexample[-12:]
            if len(shown) < len(b.counterexample):
                out.append(f"    … {len(b.counterexample) - len(shown)} transitions before these")
            out.extend(f"    {t.entry}" for t in shown)
            if b.over_budget:
                out.append(f"    … and on, past max_steps={b.max_steps} tool executions with no stop decision")
            else:
                out.append("    … and round again, back where the path began repeating")
        out.append(f"{self.path}: {'ok' if self.ok else 'FAILED'}")
        return out


def check_definition(path: str | Path, max_steps: int = 8, repeat_limit: int = 3,
                     stages: StageCatalog | Mapping[str, Stage] | None = None,
                     progress: Callable[[int], None] | None = None, require: Iterable[str] = (),
                     side_effects: bool | None = None) -> CheckReport:
    """Check one definition (a file or built-in name) for these loop limits; `stages` are
    the user stages it may name, checked exactly like the built-in ones. `progress(explored)`
    is called about once a second while the exploration takes longer. `require` names
    properties to prove (`forge.check.properties`), besides the definition's own `[checks]
    require`; `side_effects` says whether any of the loop's tools has a side effect (None:
    unknown, so any call may).

    Raises:
        FileNotFoundError: no such file or built-in.
        ValueError: a limit below 1, malformed `stages`, or an unknown property.
    """
    catalog = catalog_of(stages)
    resolved = str(resolve_definition(path))
    definition, problems = parse_definition(resolved, catalog)
    return _report(resolved, definition, problems,
                   _Checking(catalog, max_steps, repeat_limit, progress, tuple(require), side_effects))


def check_loop(loop: Any, progress: Callable[[int], None] | None = None, require: Iterable[str] = ()) -> CheckReport:
    """`check_definition` for an `AgentLoop` (`forge check PATH.py:LOOP`): its definition,
    with its own stages, `max_steps`, `repeat_limit` and tools (whether any has a side effect)."""
    definition = loop.definition
    return _report(str(definition.path), definition, (),
                   _Checking(loop.stages, loop.max_steps, loop.repeat_limit, progress, tuple(require),
                             any(tool.side_effect for tool in loop.tools), unguarded(loop)))


def unguarded(loop: Any) -> tuple[str, ...]:
    """The side-effecting tools of `loop` none of its guards covers: a tool that runs a child
    loop (`as_tool`, a `CodeTool`) is covered when every side effect inside it is guarded
    there (its own tools covered, and its definition proven `guarded-side-effects`)."""
    found = []
    for tool in loop.tools:
        if not tool.side_effect or any(guard.covers("arguments", tool.name) for guard in loop.guards):
            continue
        child = getattr(tool, "child", None)
        if child is not None and not unguarded(child) and \
                not violations(child.definition, ["guarded-side-effects"], child.stages, True, ()):
            continue
        found.append(tool.name)
    return tuple(found)


@dataclass(frozen=True, slots=True)
class _Checking:
    """What a definition is checked with: the stages it may name, the loop's limits, how
    the exploration tells its progress, the properties to prove besides the definition's
    own, and what is known of the loop's tools (any side effect; the ones no guard covers)."""

    catalog: StageCatalog
    max_steps: int
    repeat_limit: int
    progress: Callable[[int], None] | None = None
    require: tuple[str, ...] = ()
    side_effects: bool | None = None
    unguarded: tuple[str, ...] | None = None


def _report(resolved: str, definition: MachineDefinition | None, problems: Iterable[Any],
            checking: _Checking) -> CheckReport:
    """The report on `definition` (None: it did not parse, `problems` say why)."""
    problems = tuple(problems)
    findings = [Finding(Severity.ERROR, p.code, resolved, p.entry, p.message) for p in problems]
    boundedness = None
    refuted: tuple[Violation, ...] = ()
    if definition is not None and not problems:
        found, boundedness = _analyse(definition, checking.catalog, checking.max_steps, checking.repeat_limit,
                                      checking.progress)
        findings.extend(found)
        refuted = violations(definition, (*definition.requires, *checking.require), checking.catalog,
                             checking.side_effects, checking.unguarded)
        findings.extend(Finding(Severity.ERROR, "property", resolved, v.entry, f"{v.property}: {v.message}")
                        for v in refuted)
    return CheckReport(resolved, tuple(findings), boundedness, refuted, definition)


def _analyse(definition: MachineDefinition, stages: StageCatalog, max_steps: int, repeat_limit: int,
             progress: Callable[[int], None] | None = None) -> tuple[list[Finding], Boundedness]:
    """Structural findings plus boundedness for these limits (an unbounded loop, or a stage
    reached without what it needs, is a finding)."""
    findings = list(structural_findings(definition, stages))
    boundedness = explore(definition, max_steps, repeat_limit, stages, progress)
    if boundedness.needs:
        last = boundedness.counterexample[-1] if boundedness.counterexample else None
        findings.append(Finding(
            Severity.ERROR, "stage-order", definition.path, f"states.{last.dest if last else definition.initial}",
            f"a run can reach a stage that cannot work there: {boundedness.needs}; route runs through the "
            "stages that come first (select → execute → observe → verify)",
        ))
    elif boundedness.bound is None:
        findings.append(unbounded_finding(definition.path, boundedness))
    return findings, boundedness


def unbounded_finding(path: str, boundedness: Boundedness) -> Finding:
    cycle = " → ".join(t.entry for t in boundedness.counterexample[-4:])
    return Finding(
        Severity.ERROR, "unbounded", path, f"states.{boundedness.counterexample[-1].dest}",
        f"a run can go on forever ({cycle}); every cycle must pass a state that records an "
        "observation (record_observation) and one that decides (verify_and_decide), so the "
        "step budget can end it",
    )


@lru_cache(maxsize=64)
def soundness_errors(definition: MachineDefinition, stages: StageCatalog = BUILTIN_STAGES) -> tuple[Finding, ...]:
    """The errors that make `definition` unsafe to run, cheap enough to check whenever a loop
    is built: structure, determinism, and boundedness explored at small limits (a cycle that
    escapes the step budget shows there already). `forge check` proves the bound for given
    limits."""
    findings, _ = _analyse(definition, stages, max_steps=3, repeat_limit=2)
    return tuple(f for f in findings if f.severity is Severity.ERROR)


def default_definitions(folder: str | Path = "machines") -> list[Path]:
    """Every `*.toml` in `folder`; the built-in definitions when the folder does not exist."""
    root = Path(folder)
    if root.is_dir():
        return sorted(root.glob("*.toml"))
    from forge.machine.loader import builtin_names

    return [resolve_definition(name) for name in builtin_names()]


def check_definitions(paths: Iterable[str | Path], max_steps: int = 8, repeat_limit: int = 3,
                      stages: StageCatalog | Mapping[str, Stage] | None = None,
                      progress: Callable[[str, int], None] | None = None, require: Iterable[str] = (),
                      side_effects: bool | None = None) -> list[CheckReport]:
    """`check_definition` for each path; `progress(path, explored)` as it goes on."""
    require = tuple(require)
    reports = []
    for path in paths:
        told: Callable[[int], None] | None = None
        if progress is not None:
            told = functools.partial(progress, str(path))
        reports.append(check_definition(path, max_steps, repeat_limit, stages, told, require, side_effects))
    return reports
