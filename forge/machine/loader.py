"""Reading loop definitions from TOML, validated when the file is loaded.

A definition names its stage actions and guards as strings (that is what makes it data), so
every name is resolved here, at load time, and a broken file fails with an error naming the
file and the entry, never later when a callback first fires. TOML was chosen because the
standard library reads it (`tomllib`): no parser to depend on. The format is described in
`forge.records.definition`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, cast

from forge.errors import MissingFile, UsageError
from forge.machine.catalog import Stage, StageCatalog
from forge.machine.stages import BUILTIN_STAGES
from forge.records.definition import (
    FAILURE_TRIGGER,
    OUTCOMES,
    PROPERTIES,
    TIMEOUT_TRIGGER,
    DefinitionError,
    MachineDefinition,
    Outcome,
    Problem,
    StateDef,
    TransitionDef,
)
from forge.records.trace import quoted

__all__ = ["builtin_names", "catalog_of", "load_definition", "parse_definition", "parse_duration", "resolve_definition"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # always fullmatch: `$` would let "observe\n" through
_MACHINE_KEYS = frozenset({"name", "title", "initial", "description"})
_STATE_KEYS = frozenset({"action", "terminal", "outcome", "doc", "timeout"})
_TRANSITION_KEYS = frozenset({"source", "trigger", "dest", "guard", "doc"})
_Report = Callable[..., None]  # (entry, message, code="schema")


def catalog_of(stages: StageCatalog | Mapping[str, Stage] | None) -> StageCatalog:
    """The built-in stages plus `stages` (a catalog is taken as it is).

    Raises:
        ValueError: a user stage is malformed or clashes with a built-in name.
    """
    if stages is None:
        return BUILTIN_STAGES
    if isinstance(stages, StageCatalog):
        return stages
    if not isinstance(stages, Mapping):
        raise UsageError(f"stages must map action names to forge Stage objects, got {type(stages).__name__}")
    return BUILTIN_STAGES.with_stages(stages)


def builtin_names() -> tuple[str, ...]:
    """Names of the definitions shipped in `forge.machines`, sorted."""
    from importlib import resources

    root = resources.files("forge.machines")
    return tuple(sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml")))


def resolve_definition(name_or_path: str | Path) -> Path:
    """Map a built-in name (`single_agent`) or a file path to the definition file.

    Raises:
        FileNotFoundError: neither a built-in name nor an existing file; lists the built-ins.
    """
    candidate = Path(name_or_path)
    if candidate.is_file():
        return candidate
    if isinstance(name_or_path, str) and _NAME.fullmatch(name_or_path):
        builtin = _builtin_path(name_or_path)
        if builtin is not None:
            return builtin
    raise MissingFile(
        f"no loop definition {str(name_or_path)!r}: not a file, and the built-in "
        f"definitions are {', '.join(builtin_names())}"
    )


@cache
def _builtin_path(name: str) -> Path | None:
    from importlib import resources

    builtin = resources.files("forge.machines") / f"{name}.toml"
    return Path(str(builtin)) if builtin.is_file() else None


def load_definition(name_or_path: str | Path = "single_agent",
                    stages: StageCatalog | Mapping[str, Stage] | None = None) -> MachineDefinition:
    """Read and validate a definition by built-in name or path, naming user `stages` too.

    Parsed definitions are cached by file content, so building many loops from one file
    reads it each time but parses and validates it once.

    Raises:
        FileNotFoundError: no such built-in or file.
        DefinitionError: the file is not valid TOML or breaks a rule; names every problem.
    """
    path = resolve_definition(name_or_path)
    definition, problems = _parsed(str(path), _content(path), catalog_of(stages))
    if problems or definition is None:
        raise DefinitionError(str(path), problems)
    return definition


_READ: dict[str, tuple[int, int, bytes]] = {}


def _content(path: Path) -> bytes:
    """The file's bytes, read again only when its size or modification time changed (a stat
    instead of a read and a hash, for every loop built from an unchanged file)."""
    key = str(path)
    status = path.stat()
    known = _READ.get(key)
    if known is not None and known[:2] == (status.st_mtime_ns, status.st_size):
        return known[2]
    content = path.read_bytes()
    _READ[key] = (status.st_mtime_ns, status.st_size, content)
    return content


def parse_definition(path: str | Path, stages: StageCatalog | Mapping[str, Stage] | None = None
                     ) -> tuple[MachineDefinition | None, tuple[Problem, ...]]:
    """Read `path` and collect every problem instead of stopping at the first.

    Returns the definition (None when the file is too broken to build one) and the problems;
    `forge check` reports them all, `load_definition` refuses any.

    Raises:
        OSError: the file cannot be read.
    """
    return _parsed(str(path), Path(path).read_bytes(), catalog_of(stages))


@lru_cache(maxsize=128)
def _parsed(path: str, content: bytes, stages: StageCatalog) -> tuple[MachineDefinition | None, tuple[Problem, ...]]:
    import tomllib  # here: importing forge reads no definition

    try:
        data = tomllib.loads(content.decode("utf-8"))
    except UnicodeDecodeError as error:
        return None, (Problem("file", f"not UTF-8 text: {error}", "toml"),)
    except tomllib.TOMLDecodeError as error:
        return None, (Problem("file", f"not valid TOML: {quoted(str(error))}", "toml"),)
    except RecursionError:
        return None, (Problem("file", "nested too deeply to read (tables or arrays inside each other "
                                      "thousands of levels deep)", "toml"),)
    return _build(path, data, stages)


def _build(path: str, data: Mapping[str, Any], stages: StageCatalog) -> tuple[MachineDefinition | None, tuple[Problem, ...]]:
    problems: list[Problem] = []

    def problem(entry: str, message: str, code: str = "schema") -> None:
        problems.append(Problem(entry, message, code))

    for key in sorted(set(data) - {"machine", "states", "transitions", "checks", "handoffs"}):
        problem(key, "unknown top-level table; expected [machine], [states.*], [[transitions]], [checks], [handoffs]")
    requires = _requires(problem, data.get("checks"))
    handoffs = _handoffs(problem, data.get("handoffs"))
    machine = data.get("machine")
    if not isinstance(machine, Mapping):
        problem("machine", "missing [machine] table with name and initial")
        machine = {}
    _unknown_keys(problem, "machine", machine, _MACHINE_KEYS)
    name = machine.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        problem("machine.name", "missing or not an identifier (letters, digits, _)")
        name = Path(path).stem

    states = _states(problem, data.get("states"), stages)
    known = {state.name for state in states}
    initial = machine.get("initial")
    if not isinstance(initial, str) or not initial:
        problem("machine.initial", "missing initial state; set initial = \"<state name>\"", "missing-initial")
        initial = ""
    elif initial not in known:
        problem("machine.initial", f"unknown state {initial!r}; states are {_listing(known)}", "unknown-state")

    transitions = _transitions(problem, data.get("transitions"), {s.name: s for s in states}, stages)
    for state in states:
        _state_edges(problem, state, [t for t in transitions if t.source == state.name])
    definition = MachineDefinition(
        name=name,
        initial=initial,
        states=tuple(states),
        transitions=tuple(transitions),
        title=str(machine.get("title", "")),
        description=str(machine.get("description", "")),
        path=path,
        requires=requires,
        handoffs=handoffs,
    )
    if handoffs and not any(state.action == "select_tool" for state in states):
        problem("handoffs", "a handoff is a policy's decision: the definition needs a state whose action is select_tool")
    return definition, tuple(problems)


def _handoffs(problem: _Report, raw: Any) -> tuple[str, ...]:
    """`[handoffs] to = [...]`: the names of the loops a policy may hand off to."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        problem("handoffs", "must be a table: [handoffs] to = [\"billing\", ...]")
        return ()
    _unknown_keys(problem, "handoffs", raw, frozenset({"to"}))
    names = raw.get("to", [])
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        problem("handoffs.to", "must be a list of names, the loops loop.with_handoffs(NAME=other_loop) gives")
        return ()
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        problem("handoffs.to", f"names {', '.join(map(repr, repeated))} more than once")
    return tuple(dict.fromkeys(names))


