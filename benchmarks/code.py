"""What a tool call made by a program costs, against the same call made by the model
directly, side by side in one run (issue 53: at most 1.5x).

Both make N calls of one tool (`_handler`): the direct loop's policy asks for them one per
step; the code loop's policy submits one program (`for i in range(N): t(path=...)`) to a
`CodeTool`, whose child run makes the same N calls, each an ordinary forge tool call, the
program paused in pydantic-monty's sandbox at each. The sandbox's pool is started before
timing (its cost is once per process, printed apart).

    python benchmarks/code.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from targets import against

from forge import AgentLoop, Finish, Intent, Limits, Tool
from forge.code_tool import CodeLimits, CodeTool


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
    program = f"total = 0\nfor i in range({calls}):\n    total = total + t(path='file' + str(i))\ntotal"

    def policy(goal, state):
        return Intent.call("run_code", code=program) if not state.observations else Finish(state.observations[-1].payload)

    return AgentLoop([code], policy, lambda observation: observation.tool_name == "finish", max_steps=calls + 2)


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
    best = {name: min(values) for name, values in times.items()}
    ratio = best["code"] / best["direct"]
    print(f"a tool call made by a program {best['code'] * 1e6:7.1f} us against the same call made by the policy "
          f"{best['direct'] * 1e6:7.1f} us ({calls} calls, best of {rounds}; medians "
          f"{statistics.median(times['code']) * 1e6:.1f} and {statistics.median(times['direct']) * 1e6:.1f}): "
          f"ratio {ratio:5.2f}x {against(ratio, 1.5)}")
    print(f"the sandbox's pool and first program, once per process: {pool * 1e3:6.1f} ms (for information)")


if __name__ == "__main__":
    main()
