"""A small rule-based planner for the indexing goal: the demo's policy.

It is a pure function of the observations so far, so it replans from what happened: it lists
the notes, reads and analyses each, drops an argument a tool's contract refused, retries an
analysis that failed transiently, and writes the index once everything is known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from forge.agent.execution import ArgumentContractError
from forge.agent.observations import LoopState
from forge.policy import Intent

__all__ = ["IndexPlanner", "parse_index", "render_index"]


def render_index(rows: Mapping[str, Mapping[str, Any]], folder: str) -> str:
    """INDEX.md: one table row per note, sorted by path."""
    lines = [f"# Index of {folder}/", "", "| note | title | words |", "|---|---|---|"]
    lines += [f"| {path} | {row['title']} | {row['words']} |" for path, row in sorted(rows.items())]
    return "\n".join(lines) + "\n"


def parse_index(text: str) -> dict[str, tuple[str, int]]:
    """The rows of an INDEX.md: path → (title, words). Lines that are not rows are ignored."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[2].isdigit():
            rows[cells[0]] = (cells[1], int(cells[2]))
    return rows


@dataclass
class IndexPlanner:
    """Plans "index every note in `folder` into `index_path`".

    `hints` are extra arguments it offers the analysis tool until a contract refuses them.
    """

    folder: str = "notes"
    index_path: str = "INDEX.md"
    hints: Mapping[str, Any] = field(default_factory=lambda: {"lang": "en"})

    def __call__(self, goal: str, state: LoopState) -> Intent:
        notes, texts, facts, refused = _known(state)
        if notes is None:
            return Intent({"fs", "list"}, {"folder": self.folder})
        for path in notes:
            if path not in texts:
                return Intent({"fs", "read"}, {"path": path})
        for path in notes:
            if path not in facts:
                hints = {k: v for k, v in self.hints.items() if k not in refused}
                return Intent({"http", "analyse"}, {"path": path, "text": texts[path], **hints})
        text = render_index({path: facts[path] for path in notes}, self.folder)
        return Intent({"fs", "write"}, {"path": self.index_path, "text": text},
                      idempotency_key=f"write:{self.index_path}")


def _known(state: LoopState) -> tuple[list[str] | None, dict[str, str], dict[str, dict[str, Any]], set[str]]:
    """What the run has found out so far: the notes listed, each note's text, each note's
    analysis, and the arguments a contract refused."""
    notes: list[str] | None = None
    texts: dict[str, str] = {}
    facts: dict[str, dict[str, Any]] = {}
    refused: set[str] = set()
    for observation in state.observations:
        payload = observation.payload
        if observation.status == "ok" and observation.tool_name == "list_notes":
            notes = list(payload)
        elif observation.status == "ok" and observation.tool_name == "read_note":
            texts[payload["path"]] = payload["text"]
        elif observation.status == "ok" and observation.tool_name == "analyse":
            facts[payload["path"]] = payload
        elif isinstance(payload, ArgumentContractError):
            refused |= set(payload.unexpected)
    return notes, texts, facts, refused
