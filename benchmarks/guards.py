"""What a guardrail costs forge, side by side in one run: per step, a loop on the `guarded`
definition whose calls pass one guard of their arguments and one of their result (each
`lambda value: None`), against the same loop whose calls no guard covers (they pass the
guard states by their unguarded edges). The difference, less the cost of calling the two
guard functions themselves, is forge's cost per guarded edge (issue 53: at most 5 µs). Also
printed: the guarded definition with no guards against `single_agent` (the two states a
guarded step adds), for information.

    python benchmarks/guards.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from loop_overhead import NEVER_REPEAT, TOOLS, _handler, make_policy
from targets import against

from forge import AgentLoop, Guard, Hooks, Limits, Tool


def _tools() -> list[Tool]:
    return [Tool(f"t{i}", {f"cap{i}", "common"}, _handler, required={"path"}) for i in range(TOOLS)]


def _loop(steps: int, definition: str, guards: list[Guard]) -> AgentLoop:
    return AgentLoop(_tools(), make_policy(), lambda observation: False, max_steps=steps, definition=definition,
                     hooks=Hooks(guards=guards), limits=Limits(repeat_limit=NEVER_REPEAT))


def _per_step(loop: AgentLoop, steps: int) -> float:
    gc.collect()
    started = time.perf_counter()
    result = loop.run("work")
    elapsed = time.perf_counter() - started
    assert result.steps == steps, result
    return elapsed / steps


def _passing(value: Any) -> None:
    return None


def _call_cost(function: Callable[[Any], Any], repeats: int = 200_000) -> float:
    value = {"path": "file1"}
    started = time.perf_counter()
    for _ in range(repeats):
        function(value)
    return (time.perf_counter() - started) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    steps, rounds = (1_000, 5) if args.quick else (4_000, 9)
    guarded = [Guard("arguments", _passing), Guard("result", _passing, "result")]
    sides = {"single_agent": _loop(steps, "single_agent", []), "unguarded": _loop(steps, "guarded", []),
             "guarded": _loop(steps, "guarded", guarded)}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):  # alternated, so drift on a shared machine falls on every side alike
        for name, loop in sides.items():
            times[name].append(_per_step(loop, steps))
    best = {name: min(values) for name, values in times.items()}
    median = {name: statistics.median(values) for name, values in times.items()}
    functions = 2 * _call_cost(_passing)
    per_edge = (best["guarded"] - best["unguarded"] - functions) / 2
    print(f"a step with a passing guard of its arguments and of its result {best['guarded'] * 1e6:7.2f} us against "
          f"the same step unguarded {best['unguarded'] * 1e6:7.2f} us (best of {rounds}; medians "
          f"{median['guarded'] * 1e6:.2f} and {median['unguarded'] * 1e6:.2f}): forge's cost per guarded edge, "
          f"beyond the guard's own function, {per_edge * 1e6:5.2f} us {against(per_edge * 1e6, 5, ' us')}")
    print(f"the guarded definition, no guard, {best['unguarded'] * 1e6:7.2f} us per step against single_agent "
          f"{best['single_agent'] * 1e6:7.2f} us: ratio {best['unguarded'] / best['single_agent']:5.2f}x "
          "(two states more per step; for information)")


if __name__ == "__main__":
    main()
