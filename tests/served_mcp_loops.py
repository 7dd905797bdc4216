"""A loop `tests/test_mcp_asking.py` serves with `forge serve` whose tool is an MCP server's
that asks its user in the middle of the call (tests/mcp_asking_server.py): the served run's
question goes on to the client of `forge serve`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from forge import AgentLoop, Finish, Intent
from forge.mcp import MCPServer
from forge.policy import FINISH

bank = MCPServer.stdio(sys.executable, str(Path(__file__).with_name("mcp_asking_server.py")), os.devnull,
                       name="bank", timeout=60, protocol="legacy").open()


def paying(goal, state):
    return Intent.call("transfer", to="bob", amount=20) if not state.observations else \
        Finish(str(state.observations[-1].payload))


banking = AgentLoop(bank.tools(include=["transfer"]), paying, lambda observation: observation.tool_name == FINISH)
