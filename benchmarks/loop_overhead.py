"""AgentLoop against a plain loop over the same stage functions, side by side in one run.

Workload per step, for both: 8 tools; select_action, then execute_tool inside
run_with_retry, LoopState.record, verify, StopController.decide. Printed as ratios
(AgentLoop / plain), since absolute times on shared machines are noise.

    python benchmarks/loop_overhead.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

from forge import AgentLoop, Intent, LoopState, Tool
from forge.agent.actions import ToolSpec, select_action
from forge.agent.execution import ToolContract, execute_tool
from forge.agent.retry import run_with_retry
from forge.agent.stopping import StopController

TOOLS = 8
NEVER_REPEAT = 10**9


def _handler(path: str) -> int:
    return len(path)


def _intents() -> list[Intent]:
    return [Intent({f"cap{i}", "common"}, {"path": f"file{i}"}) for i in range(TOOLS)]


INTENTS = _intents()


def make_policy() -> Callable[[str, LoopState], Intent]:
    def policy(goal: str, state: LoopState) -> Intent:
        return INTENTS[state.step_count % TOOLS]

    return policy


def plain_run(steps: int, verify_at: int | None = None) -> str:
    specs = [ToolSpec(f"tool{i}", frozenset({f"cap{i}", "common"})) for i in range(TOOLS)]
    contracts = {s.name: ToolContract(s.name, frozenset({"path"}), _handler) for s in specs}
    controller = StopController(max_steps=steps, repeat_limit=NEVER_REPEAT)
    policy = make_policy()
    state = LoopState()
    while True:
        intent = policy("benchmark", state)
        action = select_action("benchmark", intent.capabilities, specs)
        contract = contracts[action.tool_name]
        result = run_with_retry(lambda c=contract, a=intent.arguments: execute_tool(c, a).value, 3)
        observation = state.record(action.tool_name, "ok", result.value)
        verified = observation.sequence == verify_at
        decision = controller.decide(state.step_count, verified, state.terminal, state.action_history)
        if decision.stop:
            return decision.reason


def forge_loop(steps: int, verify_at: int | None = None) -> AgentLoop:
    tools = [Tool(f"tool{i}", {f"cap{i}", "common"}, _handler, required={"path"}) for i in range(TOOLS)]
    return AgentLoop(
        tools, make_policy(), verify=lambda obs: obs.sequence == verify_at,
        max_steps=steps, repeat_limit=NEVER_REPEAT,
    )


def _timed(fn: Callable[[], object]) -> float:
    gc.collect()
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def side_by_side(repeats: int, plain: Callable[[], object], machine: Callable[[], object]) -> tuple[float, float]:
    """Best time of each, the two alternating so that machine noise hits both alike."""
    plain_best = machine_best = float("inf")
    for _ in range(repeats):
        plain_best = min(plain_best, _timed(plain))
        machine_best = min(machine_best, _timed(machine))
    return plain_best, machine_best


def start_cost(loop: AgentLoop, live: int, starts: int = 2000) -> float:
    """Seconds per `loop.start` with `live` runs already started and still referenced."""
    alive = [loop.start("benchmark") for _ in range(live)]
    started = time.perf_counter()
    for _ in range(starts):
        loop.start("benchmark")
    elapsed = (time.perf_counter() - started) / starts
    del alive
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    long_steps, short_runs, repeats = (1000, 200, 2) if args.quick else (10_000, 2_000, 7)

    long_loop = forge_loop(long_steps)
    plain_long, forge_long = (
        seconds / long_steps
        for seconds in side_by_side(repeats, lambda: plain_run(long_steps), lambda: long_loop.run("benchmark"))
    )

    short_loop = forge_loop(5, verify_at=5)
    plain_short, forge_short = (
        seconds / short_runs
        for seconds in side_by_side(repeats, lambda: [plain_run(5, 5) for _ in range(short_runs)],
                                    lambda: [short_loop.run("benchmark") for _ in range(short_runs)])
    )

    start_one = statistics.median(start_cost(short_loop, 1) for _ in range(repeats))
    start_many = statistics.median(start_cost(short_loop, 10_000) for _ in range(repeats))

    us = 1e6
    print(f"per step ({long_steps:,}-step run): plain {plain_long * us:7.2f} us  "
          f"AgentLoop {forge_long * us:7.2f} us  ratio {forge_long / plain_long:5.2f}x (target <= 8x)")
    print(f"per run ({short_runs:,} runs of 5 steps): plain {plain_short * us:7.2f} us  "
          f"AgentLoop {forge_short * us:7.2f} us  ratio {forge_short / plain_short:5.2f}x (target <= 10x)")
    print(f"run start: 1 live {start_one * us:6.2f} us  10,000 live {start_many * us:6.2f} us  "
          f"ratio {start_many / start_one:5.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
