"""Stage 1, choose an action: capability-ranked tool selection that refuses ties.

Sorting is not selection evidence. When the best capability score is shared, the list order
would decide silently, so the selector raises and lets the loop ask for clarification.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from forge.errors import ForgeError, UsageError

__all__ = [
    "Action",
    "AmbiguousToolChoice",
    "NoMatchingTool",
    "ToolSpec",
    "UnknownTool",
    "duplicate_names",
    "select_action",
    "select_named",
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool's static description: its unique name and the capabilities it offers."""

    name: str
    capabilities: frozenset[str]


@dataclass(frozen=True, slots=True)
class Action:
    """The selection result handed to execution: which tool, and why it won."""

    tool_name: str
    reason: str


class AmbiguousToolChoice(ForgeError, ValueError):
    """The top score is shared by two or more tools; the caller must clarify the goal.

    `tied` lists every tool at the best score, sorted by name; `score` is that score.
    """

    def __init__(self, tied: tuple[str, ...], score: int) -> None:
        super().__init__("ambiguous tool choice requires clarification")
        self.tied = tied
        self.score = score


class NoMatchingTool(ForgeError, ValueError):
    """No registered tool offers any required capability (a capability gap).

    `required` is the capability set that nothing matched.
    """

    def __init__(self, required: frozenset[str]) -> None:
        wanted = ", ".join(sorted(required)) or "(none)"
        super().__init__(f"no tool matches the required capabilities: {wanted}")
        self.required = required


class UnknownTool(NoMatchingTool):
    """The intent names a tool that does not exist (a capability gap by name).

    `name` is what was asked for; `suggestions` the known names close to it, best first
    (none when no name is close: then the message lists the tools there are).
    """

    def __init__(self, name: str, known: Iterable[str]) -> None:
        names = sorted(known)
        import difflib  # here: only an unknown name needs it

        suggestions = tuple(difflib.get_close_matches(name, names, n=3, cutoff=0.5))
        if suggestions:
            said = f"the closest known tools are: {', '.join(suggestions)}"
        else:
            listed = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
            said = f"no tool's name is close to it; the tools are: {listed or '(none)'}"
        ValueError.__init__(self, f"no tool named {name!r}; {said}")
        self.required = frozenset()
        self.name, self.suggestions = name, suggestions


def duplicate_names(names: Iterable[str]) -> tuple[str, ...]:
    """Every name that occurs more than once, sorted."""
    seen: set[str] = set()
    repeated: set[str] = set()
    for name in names:
        (repeated if name in seen else seen).add(name)
    return tuple(sorted(repeated))


def select_action(
    goal: str, required_capabilities: Iterable[str], tools: Sequence[ToolSpec]
) -> Action:
    """Pick the single tool whose capabilities best cover `required_capabilities`.

    Tools are ranked by `len(tool.capabilities & required_capabilities)`; the result never
    depends on the order of `tools`.

    Raises:
        ValueError: `goal` is blank, or two tools in `tools` share a name.
        NoMatchingTool: `tools` is empty or the best score is 0 (message contains "no tool").
        AmbiguousToolChoice: the two best tools share the best score (a tie further down
            does not matter).
    """
    if not goal.strip():
        raise UsageError("goal must not be blank")
    required = frozenset(required_capabilities)
    duplicated = duplicate_names(tool.name for tool in tools)
    if duplicated:
        raise UsageError(f"duplicate tool names: {', '.join(duplicated)}")

    scores = [(len(tool.capabilities & required), tool.name) for tool in tools]
    best = max((score for score, _ in scores), default=0)
    if best == 0:
        raise NoMatchingTool(required)
    winners = tuple(sorted(name for score, name in scores if score == best))
    if len(winners) > 1:
        raise AmbiguousToolChoice(winners, best)
    runner_up = max((score for score, name in scores if name != winners[0]), default=0)
    return Action(
        tool_name=winners[0],
        reason=(
            f"{winners[0]} covers {best} of {len(required)} required capabilities; "
            f"the next best covers {runner_up}"
        ),
    )


def select_named(name: str, tools: Sequence[ToolSpec]) -> Action:
    """The tool called `name`, chosen by name: capabilities play no part.

    Raises:
        UnknownTool: (a NoMatchingTool) no tool has that name; it names the closest ones.
    """
    for tool in tools:
        if tool.name == name:
            return Action(tool_name=name, reason=f"{name} was called by name")
    raise UnknownTool(name, (tool.name for tool in tools))
