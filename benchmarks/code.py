"""What a tool call made by a program costs, against the same call made directly, side by
side in one run (issue 53: at most 1.5x).

Both make N calls of one tool (`_handler`). The target line: a Python policy (no model at
all, so forge's own cost is all there is) asks for the N calls one step each, against one
program (`for i in range(N): t(path=...)`) that a `CodeTool` runs, whose child run makes the
same N calls, each an ordinary forge tool call, the program paused in pydantic-monty's
sandbox at each. For information, the same with a model: a `ChatPolicy` on a local
chat-completions server (`forge.chat_server`) asking for the N calls one reply each, against
one reply holding the program. The sandbox's pool is started before timing (once per
process, printed apart).

    python benchmarks/code.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from dataclasses import replace
from typing import Any

import openai
from targets import against

from forge import AgentLoop, Finish, Intent, Limits, Tool
from forge.chat_server import ChatServer, reply
from forge.code_tool import CodeLimits, CodeTool
from forge.models.chat import ChatPolicy


def _handler(path: str) -> int:
    return len(path)


TOOL = Tool("t", {"t"}, _handler, required={"path"})


def _direct(calls: int) -> AgentLoop:
    def policy(goal, state):
        done = len(state.observations)
        return Intent.call("t", path=f"file{done}") if done < calls else Finish(done)

    return AgentLoop([TOOL], policy, lambda observation: observation.tool_name == "finish", max_steps=calls + 1,
                     limits=Limits(repeat_limit=calls + 2))


def _coded(calls: int) -> AgentLoop:
    code = CodeTool([TOOL], limits=CodeLimits(seconds=10, calls=calls))
    program = _program(calls)

    def policy(goal, state):
        return Intent.call("run_code", code=program) if not state.observations else Finish(state.observations[-1].payload)

    return AgentLoop([code], policy, lambda observation: observation.tool_name == "finish", max_steps=calls + 2)


def _program(calls: int) -> str:
    return f"total = 0\nfor i in range({calls}):\n    total = total + t(path='file' + str(i))\ntotal"


def _modelled(calls: int, coded: bool) -> tuple[AgentLoop, Any]:
    """A loop whose ChatPolicy asks a local server for the N calls (one reply each), or for
    one program making them; the server, to start."""
    if coded:
        script = [reply(None, ("c0", "run_code", {"code": _program(calls)})), reply("done")]
        tools = [CodeTool([TOOL], limits=CodeLimits(seconds=10, calls=calls))]
    else:
        script = [*(reply(None, (f"c{i}", "t", {"path": f"file{i}"})) for i in range(calls)), reply("done")]
        tools = [TOOL]
    server = ChatServer(lambda body: script[len(server.requests) - 1])
    policy = ChatPolicy("any-model", client=openai.OpenAI(base_url="http://127.0.0.1:1/v1", api_key="unused"))
    loop = AgentLoop(tools, policy, lambda observation: observation.tool_name == "finish", max_steps=calls + 2,
                     limits=Limits(repeat_limit=calls + 2))
    return loop, server


def _per_call(loop: AgentLoop, calls: int) -> float:
    gc.collect()
    started = time.perf_counter()
    result = loop.run("work")
    elapsed = time.perf_counter() - started
    assert result.reason == "verified_success", result
    return elapsed / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    calls, rounds = (40, 5) if args.quick else (200, 9)
    started = time.perf_counter()
    _coded(1).run("start the sandbox's pool")
    pool = time.perf_counter() - started
    sides = {"direct": _direct(calls), "code": _coded(calls)}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):  # alternated, so drift on a shared machine falls on both alike
        for name, loop in sides.items():
            times[name].append(_per_call(loop, calls))
    modelled = {name: _modelled(calls, name == "code") for name in ("direct", "code")}
    for name, (loop, server) in modelled.items():
        server.__enter__()
        client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
        modelled[name] = (AgentLoop.of(loop.spec.replaced(policy=replace(loop.spec.given["policy"], client=client))),
                          server)
        times[f"model {name}"] = []
    try:
        for _ in range(rounds):
            for name, (loop, server) in modelled.items():
                server.requests.clear()
                times[f"model {name}"].append(_per_call(loop, calls))
    finally:
        for _, server in modelled.values():
            server.__exit__()
    best = {name: min(values) for name, values in times.items()}
    strict = best["code"] / best["direct"]
    print(f"a tool call made by a program {best['code'] * 1e6:7.1f} us against the same call asked by the policy "
          f"directly {best['direct'] * 1e6:7.1f} us, no model (best of {rounds}; medians "
          f"{statistics.median(times['code']) * 1e6:.1f} and {statistics.median(times['direct']) * 1e6:.1f}): ratio "
          f"{strict:5.2f}x {against(strict, 1.5)}")
    ratio = best["model code"] / best["model direct"]
    print(f"(for information) with a model: a call made by a program {best['model code'] * 1e6:7.1f} us against one "
          f"the model asks for in a reply of its own {best['model direct'] * 1e6:7.1f} us (over HTTP to a local chat "
          f"server): {ratio:5.2f}x")
    print(f"the sandbox's pool and first program, once per process: {pool * 1e3:6.1f} ms (for information)")

if __name__ == "__main__":
    main()
