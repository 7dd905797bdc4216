"""How a long conversation's journal grows: a `ChatPolicy` run of `--exchanges` model calls
(200; `--quick`: 50), each asking for a tool whose result is a paragraph, against a local
chat server. Each request carries the whole conversation so far, so a journal that kept
every request whole would grow with the square of its length; forge keeps the messages a
request shares with the one before it once (`forge.records.journal.SharedRequests`).

    python benchmarks/journal_growth.py [--exchanges 200] [--quick]

Target (issue 50, item 2): the trace file's journal at most 3x the size of the
conversation's messages themselves (their JSON); its memory measured the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from chat_server import ChatServer, reply
from targets import against

from forge import AgentLoop, Limits, Tool
from forge.records.trace import write_trace

PARAGRAPH = "The ledger lists each entry with its date, its amount and who made it. " * 4


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="50 exchanges")
    args = parser.parse_args(argv)
    exchanges = 50 if args.quick else args.exchanges
    try:
        import openai

        from forge.models.chat import ChatPolicy
    except ImportError:
        print("journal growth benchmark skipped: the llm extra (openai) is not installed")
        return 0
    script = [reply(None, (f"c{n}", "read", {"page": n})) for n in range(exchanges - 1)] + [reply("Read them all.")]
    with ChatServer(script) as server, tempfile.TemporaryDirectory(prefix="journal-growth-") as folder:
        policy = ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0))
        loop = AgentLoop([Tool("read", {"read"}, lambda page: f"page {page}: {PARAGRAPH}", required={"page"})],
                         policy, lambda o: o.tool_name == "finish", max_steps=exchanges + 5,
                         limits=Limits(repeat_limit=exchanges + 5))
        tracemalloc.start()
        result = loop.run("read every page")
        kept = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*/forge/*")])
        tracemalloc.stop()
        journal_memory = sum(stat.size for stat in kept.statistics("filename"))
        path = write_trace(result.trace, Path(folder) / "run.jsonl", journal=result.journal)
        calls = sum(len(line) + 1 for line in path.read_bytes().splitlines() if b'"type":"call"' in line
                    or b'"type": "call"' in line)
        messages = len(json.dumps(result.state.messages, default=str))
    ratio = calls / messages
    print(f"a {exchanges}-exchange conversation: its messages {messages / 1024:,.0f} KiB, the journal's lines in its "
          f"trace file {calls / 1024:,.0f} KiB: {ratio:.2f}x {against(ratio, 3.0)}")
    print(f"  what forge holds of the run at its end (journal, trace, state; made in forge's code): "
          f"{journal_memory / 1024:,.0f} KiB, {journal_memory / messages:.1f}x the messages (not a target)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
