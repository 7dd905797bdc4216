"""The `mcp` scenario: an agent records the notes in a git repository through a real MCP
server, the reference `mcp-server-git`, started over stdio.

The planner mixes a local function tool (`list_notes`) with the server's tools, all called
by name. It first asks for the history with `max_count="5"`, a string where the server's
schema wants an integer, as a model might: forge refuses the call before the server sees it,
and the planner retries with the number. The new repository has no history, so the server
answers with an error (`isError`), which the planner is told and takes as "nothing yet".
Then it stages the notes and commits them.
`verify` reads the repository back with `git` itself: every note tracked, the tree clean,
the last commit's message the one asked for.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from forge.agent.execution import ArgumentContractError
from forge.agent.observations import LoopState, Observation
from forge.demo.workspace import Workspace
from forge.errors import MissingFile
from forge.loop import AgentLoop
from forge.options import Limits
from forge.policy import Intent
from forge.tools import Tool

__all__ = ["GitPlanner", "git_server_command", "prepare_repository", "repository_verifier"]

MESSAGE = "Record the notes"


def git_server_command() -> list[str]:
    """How to start the git MCP server: the `mcp-server-git` next to this Python, or on PATH.

    Raises:
        FileNotFoundError: it is not installed (the message says how to install it).
    """
    beside = Path(sys.executable).with_name("mcp-server-git")
    found = str(beside) if beside.exists() else shutil.which("mcp-server-git")
    if found is None:
        raise MissingFile("the mcp scenario needs the reference git MCP server: pip install mcp-server-git "
                                "(python3 tasks.py demo installs it)")
    return [found]


def prepare_repository(root: Path) -> Path:
    """A new git repository at `root/repo` with the demo's notes in it, nothing committed."""
    repo = root / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    Workspace(repo).seed()
    for command in (["init", "-q"], ["config", "user.name", "forge demo"], ["config", "user.email", "demo@forge.invalid"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True, capture_output=True)
    return repo


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def repository_verifier(repo: Path, notes: list[str]) -> Callable[[Observation], bool]:
    """Accept a commit only when git itself shows every note tracked, a clean tree and the
    last commit's message as asked."""

    def verify(observation: Observation) -> bool:
        if observation.tool_name != "git_commit" or observation.status != "ok":
            return False
        tracked = set(_git(repo, "ls-files").split())
        return (set(notes) <= tracked and _git(repo, "status", "--porcelain").strip() == ""
                and _git(repo, "log", "-1", "--format=%s").strip() == MESSAGE)

    return verify


@dataclass
class GitPlanner:
    """Plans "record the notes in the repository" from the observations so far."""

    repo: str
    folder: str = "notes"

    def __call__(self, goal: str, state: LoopState) -> Intent:
        done = {o.tool_name for o in state.observations if o.status == "ok"}
        refused = any(isinstance(o.payload, ArgumentContractError) for o in state.observations)
        answered = any(o.tool_name == "git_log" and not isinstance(o.payload, ArgumentContractError)
                       for o in state.observations)  # the server's "no commits yet" error is an answer too
        notes = next((o.payload for o in state.observations if o.tool_name == "list_notes" and o.status == "ok"), None)
        if notes is None:
            return Intent.call("list_notes", folder=self.folder)
        if not answered:  # a model's slip first: a string where the schema wants an integer
            return Intent.call("git_log", repo_path=self.repo, max_count=5 if refused else "5")
        if "git_add" not in done:
            return Intent.call("git_add", repo_path=self.repo, files=list(notes))
        return Intent.call("git_commit", repo_path=self.repo, message=MESSAGE)


def build_git_loop(repo: Path, git_tools: list[Tool]) -> AgentLoop:
    """The mcp scenario's loop: `list_notes` from the workspace and the git server's tools."""
    workspace = Workspace(repo)
    list_notes = Tool("list_notes", {"list_notes"}, lambda folder: workspace.list_notes(folder), required={"folder"})
    return AgentLoop([list_notes, *git_tools], GitPlanner(str(repo)),
                     repository_verifier(repo, workspace.list_notes("notes")), max_steps=8, limits=Limits(repeat_limit=3))
