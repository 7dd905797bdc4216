"""The durable loops `forge worker --loops tests/mcp_worker_loops.py` runs for the MCP worker
tests, through the MCP server tests/mcp_asking_server.py (one per worker process, logging
each call, answer, sample and payment to FORGE_TEST_LEDGER; FORGE_TEST_MCP_PROTOCOL is how
the worker agrees the protocol with it, `MCPServer(protocol=...)`, default "auto"):

- "banker" pays bob, which the server asks the user to confirm in the middle of the call;
- "summarizer" (with FORGE_TEST_MODEL_URL, a chat endpoint) has its model summarize a text
  through the server, which asks the run's model for the summary (sampling)."""

import os
import sys
from pathlib import Path

import openai

from forge import AgentLoop, Finish, Intent
from forge.mcp import MCPServer
from forge.models.chat import ChatPolicy

bank = MCPServer.stdio(sys.executable, str(Path(__file__).with_name("mcp_asking_server.py")),
                       os.environ["FORGE_TEST_LEDGER"], name="bank", timeout=60,
                       protocol=os.environ.get("FORGE_TEST_MCP_PROTOCOL", "auto")).open()


def paying(goal, state):
    return Intent.call("transfer", to="bob", amount=20) if not state.observations else \
        Finish(state.observations[-1].payload)


banker = AgentLoop(bank.tools(include=["transfer"]), paying, lambda observation: observation.tool_name == "finish"
                   ).durable(name="banker", db=os.environ["FORGE_TEST_DB"])

if os.environ.get("FORGE_TEST_MODEL_URL"):
    model = ChatPolicy("test-model", client=openai.OpenAI(base_url=os.environ["FORGE_TEST_MODEL_URL"], api_key="k",
                                                          max_retries=0))
    summarizer = AgentLoop(bank.tools(include=["summarize"]), model,
                           lambda observation: isinstance(observation.payload, Finish)
                           ).durable(name="summarizer", db=os.environ["FORGE_TEST_DB"])