def _requires(problem: _Report, raw: Any) -> tuple[str, ...]:
    """`[checks] require = [...]`: property names, each one of `PROPERTIES`."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        problem("checks", "must be a table: [checks] require = [\"approval-before-side-effect\", ...]")
        return ()
    _unknown_keys(problem, "checks", raw, frozenset({"require"}))
    wanted = raw.get("require", [])
    if not isinstance(wanted, list) or not all(isinstance(w, str) for w in wanted):
        problem("checks.require", f"must be a list of property names: {_listing(PROPERTIES)}")
        return ()
    for name in wanted:
        if name not in PROPERTIES:
            problem("checks.require", f"unknown property {name!r}; properties are {_listing(PROPERTIES)}")
    return tuple(dict.fromkeys(w for w in wanted if w in PROPERTIES))


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*")


def parse_duration(value: Any) -> float:
    """Seconds, from a TOML duration: "15m", "3s", "1.5h", "2d", "500ms", or a number of
    seconds.

    Raises:
        ValueError: not a positive duration in one of those forms.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise UsageError(f"a timeout is a duration such as \"15m\", \"3s\", \"2h\" or \"1d\" (or seconds), "
                         f"got {value!r}")
    if not seconds > 0 or seconds == float("inf"):
        raise UsageError(f"a timeout must be positive and finite, got {value!r}")
    return seconds


