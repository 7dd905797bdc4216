"""What `forge serve` costs a client, side by side in this one run: the round trip of a call to
a served 1-step loop over stdio against the round trip of the MCP SDK's own echo tool (its
`MCPServer` with one `@tool`) over stdio (target <= 3x). Each server runs in a process of its
own, one client session each, calls alternating; medians of the round trips.

    python benchmarks/serve.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import anyio
import mcp
from mcp.client.stdio import StdioServerParameters

sys.path.insert(0, str(Path(__file__).parent))

from targets import against

ECHO_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")

@server.tool()
def echo(text: str) -> str:
    return text

server.run()
"""

ONE_STEP_LOOP = """
import sys

from forge import AgentLoop, Finish, tool
from forge.cli import main

@tool
def unused(text: str) -> str:
    \"\"\"Never called.\"\"\"
    return text

answer = AgentLoop([unused], lambda goal, state: Finish(goal), lambda observation: True)
sys.argv = ["forge", "serve", "__main__:answer"]
sys.exit(main())
"""


def round_trips(calls: int) -> tuple[float, float]:
    echo = StdioServerParameters(command=sys.executable, args=["-c", ECHO_SERVER])
    forge = StdioServerParameters(command=sys.executable, args=["-c", ONE_STEP_LOOP])

    async def measure() -> tuple[float, float]:
        timings: dict[str, list[float]] = {"echo": [], "forge": []}
        async with mcp.Client(echo, read_timeout_seconds=60) as sdk, mcp.Client(forge, read_timeout_seconds=60) as ours:
            for number in range(calls + 5):
                for name, client, tool, arguments in (("echo", sdk, "echo", {"text": f"hello {number}"}),
                                                      ("forge", ours, "answer", {"goal": f"hello {number}"})):
                    started = time.perf_counter()
                    result = await client.call_tool(tool, arguments)
                    took = time.perf_counter() - started
                    assert not result.is_error and result.content[0].text == f"hello {number}", result
                    if number >= 5:  # the first calls warm both up
                        timings[name].append(took)
        return statistics.median(timings["forge"]), statistics.median(timings["echo"])

    return anyio.run(measure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke run")
    args = parser.parse_args()
    forge, echo = round_trips(30 if args.quick else 200)
    print(f"a served 1-step loop over stdio {forge * 1e3:6.2f} ms a call against the SDK's echo tool "
          f"{echo * 1e3:6.2f} ms: ratio {forge / echo:5.2f}x {against(forge / echo, 3)}")


if __name__ == "__main__":
    main()
