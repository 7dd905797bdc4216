"""What a child run costs (`AgentLoop.as_tool`), side by side in this one run:

- a 1,000-step loop run as a child of a parent that calls it once, against the same loop run
  alone (target <= 1.2x);
- 500 runs of a 5-step child, each called by a parent, the parent's own cost taken out (the
  same parent calling a plain tool that answers at once), against 500 runs of the loop alone
  (target <= 1.2x).

    python benchmarks/children.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from loop_overhead import forge_loop, side_by_side
from targets import against

from forge import AgentLoop, Finish, Intent, Tool
from forge.policy import FINISH


def parent_of(tool: Tool, steps: int) -> AgentLoop:
    def policy(goal: str, state: object) -> Intent | Finish:
        return Finish("done") if getattr(state, "observations", None) else Intent.call(tool.name, goal="work")

    return AgentLoop([tool], policy, lambda observation: observation.tool_name == FINISH, max_steps=steps + 1)


def long_child(steps: int, repeats: int) -> tuple[float, float]:
    child = forge_loop(steps, verify_at=steps)
    parent = parent_of(child.as_tool("child"), steps)
    alone, nested = side_by_side(repeats, lambda: child.run("benchmark"), lambda: parent.run("benchmark"))
    return alone, nested


def many_short_children(runs: int, repeats: int) -> tuple[float, float]:
    child = forge_loop(5, verify_at=5)
    parent = parent_of(child.as_tool("child"), 5)
    plain = parent_of(Tool("child", {"child"}, lambda goal: None, required={"goal"}), 5)

    def each(loop: AgentLoop) -> None:
        for _ in range(runs):
            loop.run("benchmark")

    alone, nested, parent_only = side_by_side(repeats, lambda: each(child), lambda: each(parent), lambda: each(plain))
    return alone, nested - parent_only


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats, for a smoke run")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    alone, nested = long_child(1000, repeats)
    print(f"a 1,000-step loop as a child run {nested * 1e3:7.1f} ms against the loop alone {alone * 1e3:7.1f} ms: "
          f"ratio {nested / alone:5.2f}x {against(nested / alone, 1.2)}")
    alone, nested = many_short_children(500, repeats)
    print(f"500 runs of a 5-step child, the parent's own cost out, {nested * 1e3:7.1f} ms against the loop alone "
          f"{alone * 1e3:7.1f} ms: ratio {nested / alone:5.2f}x {against(nested / alone, 1.2)}")


if __name__ == "__main__":
    main()