def _state_edges(problem: _Report, state: StateDef, out: list[TransitionDef]) -> None:
    """Report what the transitions out of `state` lack or have too many of: its deadline's
    one timeout edge, an edge out of a terminal state, none out of another."""
    timeouts = [t for t in out if t.trigger == TIMEOUT_TRIGGER]
    if state.timeout is not None and len(timeouts) != 1:
        problem(f"states.{state.name}.timeout",
                f"a state with a timeout needs exactly one transition from it with trigger = {TIMEOUT_TRIGGER!r} "
                f"(to an escalation state, a rejection that replans, or a terminal state); it has {len(timeouts)}",
                "timeout-edge")
    for t in timeouts:
        if state.timeout is None:
            problem(t.entry, f"a {TIMEOUT_TRIGGER!r} transition leaves a state with a deadline; give "
                             f"[states.{state.name}] a timeout (timeout = \"15m\")", "timeout-edge")
        elif not state.terminal and t.guard != "approval_timed_out":
            problem(t.entry, "the timeout edge of an approval state is taken when the approver has not answered "
                             "in time: guard it with approval_timed_out", "timeout-edge")
        elif state.terminal and t.guard is not None:
            problem(t.entry, "the timeout edge of a waiting state is taken when its deadline passes: it has no "
                             "guard", "timeout-edge")
    out = [t for t in out if t.trigger != TIMEOUT_TRIGGER or state.timeout is None]
    if state.terminal and out:
        problem(f"states.{state.name}", f"terminal state has outgoing transitions ({', '.join(t.entry for t in out)}); "
                "remove them or make the state non-terminal", "terminal-outgoing")
    if not state.terminal and not out:
        problem(f"states.{state.name}", "non-terminal state has no outgoing transition; add one or set terminal = true",
                "dead-end")


def _states(problem: _Report, raw: Any, stages: StageCatalog) -> list[StateDef]:
    if not isinstance(raw, Mapping) or not raw:
        problem("states", "missing [states.<name>] tables")
        return []
    states = []
    for name, body in raw.items():
        entry = f"states.{name}"
        if not _NAME.fullmatch(name):
            problem(entry, "state name is not an identifier (letters, digits, _)")
        if not isinstance(body, Mapping):
            problem(entry, "must be a table")
            continue
        states.append(_state(problem, name, body, stages))
    return states


def _state(problem: _Report, name: str, body: Mapping[str, Any], stages: StageCatalog) -> StateDef:
    """The state `[states.NAME]` says, what is wrong with it reported."""
    entry = f"states.{name}"
    _unknown_keys(problem, entry, body, _STATE_KEYS)
    terminal = body.get("terminal", False)
    if not isinstance(terminal, bool):
        problem(f"{entry}.terminal", "must be true or false")
        terminal = False
    outcome, action = body.get("outcome"), body.get("action")
    for key, value in (("outcome", outcome), ("action", action)):
        if value is not None and not isinstance(value, str):
            problem(f"{entry}.{key}", f"must be a string, not {_kind(value)}")
    outcome = outcome if isinstance(outcome, str) else None
    action = action if isinstance(action, str) else None
    timeout = _deadline(problem, entry, body, waits=(terminal and outcome == "needs_input") or action == "request_approval")
    if terminal:
        if outcome not in OUTCOMES:
            problem(f"{entry}.outcome", f"terminal state needs outcome = one of {_listing(OUTCOMES)}")
        if action is not None:
            problem(f"{entry}.action", "terminal states run no action; remove it")
    else:
        if outcome is not None:
            problem(f"{entry}.outcome", "only terminal states have an outcome")
        if action is not None and action not in stages.actions:
            problem(f"{entry}.action", f"unknown action {action!r}; actions are {_listing(stages.actions)} "
                    "(a stage of your own? pass AgentLoop(..., stages=...), or forge check --stages MODULE:NAME)",
                    "unknown-callback")
    return StateDef(name=name, terminal=terminal, outcome=cast(Outcome, outcome) if outcome in OUTCOMES else None,
                    action=action, doc=str(body.get("doc", "")), timeout=timeout)


