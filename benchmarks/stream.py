"""What streaming a run costs, side by side in this one run:

- a streamed 1,000-step run whose consumer does nothing, against the same run not streamed
  (not a target: the cost of two threads on two cores, the operating system moving them and
  each core's cache fetching what the other wrote, documented in docs/llm-agents.md); then
  the same with both threads held to one CPU, forge's own work (target <= 1.1x); then `astream`
  against `arun`, where the run is a task of the consumer's event loop and gives the loop a
  turn before each tool call (so that the consumer reads as the run goes);
- how long the first word of a streamed answer takes from the endpoint writing it to the
  consumer reading it as a `TextDelta` (a local chat server that streams, on 127.0.0.1;
  target <= 5 ms);
- a run whose model asks for four 200 ms lookups (read-only tools) in one reply, then
  answers: its wall time with the calls made together, against one at a time
  (`Limits(max_parallel=1)`), under `run` and `arun` (target <= 300 ms).

    python benchmarks/stream.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from loop_overhead import forge_loop, side_by_side
from targets import against

from forge import Finish


def per_step(steps: int, repeats: int) -> tuple[float, float]:
    loop = forge_loop(steps)

    def streamed() -> None:
        for _ in loop.stream("benchmark"):
            pass

    plain, flowing = side_by_side(repeats, lambda: loop.run("benchmark"), streamed)
    return plain / steps, flowing / steps


def per_step_async(steps: int, repeats: int) -> tuple[float, float]:
    """`per_step` for `astream` against `arun`: the run is a task of the consumer's event
    loop, no second thread."""
    import asyncio

    loop = forge_loop(steps)

    async def streamed() -> None:
        async for _ in loop.astream("benchmark"):
            pass

    plain, flowing = side_by_side(repeats, lambda: asyncio.run(loop.arun("benchmark")), lambda: asyncio.run(streamed()))
    return plain / steps, flowing / steps


def per_step_on_one_cpu(steps: int, repeats: int) -> tuple[float, float] | None:
    """`per_step`, with this thread (and so the run's thread, which inherits it) held to one
    CPU: what streaming costs without the operating system moving the two threads between
    cores. None where the system cannot pin threads."""
    import os

    if not hasattr(os, "sched_setaffinity"):
        return None
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        return per_step(steps, repeats)
    finally:
        os.sched_setaffinity(0, before)


def first_word(rounds: int) -> float:
    """Median seconds from the endpoint writing the first word to the consumer reading it."""
    import openai
    from chat_server import ChatServer, reply

    from forge import AgentLoop, tool
    from forge.events import TextDelta
    from forge.models.chat import ChatPolicy

    @tool
    def noop(text: str) -> str:
        """Do nothing."""
        return text

    delays = []
    for _ in range(rounds):
        with ChatServer([reply("the first word and then some more")], pause=0.02) as server:
            policy = ChatPolicy("bench", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0))
            loop = AgentLoop([noop], policy, lambda o: isinstance(o.payload, Finish))
            for event in loop.stream("say it"):
                if isinstance(event, TextDelta):
                    read = time.perf_counter()
                    delays.append(read - server.sent[1])  # chunk 0 is the role; chunk 1 the first word
                    break
    return statistics.median(delays)


def four_lookups(rounds: int) -> dict[str, float]:
    """Median wall seconds of a run whose model asks for four 200 ms lookups in one reply,
    then answers: made together and one at a time, under run and arun."""
    import asyncio

    import openai
    from chat_server import ChatServer, reply

    from forge import AgentLoop, Limits, tool
    from forge.models.chat import ChatPolicy

    @tool
    def lookup(n: int) -> str:
        """Look item n up (200 ms)."""
        time.sleep(0.2)
        return f"item {n}"

    script = [reply(None, *((f"call_{n}", "lookup", {"n": n}) for n in range(4))), reply("all four")]
    found: dict[str, list[float]] = {}
    for _ in range(rounds):
        for parallel in (4, 1):
            for mode in ("run", "arun"):
                with ChatServer(list(script)) as server:
                    client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
                    policy = ChatPolicy("bench", client=client, async_client=openai.AsyncOpenAI(
                        base_url=server.url, api_key="k", max_retries=0))
                    loop = AgentLoop([lookup], policy, lambda o: isinstance(o.payload, Finish),
                                     limits=Limits(max_parallel=parallel))
                    started = time.perf_counter()
                    result = loop.run("look") if mode == "run" else asyncio.run(loop.arun("look"))
                    took = time.perf_counter() - started
                    assert result.reason == "verified_success", result.reason
                    found.setdefault(f"{mode} {parallel}", []).append(took)
    return {key: statistics.median(values) for key, values in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    steps, repeats, rounds = (1000, 3, 5) if args.quick else (10_000, 7, 20)
    plain, flowing = per_step(steps, repeats)
    print(f"a streamed {steps:,}-step run {flowing * 1e6:6.2f} us/step against the run not streamed "
          f"{plain * 1e6:6.2f} us/step: ratio {flowing / plain:5.2f}x (two threads on two cores: not a target, "
          "the cost of the operating system placing them, docs/llm-agents.md)")
    pinned = per_step_on_one_cpu(steps, repeats)
    if pinned is not None:
        plain, flowing = pinned
        print(f"forge's own work per streamed step, both threads on one CPU: {flowing * 1e6:6.2f} us/step against "
              f"{plain * 1e6:6.2f} us/step: ratio {flowing / plain:5.2f}x {against(flowing / plain, 1.1)}")
    else:
        print("forge's own work per streamed step: not measured (this system cannot hold both threads to one CPU)")
    plain, flowing = per_step_async(steps, repeats)
    print(f"astream: {flowing * 1e6:6.2f} us/step against arun {plain * 1e6:6.2f} us/step: "
          f"ratio {flowing / plain:5.2f}x {against(flowing / plain, 1.1)}")
    delay = first_word(rounds)
    print(f"first word of a streamed answer, endpoint to consumer: {delay * 1e3:5.2f} ms "
          f"{against(delay * 1e3, 5, ' ms')}")
    lookups = four_lookups(rounds // 4 or 1)
    for mode in ("run", "arun"):
        together, alone = lookups[f"{mode} 4"], lookups[f"{mode} 1"]
        print(f"four 200 ms lookups asked in one reply, {mode}: {together * 1e3:5.0f} ms made together against "
              f"{alone * 1e3:5.0f} ms one at a time (the whole run, both model calls in) "
              f"{against(together * 1e3, 300, ' ms')}")


if __name__ == "__main__":
    main()
