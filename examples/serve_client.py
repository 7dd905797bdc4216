"""A forge loop that calls a served forge loop over MCP: `forge serve examples/writer.py:writer`
runs in a subprocess (stdio), and an editor loop uses its `writer` tool like any MCP tool.

Run it: `python examples/serve_client.py` prints the edited article.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from forge import AgentLoop, Finish, Intent
from forge.mcp import MCPServer
from forge.policy import FINISH

WRITER = f"{Path(__file__).with_name('writer.py')}:writer"


def editing(goal: str, state: Any) -> Intent | Finish:
    """Ask the served writer for the article, then answer with it, edited."""
    if not state.observations:
        return Intent.call("writer", goal=goal)
    return Finish(f"EDITED: {state.observations[-1].payload}")


if __name__ == "__main__":
    with MCPServer.stdio(sys.executable, "-m", "forge", "serve", WRITER) as writer:
        editor = AgentLoop(writer.tools(), editing, lambda observation: observation.tool_name == FINISH)
        result = editor.run("a short article on how marine mammals sleep")
    print(result.summary)
    print(result.answer)