def _deadline(problem: _Report, entry: str, body: Mapping[str, Any], waits: bool) -> float | None:
    """A state's `timeout`, in seconds: only a waiting state (`waits`) has one."""
    if "timeout" not in body:
        return None
    timeout = None
    try:
        timeout = parse_duration(body["timeout"])
    except UsageError as error:
        problem(f"{entry}.timeout", str(error))
    if timeout is not None and not waits:
        problem(f"{entry}.timeout", "only a waiting state has a deadline: a terminal state with outcome = "
                                    "\"needs_input\", or a state running request_approval", "timeout-edge")
        return None
    return timeout


def _transitions(problem: _Report, raw: Any, states: Mapping[str, StateDef], stages: StageCatalog
                 ) -> list[TransitionDef]:
    guards = stages.guards
    if raw is None:
        return []
    if not isinstance(raw, list):
        problem("transitions", "must be an array of tables: [[transitions]]")
        return []
    transitions = []
    for index, body in enumerate(raw):
        if not isinstance(body, Mapping):
            problem(f"transitions[{index}]", "must be a table")
            continue
        transitions.append(_transition(problem, index, body, states, guards))
    return transitions


def _transition(problem: _Report, index: int, body: Mapping[str, Any], states: Mapping[str, StateDef],
                guards: Mapping[str, Any]) -> TransitionDef:
    """The transition `[[transitions]]` number `index` says, what is wrong with it reported."""
    _unknown_keys(problem, f"transitions[{index}]", body, _TRANSITION_KEYS)
    fields = {}
    for key in ("source", "trigger", "dest"):
        value = body.get(key)
        if not isinstance(value, str) or not value:
            problem(f"transitions[{index}].{key}", f"missing {key}")
            value = ""
        fields[key] = value
    transition = TransitionDef(index, guard=body.get("guard"), doc=str(body.get("doc", "")), **fields)
    entry = transition.entry
    if fields["trigger"] and not _NAME.fullmatch(fields["trigger"]):
        problem(entry, f"trigger {fields['trigger']!r} is not an identifier")
    elif fields["trigger"] == FAILURE_TRIGGER:
        problem(entry, f"trigger {FAILURE_TRIGGER!r} is reserved for the implicit edge to "
                       "fatal_error that a failing hook takes; name this trigger differently")
    for key in ("source", "dest"):
        if fields[key] and fields[key] not in states:
            problem(entry, f"unknown {key} state {fields[key]!r}; states are {_listing(states)}", "unknown-state")
    if transition.guard is not None:
        _check_guard(problem, transition, states.get(fields["source"]), guards)
    return transition


def _check_guard(problem: _Report, transition: TransitionDef, source: StateDef | None, guards: Mapping[str, Any]) -> None:
    """Report a guard that does not exist, or tests another action's verdict than its source state runs."""
    guard, entry = transition.guard, transition.entry
    if not isinstance(guard, str) or guard not in guards:
        problem(entry, f"unknown guard {guard!r}; guards are {_listing(guards)}", "unknown-callback")
    elif source is not None and not source.terminal and guards[guard].action != source.action:
        problem(entry, f"guard {guard!r} tests the verdict of action {guards[guard].action!r}, but state "
                       f"{source.name!r} runs {source.action!r}; use one of "
                       f"{_listing(g for g, spec in guards.items() if spec.action == source.action)}",
                "guard-action-mismatch")


def _unknown_keys(problem: _Report, entry: str, body: Mapping[str, Any], allowed: frozenset[str]) -> None:
    for key in sorted(set(body) - allowed):
        problem(f"{entry}.{key}", f"unknown key; allowed keys are {_listing(allowed)}")


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    return "a table" if isinstance(value, dict) else type(value).__name__


def _listing(names: Any) -> str:
    return ", ".join(sorted(names)) or "(none)"
