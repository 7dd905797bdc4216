"""AgentLoop against the same work done by hand, side by side in one run.

Workload per step, for every side: 8 tools; select_action, then execute_tool inside
run_with_retry, LoopState.record, verify, StopController.decide. The sides:

- plain: a Python loop calling the stage functions;
- raw transitions: a `transitions.Machine` firing the same four triggers per step, the
  stage work in `prepare` callbacks and the routes chosen by conditions;
- AgentLoop: forge, where transitions decides too.

Also: the same run with tools that return a 20-key record (which the run copies as each call
returns, so it keeps the value as observed) against tools that return an int, a new
AgentLoop per run against `loop.run` on an existing one, run start with 1 and
10,000 runs alive, and 1,000 concurrent `arun`s whose tool awaits asyncio.sleep(0.05)
against one. Printed as ratios, since absolute times on shared machines are noise.

    python benchmarks/loop_overhead.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from targets import against, at_least
from transitions import Machine

from forge import AgentLoop, Finish, Intent, Limits, LoopState, Tool, load_definition
from forge.agent.actions import ToolSpec, select_action
from forge.agent.execution import ToolContract, execute_tool
from forge.agent.retry import run_with_retry
from forge.agent.stopping import StopController
from forge.machine.stages import GUARDS

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


class RawRun:
    """The model raw transitions moves: what the stage callbacks share."""

    def __init__(self, controller: StopController, verify_at: int | None) -> None:
        self.state = "select"
        self.loop_state = LoopState()
        self.controller, self.verify_at = controller, verify_at
        self.intent: Intent | None = None
        self.tool = ""
        self.value: Any = None
        self.verdict = ""


def raw_machine(policy: Callable[[str, LoopState], Intent]) -> Machine:
    """The shipped loop written directly on transitions: the definition's states and its
    twelve transitions, each guard a condition on the stage's verdict, the stage work in a
    `prepare_event` callback; four triggers per step."""
    definition = load_definition("single_agent")
    specs = [ToolSpec(f"tool{i}", frozenset({f"cap{i}", "common"})) for i in range(TOOLS)]
    contracts = {s.name: ToolContract(s.name, frozenset({"path"}), _handler) for s in specs}

    def select(run: RawRun) -> str:
        run.intent = policy("benchmark", run.loop_state)
        run.tool = select_action("benchmark", run.intent.capabilities, specs).tool_name
        return "selected"

    def call(run: RawRun) -> str:
        contract, arguments = contracts[run.tool], run.intent.arguments  # type: ignore[union-attr]
        run.value = run_with_retry(lambda: execute_tool(contract, arguments).value, 3).value
        return "ok"

    def record(run: RawRun) -> str:
        run.loop_state.record(run.tool, "ok", run.value)
        return "recorded"

    def decide(run: RawRun) -> str:
        state = run.loop_state
        verified = state.observations[-1].sequence == run.verify_at
        return str(run.controller.decide(state.step_count, verified, state.terminal, state.action_history).reason)

    work = {"select": select, "execute": call, "observe": record, "verify": decide}

    def prepare(event: Any) -> None:
        event.model.verdict = work[event.model.state](event.model)

    def verdict_is(verdict: str) -> Callable[[Any], bool]:
        return lambda event: bool(event.model.verdict == verdict)

    machine = Machine(model=None, states=[s.name for s in definition.states], initial=definition.initial,
                      auto_transitions=False, send_event=True, prepare_event=[prepare])
    for t in definition.transitions:
        trigger = "decide" if t.source == "verify" else t.trigger
        conditions = [verdict_is(GUARDS[t.guard].verdict)] if t.guard else []
        machine.add_transition(trigger, t.source, t.dest, conditions=conditions)
    return machine


def raw_run(machine: Machine, steps: int, verify_at: int | None = None) -> str:
    run = RawRun(StopController(max_steps=steps, repeat_limit=NEVER_REPEAT), verify_at)
    events = [machine.events[name] for name in ("choose", "call", "record", "decide")]
    while run.state == "select":
        for event in events:
            event.trigger(run)
    return run.state


RECORD = {"id": 4711, "title": "quarterly notes", "tags": ["a", "b", "c"], "owner": {"name": "ann", "team": "ops"},
          **{f"field{n}": n * 1.5 for n in range(16)}}
"""A typical JSON record a tool returns: 20 keys, a list and a nested object."""


def _record_handler(path: str) -> dict[str, Any]:
    return RECORD  # the same live object each call: the run keeps a copy made as the call returns


def forge_loop(steps: int, verify_at: int | None = None, handler: Callable[..., Any] = _handler) -> AgentLoop:
    tools = [Tool(f"tool{i}", {f"cap{i}", "common"}, handler, required={"path"}) for i in range(TOOLS)]
    return AgentLoop(
        tools, make_policy(), verify=lambda obs: obs.sequence == verify_at,
        max_steps=steps, limits=Limits(repeat_limit=NEVER_REPEAT),
    )


def _timed(fn: Callable[[], object]) -> float:
    gc.collect()
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def side_by_side(repeats: int, *sides: Callable[[], object]) -> tuple[float, ...]:
    """Best time of each side, the sides alternating so that machine noise hits all alike."""
    best = [float("inf")] * len(sides)
    for _ in range(repeats):
        for index, side in enumerate(sides):
            best[index] = min(best[index], _timed(side))
    return tuple(best)


async def _sleepy_read(path: str) -> int:
    await asyncio.sleep(0.05)
    return len(path)


def _blocking_read(path: str) -> int:
    time.sleep(0.05)  # a plain tool that blocks: a synchronous HTTP call, a database driver
    return len(path)


def arun_per_step(steps: int, inline: bool) -> float:
    """Seconds per step of an arun of `steps` steps whose plain tool does nothing, run in a
    worker thread, or (`inline`) on the event loop."""
    loop = AgentLoop([Tool("read", {"read"}, _handler, required={"path"}, inline=inline)],
                     lambda goal, state: Intent.call("read", path=f"p{len(state.observations)}")
                     if len(state.observations) < steps else Finish("ok"),
                     verify=lambda obs: obs.tool_name == "finish", max_steps=steps + 5,
                     limits=Limits(repeat_limit=steps + 5))
    started = time.perf_counter()
    asyncio.run(loop.arun("benchmark"))
    return (time.perf_counter() - started) / (steps + 1)


def concurrent_aruns(count: int, handler: Callable[..., Any] | None = None) -> float:
    """Wall seconds for `count` concurrent arun()s of a one-step loop whose tool sleeps 50 ms
    (awaiting asyncio.sleep; with `handler`, that plain function instead)."""
    loop = AgentLoop([Tool("read", {"read"}, handler or _sleepy_read, required={"path"})],
                     lambda goal, state: Intent({"read"}, {"path": "notes.md"}), verify=lambda obs: True)

    async def together() -> float:
        started = time.perf_counter()
        results = await asyncio.gather(*(loop.arun("benchmark") for _ in range(count)))
        assert all(r.reason == "verified_success" for r in results)
        return time.perf_counter() - started

    return asyncio.run(together())


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
    machine = raw_machine(make_policy())
    plain_long, raw_long, forge_long = (
        seconds / long_steps
        for seconds in side_by_side(repeats, lambda: plain_run(long_steps), lambda: raw_run(machine, long_steps),
                                    lambda: long_loop.run("benchmark"))
    )

    recorded = long_loop.run("benchmark").journal
    live_long, replay_long = (seconds / long_steps for seconds in side_by_side(
        repeats, lambda: long_loop.run("benchmark"), lambda: long_loop.replay(recorded)))

    record_loop = forge_loop(long_steps, handler=_record_handler)
    int_steps, record_steps = (seconds / long_steps for seconds in side_by_side(
        repeats, lambda: long_loop.run("benchmark"), lambda: record_loop.run("benchmark")))

    short_loop = forge_loop(5, verify_at=5)
    plain_short, forge_short, fresh_short = (
        seconds / short_runs
        for seconds in side_by_side(repeats, lambda: [plain_run(5, 5) for _ in range(short_runs)],
                                    lambda: [short_loop.run("benchmark") for _ in range(short_runs)],
                                    lambda: [forge_loop(5, verify_at=5).run("benchmark") for _ in range(short_runs)])
    )

    start_one = statistics.median(start_cost(short_loop, 1) for _ in range(repeats))
    start_many = statistics.median(start_cost(short_loop, 10_000) for _ in range(repeats))

    concurrent = 1000
    one = min(concurrent_aruns(1) for _ in range(3))
    many = min(concurrent_aruns(concurrent) for _ in range(2 if args.quick else 3))
    plain_one = min(concurrent_aruns(1, _blocking_read) for _ in range(3))
    plain_many = min(concurrent_aruns(100, _blocking_read) for _ in range(3))
    threaded, inline = (min(arun_per_step(long_steps, flag) for _ in range(3)) for flag in (False, True))

    us = 1e6
    print(f"per step ({long_steps:,}-step run): plain {plain_long * us:6.2f} us  raw transitions "
          f"{raw_long * us:6.2f} us  AgentLoop {forge_long * us:6.2f} us")
    print(f"  AgentLoop / raw transitions {forge_long / raw_long:5.2f}x {against(forge_long / raw_long, 1.25)}   "
          f"AgentLoop / plain {forge_long / plain_long:5.2f}x {against(forge_long / plain_long, 10)}")
    print(f"replay of the {long_steps:,}-step run (no-op tools) {replay_long * us:6.2f} us/step against the live run "
          f"{live_long * us:6.2f} us/step: {live_long / replay_long:5.2f}x as fast "
          f"{at_least(live_long / replay_long, 5)}")
    print(f"values as observed: a step whose tool returns a 20-key record {record_steps * us:6.2f} us against an int "
          f"{int_steps * us:6.2f} us: ratio {record_steps / int_steps:5.2f}x {against(record_steps / int_steps, 1.15)}")
    print(f"per run ({short_runs:,} runs of 5 steps): plain {plain_short * us:7.2f} us  "
          f"AgentLoop {forge_short * us:7.2f} us  ratio {forge_short / plain_short:5.2f}x "
          f"{against(forge_short / plain_short, 10)}")
    print(f"new AgentLoop per run {fresh_short * us:7.2f} us against loop.run {forge_short * us:7.2f} us: "
          f"ratio {fresh_short / forge_short:5.2f}x {against(fresh_short / forge_short, 1.5)}")
    print(f"run start: 1 live {start_one * us:6.2f} us  10,000 live {start_many * us:6.2f} us  "
          f"ratio {start_many / start_one:5.2f}x {against(start_many / start_one, 1.5)}")
    print(f"{concurrent:,} concurrent arun (tool sleeps 50 ms): {many * 1e3:7.1f} ms against one run "
          f"{one * 1e3:6.1f} ms: ratio {many / one:5.2f}x {against(many / one, 3)}")
    print(f"100 concurrent arun (a plain tool blocks 50 ms, run in a worker thread): {plain_many * 1e3:7.1f} ms against "
          f"one run {plain_one * 1e3:6.1f} ms: ratio {plain_many / plain_one:5.2f}x {against(plain_many / plain_one, 1.5)}")
    print(f"arun per step, a no-op plain tool in a worker thread {threaded * us:6.1f} us against inline=True "
          f"{inline * us:6.1f} us: the thread hop {(threaded - inline) * us:5.1f} us per call (not a target: what "
          "keeps the event loop free; a CPU-trivial tool says inline=True)")


if __name__ == "__main__":
    main()
