"""The demo's scenarios: one real goal, five ways it can go, each ending in its own state.

| name | what happens | ends in |
|---|---|---|
| index | the service answers 503 twice, a hint argument is refused, the index is written once and verified | verified_success |
| ambiguous | a second writer tool has the same capabilities as write_file | clarification_required |
| forbidden | the index path points outside the workspace: permission denied | fatal_error |
| unreachable | the service never recovers: retries exhausted, the planner replans until repetition stops it | repeated_action |
| gap | no tool can analyse text | capability_gap |
| mcp | the notes are committed to a git repository through the reference git MCP server | verified_success |

A scenario is also what `forge debug` loads: it exposes `loop`, `goal` and `close()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from forge.agent.observations import Observation
from forge.agent.retry import PermanentToolError
from forge.demo.planner import IndexPlanner, parse_index
from forge.demo.service import AnalysisService, analyse_text
from forge.demo.tools import analyse_tool, file_tools
from forge.demo.workspace import Workspace
from forge.errors import UsageError
from forge.loop import AgentLoop
from forge.options import Limits, Retry
from forge.policy import Policy
from forge.tools import Tool

if TYPE_CHECKING:
    from forge.mcp import MCPServer

__all__ = ["SCENARIOS", "Scenario", "build_scenario", "index_verifier"]


@dataclass(frozen=True, slots=True)
class _Spec:
    description: str
    expected: str
    failures: int | None = 2
    index_path: str = "INDEX.md"
    extra_writer: bool = False
    analyser: bool = True


SCENARIOS: dict[str, _Spec] = {
    "index": _Spec("index every note, surviving a flaky service and a refused argument", "verified_success"),
    "ambiguous": _Spec("two writer tools tie for the write", "clarification_required", extra_writer=True),
    "forbidden": _Spec("the index path escapes the workspace", "fatal_error", index_path="../INDEX.md"),
    "unreachable": _Spec("the analysis service stays down", "repeated_action", failures=None),
    "gap": _Spec("no tool can analyse text", "capability_gap", analyser=False),
    "mcp": _Spec("commit the notes to a git repository through a real MCP server (mcp-server-git)",
                 "verified_success"),
}


@dataclass
class Scenario:
    """A ready loop and goal; `close()` stops the service or MCP server it started."""

    name: str
    description: str
    expected: str
    loop: AgentLoop
    goal: str
    workspace: Workspace
    service: AnalysisService | None = None
    server: MCPServer | None = None
    _closed: bool = field(default=False, repr=False)

    @property
    def where(self) -> str:
        """What the scenario talks to, for the demo's header."""
        if self.server is not None:
            return f"MCP server {self.server.name}"
        return f"analysis service {self.service.url}" if self.service is not None else "no service"

    def close(self) -> None:
        if not self._closed:
            if self.service is not None:
                self.service.stop()
            if self.server is not None:
                self.server.close()
            self._closed = True


def index_verifier(workspace: Workspace, folder: str, index_path: str) -> Callable[[Observation], bool]:
    """Accept a write only when the index on disk lists every note with its true title and
    word count, computed here from the notes themselves."""

    def verify(observation: Observation) -> bool:
        if observation.tool_name != "write_file":
            return False
        try:
            written = parse_index(workspace.read(index_path))
            notes = workspace.list_notes(folder)
        except PermanentToolError:
            return False
        expected = {}
        for path in notes:
            facts = analyse_text(workspace.read(path))
            expected[path] = (facts["title"], facts["words"])
        return written == expected

    return verify


LLM_SYSTEM = (
    "You are an indexing agent working in a folder of notes through the tools you are given. "
    "Index every note: list the notes in the folder, read each one, analyse each note's text with the "
    "analysis tool, then write the index file with write_file: a Markdown table with the header "
    "'| note | title | words |', a '|---|---|---|' line and one row per note, sorted by path, using the "
    "titles and word counts the analysis returned. When the index is written, say so in one sentence."
)


def build_scenario(name: str, root: str | Path, policy: Policy | None = None) -> Scenario:
    """Seed `root` with the notes, start the service, and build the loop for `name`.
    `policy` replaces the rule-based planner (`forge demo --llm` passes a ChatPolicy).

    Raises:
        ValueError: unknown scenario name (the message lists them).
    """
    if name not in SCENARIOS:
        raise UsageError(f"unknown scenario {name!r}; scenarios are {', '.join(SCENARIOS)}")
    spec = SCENARIOS[name]
    if name == "mcp":
        return _git_scenario(spec, Path(root))
    workspace = Workspace(root)
    workspace.seed()
    service = AnalysisService(failures=spec.failures).start()
    tools: list[Tool] = file_tools(workspace)
    if spec.analyser:
        tools.append(analyse_tool(service.url))
    if spec.extra_writer:
        tools.append(Tool("write_backup", {"fs", "write"}, lambda path, text: workspace.write(f"backup/{path}", text),
                          required={"path", "text"}, side_effect=True))
    planner = policy if policy is not None else IndexPlanner(folder="notes", index_path=spec.index_path)
    loop = AgentLoop(
        tools, planner, index_verifier(workspace, "notes", spec.index_path),
        max_steps=12, limits=Limits(repeat_limit=5),
        retry=Retry(max_attempts=3, base_delay=0.05, max_delay=0.2),  # caps the service's Retry-After: 1 so the demo stays quick
    )
    goal = f"index every note in notes/ into {spec.index_path} with its title and word count"
    return Scenario(name, spec.description, spec.expected, loop, goal, workspace, service)


def _git_scenario(spec: _Spec, root: Path) -> Scenario:
    from forge.demo.git import build_git_loop, git_server_command, prepare_repository
    from forge.mcp import MCPServer

    command = git_server_command()
    repo = prepare_repository(root)
    server = MCPServer.stdio(*command).open()
    try:
        loop = build_git_loop(repo, server.tools(include=("git_status", "git_log", "git_add", "git_commit")))
    except BaseException:
        server.close()
        raise
    goal = f"commit every note in {repo / 'notes'} to the repository at {repo}"
    return Scenario("mcp", spec.description, spec.expected, loop, goal, Workspace(repo), server=server)
