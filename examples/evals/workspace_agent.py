"""The demo's workspace agent, made for an eval: a fresh workspace and analysis service
for every case, the goal read for where the index goes, and every write approved.

`forge eval` takes `make_loop` (and `make_broken_loop`, the same agent with a bug: it
forgets the last note) as `--loop examples/evals/workspace_agent.py:make_loop`. Each is a
function of no arguments returning a context manager that yields the case's `AgentLoop` and
cleans up after it.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from forge import AgentLoop, Ask, Limits, LoopState, Observation, Retry
from forge.agent.retry import PermanentToolError
from forge.demo.planner import IndexPlanner, parse_index
from forge.demo.service import AnalysisService, analyse_text
from forge.demo.tools import analyse_tool, file_tools
from forge.demo.workspace import Workspace
from forge.policy import Decision

FOLDER = "notes"


@dataclass
class GoalPlanner:
    """The demo's planner, told where the index goes by the goal ("... into PATH"), or by
    the user when asked; `forgets_last` is the bug of the broken variant."""

    forgets_last: bool = False

    def __call__(self, goal: str, state: LoopState) -> Decision:
        named = re.search(r"\binto (\S+)", goal)
        asked = any(observation.tool_name == "ask_user" for observation in state.observations)
        if named is None and not asked:
            return Ask("Which file should the index go into?")
        target = named.group(1) if named is not None else goal.strip()
        observations = list(state.observations)
        if self.forgets_last:  # the bug: the last note listed is never read
            observations = [replace(o, payload=list(o.payload)[:-1]) if o.tool_name == "list_notes" and o.status == "ok"
                            else o for o in observations]
        return IndexPlanner(folder=FOLDER, index_path=target)(goal, LoopState(observations=observations))


def index_is_true(workspace: Workspace) -> Callable[[Observation], bool]:
    """Accept a write only when the index it wrote lists every note with its true title and
    word count, computed here from the notes themselves."""

    def verify(observation: Observation) -> bool:
        if observation.tool_name != "write_file" or observation.status != "ok":
            return False
        try:
            written = parse_index(workspace.read(observation.payload["path"]))
            notes = workspace.list_notes(FOLDER)
        except PermanentToolError:
            return False
        return written == {path: tuple(analyse_text(workspace.read(path)).values()) for path in notes}

    return verify


@contextmanager
def _agent(forgets_last: bool) -> Iterator[AgentLoop]:
    root = Path(tempfile.mkdtemp(prefix="forge-eval-"))
    workspace = Workspace(root)
    workspace.seed()
    try:
        with AnalysisService(failures=1) as service:
            yield AgentLoop(
                [*file_tools(workspace), analyse_tool(service.url)], GoalPlanner(forgets_last),
                index_is_true(workspace), definition="approval", approver=lambda request: True,
                max_steps=16, limits=Limits(repeat_limit=3),
                retry=Retry(max_attempts=3, base_delay=0.01, max_delay=0.05),
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def make_loop() -> Iterator[AgentLoop]:
    """The agent, as the dataset's cassettes recorded it."""
    return _agent(forgets_last=False)


def make_broken_loop() -> Iterator[AgentLoop]:
    """The agent with a bug (it forgets the last note): what `--no-regressions` catches."""
    return _agent(forgets_last=True)
