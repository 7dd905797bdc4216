"""Per-step cost of a durable run on SQLite and on PostgreSQL against the same run in
memory, side by side in one invocation, and the database writes per step (DBOS steps and
events recorded; forge's own idempotency rows are counted too).

    python benchmarks/durable.py [--steps N]     (PostgreSQL: Debian's postgresql, else skipped)

Each durable backend runs in a process of its own (DBOS is one per process).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from forge import AgentLoop, Finish, Intent, Tool


def make_loop(steps: int) -> AgentLoop:
    def policy(goal: str, state: Any) -> Intent | Finish:
        n = state.step_count
        if n >= steps:
            return Finish("done")
        return Intent.call("write" if n % 2 else "read", n=n)

    tools = [Tool("read", {"read"}, lambda n: {"n": n, "text": "x" * 64}, required={"n"}),
             Tool("write", {"write"}, lambda n: f"wrote {n}", required={"n"}, side_effect=True)]
    return AgentLoop(tools, policy, lambda o: o.tool_name == "finish", max_steps=steps + 1, repeat_limit=steps + 1)


def in_memory(steps: int, repeats: int) -> float:
    loop = make_loop(steps)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        loop.run("benchmark")
        times.append(time.perf_counter() - started)
    return statistics.median(times) / (steps + 1)


def child(db: str, steps: int, repeats: int) -> None:
    """Run `repeats` durable runs on `db`; print seconds per step and writes per step."""
    import sqlalchemy as sa
    from dbos import DBOS

    from forge.durable import DurableLoop, database_url

    durable = DurableLoop(make_loop(steps), name="bench", db=db)
    durable.launch()
    durable.run("warm up", run_id="warm-up")
    times = []
    for number in range(repeats):
        started = time.perf_counter()
        result = durable.run("benchmark", run_id=f"bench-{number}")
        times.append(time.perf_counter() - started)
        assert result.reason == "verified_success", result
    recorded = len(DBOS.list_workflow_steps("bench-0"))
    url = database_url(db).replace("postgresql://", "postgresql+psycopg://")
    with sa.create_engine(url).connect() as connection:
        events = connection.execute(sa.text("select count(*) from dbos.workflow_events where workflow_uuid = 'bench-0'")
                                    if "postgresql" in url else
                                    sa.text("select count(*) from workflow_events where workflow_uuid = 'bench-0'")).scalar()
    print(json.dumps({"per_step": statistics.median(times) / (steps + 1), "writes": recorded + (events or 0),
                      "steps": steps + 1}), flush=True)
    import os

    os._exit(0)


def measure(db: str, steps: int, repeats: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--child", db, "--steps", str(steps), "--repeats", str(repeats)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.repeats)
        return
    memory = in_memory(args.steps, args.repeats * 20)
    with tempfile.TemporaryDirectory() as folder:
        sqlite = measure(str(Path(folder) / "runs.sqlite"), args.steps, args.repeats)
    print(f"in memory {memory * 1e6:8.1f} us/step")
    print(f"SQLite    {sqlite['per_step'] * 1e6:8.1f} us/step: ratio {sqlite['per_step'] / memory:6.1f}x; "
          f"{sqlite['writes'] / sqlite['steps']:.2f} writes/step ({sqlite['writes']} for {sqlite['steps']} steps)")
    from postgres import postgres_server, why_no_postgres

    reason = why_no_postgres()
    if reason is not None:
        print(f"PostgreSQL skipped: {reason}")
        return
    with postgres_server() as url:
        postgres = measure(url, args.steps, args.repeats)
    print(f"Postgres  {postgres['per_step'] * 1e6:8.1f} us/step: ratio {postgres['per_step'] / memory:6.1f}x; "
          f"{postgres['writes'] / postgres['steps']:.2f} writes/step ({postgres['writes']} for {postgres['steps']} steps)")


if __name__ == "__main__":
    main()
