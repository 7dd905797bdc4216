"""Per-step cost of a durable run, side by side in one invocation: forge on SQLite and on
PostgreSQL, against the same run in memory and against its peers running the same run,
persisted after every step: LangGraph with its SQLite and PostgreSQL checkpointers
(`durability="sync"`) and Burr with its SQLite persister. For each: milliseconds per loop
step and commits per loop step (every database transaction that wrote, on any connection of
the process: for forge DBOS's and its own).

    pip install -r benchmarks/requirements.txt   # the peers (benchmark-only)
    python benchmarks/durable.py [--steps 50] [--rounds 3] [--repeats 3]

The run: `steps` loop steps, each a policy decision, a tool call (a read and a
side-effecting write, alternately) and a verify, then a final answer. Each backend runs in a
process of its own (DBOS is one per process), in rounds, interleaved, so a slow moment of
the shared machine falls on all of them; a backend's figure is its median over the rounds.
PostgreSQL is Debian's (started by the benchmark as user postgres), else skipped; a peer
that is not installed is skipped, saying how to install it.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from forge import AgentLoop, Finish, Intent, Limits, Tool

TEXT = "x" * 64
RUN = f"bench-{os.getpid()}"
"""Run ids of this process: rounds share a PostgreSQL database, and an id must be new to be run."""


def read(n: int) -> dict[str, Any]:
    return {"n": n, "text": TEXT}


def write(n: int) -> str:
    return f"wrote {n}"


def make_loop(steps: int) -> AgentLoop:
    def policy(goal: str, state: Any) -> Intent | Finish:
        n = state.step_count
        if n >= steps:
            return Finish("done")
        return Intent.call("write" if n % 2 else "read", n=n)

    tools = [Tool("read", {"read"}, read, required={"n"}),
             Tool("write", {"write"}, write, required={"n"}, side_effect=True)]
    return AgentLoop(tools, policy, lambda o: o.tool_name == "finish", max_steps=steps + 1, limits=Limits(repeat_limit=steps + 1))


def in_memory(steps: int, repeats: int) -> float:
    loop = make_loop(steps)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        loop.run("benchmark")
        times.append(time.perf_counter() - started)
    return statistics.median(times) / (steps + 1)


class Commits:
    """Counts transactions that wrote, on every SQLAlchemy engine, sqlite3 connection or
    psycopg connection of this process (whichever the backend uses)."""

    def __init__(self) -> None:
        self.count = 0

    def sqlalchemy(self) -> None:
        import sqlalchemy as sa

        wrote: set[int] = set()  # the DBAPI connections whose transaction under way has written

        def executed(connection: Any, cursor: Any, statement: str, *rest: Any) -> None:
            if not _writes(statement):
                return
            if connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
                self.count += 1  # a statement committed on its own
            else:
                wrote.add(id(connection.connection.dbapi_connection))

        def committed(connection: Any) -> None:  # per connection: another thread's commit is not this one's
            dbapi = id(connection.connection.dbapi_connection)
            if dbapi in wrote:
                self.count += 1
                wrote.discard(dbapi)

        sa.event.listen(sa.engine.Engine, "before_cursor_execute", executed)
        sa.event.listen(sa.engine.Engine, "commit", committed)
        sa.event.listen(sa.engine.Engine, "rollback",
                        lambda connection: wrote.discard(id(connection.connection.dbapi_connection)))

    def sqlite3(self) -> Callable[..., Any]:
        """A `sqlite3.connect` whose connections count their committed writes (autocommit
        statements included: each is its own transaction)."""
        import sqlite3

        counter = self

        class Counted(sqlite3.Connection):
            wrote = False

            def execute(self, statement: str, *args: Any) -> Any:  # type: ignore[override]
                self._note(statement)
                return super().execute(statement, *args)

            def executemany(self, statement: str, *args: Any) -> Any:  # type: ignore[override]
                self._note(statement)
                return super().executemany(statement, *args)

            def cursor(self, *args: Any) -> Any:  # type: ignore[override]
                connection = self

                class Cursor(sqlite3.Cursor):
                    def execute(self, statement: str, *more: Any) -> Any:  # type: ignore[override]
                        connection._note(statement)
                        return super().execute(statement, *more)

                    def executemany(self, statement: str, *more: Any) -> Any:  # type: ignore[override]
                        connection._note(statement)
                        return super().executemany(statement, *more)

                return super().cursor(Cursor)

            def _note(self, statement: str) -> None:
                if _writes(statement):
                    if self.in_transaction or self.isolation_level is not None:
                        self.wrote = True
                    else:
                        counter.count += 1

            def commit(self) -> None:
                if self.wrote:
                    counter.count += 1
                self.wrote = False
                super().commit()

        original = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> Any:
            return original(*args, factory=Counted, **kwargs)

        return connect

    def psycopg(self) -> None:
        import psycopg

        counter = self
        original_commit = psycopg.Connection.commit
        original_execute = psycopg.Cursor.execute
        original_many = psycopg.Cursor.executemany

        def execute(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if _writes(str(query if isinstance(query, str) else getattr(query, "as_string", lambda c: "")(cursor))):
                if cursor.connection.autocommit:
                    counter.count += 1
                else:
                    cursor.connection._forge_wrote = True
            return original_execute(cursor, query, *args, **kwargs)

        def executemany(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if cursor.connection.autocommit:
                counter.count += 1
            else:
                cursor.connection._forge_wrote = True
            return original_many(cursor, query, *args, **kwargs)

        def commit(connection: Any) -> Any:
            if getattr(connection, "_forge_wrote", False):
                counter.count += 1
            connection._forge_wrote = False
            return original_commit(connection)

        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]
        psycopg.Connection.commit = commit  # type: ignore[method-assign]


def _writes(statement: str) -> bool:
    return statement.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE", "UPSERT")


def forge_child(db: str, steps: int, repeats: int) -> dict[str, Any]:
    commits = Commits()
    commits.sqlalchemy()
    durable = make_loop(steps).durable(name="bench", db=db)
    durable.launch()
    durable.run("warm up", run_id=f"{RUN}-warm-up")

    def one(number: int) -> None:
        result = durable.run("benchmark", run_id=f"{RUN}-{number}")
        assert result.reason == "verified_success", result

    return {**_timed(one, commits, steps, repeats), "answer_commits": answer_cost(db, commits)}


def answer_cost(db: str, commits: Commits) -> int:
    """How many more commits a run's one approval takes when a person gives it (the run
    waits, is answered, and goes on) than when its approver does: the same calls either way."""
    from forge import AgentLoop, Finish, Intent, Tool
    from forge.durable import Answer

    def policy(goal: str, state: Any) -> Any:
        return Intent.call("write", n=1) if not state.observations else Finish("written")

    def loop(approver: Callable[..., Any]) -> Any:
        return AgentLoop([Tool("write", {"write"}, write, required={"n"}, side_effect=True)], policy,
                         lambda o: o.tool_name == "finish", definition="approval", approver=approver)

    approving = loop(lambda request: True).durable("bench-approver", db=db)
    asking = loop(lambda request: None).durable("bench-person", db=db)
    before = commits.count
    assert approving.run("write", run_id=f"{RUN}-approved").reason == "verified_success"
    by_approver = commits.count - before
    before = commits.count
    waiting = asking.run("write", run_id=f"{RUN}-answered")
    assert asking.resume(f"{RUN}-answered", Answer.approve(waiting.waiting.fingerprint)).reason == "verified_success"
    return commits.count - before - by_approver


class GraphState(TypedDict):
    """The LangGraph agent's state: what a forge run keeps (its observations) and the last decision."""

    goal: str
    observations: Annotated[list[dict[str, Any]], operator.add]
    intent: dict[str, Any] | None
    verified: bool


def langgraph_child(db: str, steps: int, repeats: int) -> dict[str, Any]:
    from langgraph.graph import END, START, StateGraph

    State = GraphState

    def agent(state: State) -> dict[str, Any]:  # the policy decides; a Finish is observed and verified here
        n = len(state["observations"])
        if n >= steps:
            return {"intent": None, "observations": [{"tool": "finish", "payload": "done"}], "verified": True}
        return {"intent": {"tool": "write" if n % 2 else "read", "n": n}}

    def tools(state: State) -> dict[str, Any]:  # the tool runs; the observation is recorded and verified
        intent = state["intent"]
        assert intent is not None
        payload = (write if intent["tool"] == "write" else read)(intent["n"])
        observation = {"tool": intent["tool"], "payload": payload}
        return {"observations": [observation], "verified": observation["tool"] == "finish"}

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", lambda s: END if s["verified"] else "tools")
    graph.add_edge("tools", "agent")
    commits = Commits()
    if db.startswith("postgresql"):
        commits.psycopg()
        from langgraph.checkpoint.postgres import PostgresSaver

        saver_context: Any = PostgresSaver.from_conn_string(db)
    else:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        sqlite3.connect = commits.sqlite3()  # type: ignore[assignment]
        saver_context = SqliteSaver.from_conn_string(db)
    with saver_context as saver:
        if hasattr(saver, "setup"):
            saver.setup()
        app = graph.compile(checkpointer=saver)

        def one(number: int) -> None:
            config = {"configurable": {"thread_id": f"{RUN}-{number}"}, "recursion_limit": 4 * steps + 10}
            final = app.invoke({"goal": "benchmark", "observations": [], "intent": None, "verified": False}, config,
                               durability="sync")
            assert final["verified"] and len(final["observations"]) == steps + 1

        one(-1)  # warm up
        return _timed(one, commits, steps, repeats)


def burr_child(db: str, steps: int, repeats: int) -> dict[str, Any]:
    import sqlite3

    commits = Commits()
    sqlite3.connect = commits.sqlite3()  # type: ignore[assignment]
    from burr.core import ApplicationBuilder, State, action, expr
    from burr.core.persistence import SQLitePersister

    @action(reads=["observations"], writes=["intent", "observations", "verified"])
    def agent(state: State) -> State:
        n = len(state["observations"])
        if n >= steps:
            return state.update(intent=None, verified=True).append(observations={"tool": "finish", "payload": "done"})
        return state.update(intent={"tool": "write" if n % 2 else "read", "n": n})

    @action(reads=["intent"], writes=["observations", "verified"])
    def tools(state: State) -> State:
        intent = state["intent"]
        payload = (write if intent["tool"] == "write" else read)(intent["n"])
        return state.append(observations={"tool": intent["tool"], "payload": payload}).update(verified=False)

    @action(reads=[], writes=[])
    def done(state: State) -> State:
        return state

    persister = SQLitePersister(db_path=db, table_name="burr_state")
    persister.initialize()

    def one(number: int) -> None:
        app = (ApplicationBuilder()
               .with_actions(agent=agent, tools=tools, done=done)
               .with_transitions(("agent", "done", expr("verified")), ("agent", "tools"), ("tools", "agent"))
               .with_state(goal="benchmark", observations=[], intent=None, verified=False)
               .with_entrypoint("agent")
               .with_identifiers(app_id=f"{RUN}-{number}")
               .with_state_persister(persister)
               .build())
        _, _, state = app.run(halt_after=["done"])
        assert state["verified"] and len(state["observations"]) == steps + 1

    one(-1)  # warm up
    return _timed(one, commits, steps, repeats)


def _timed(one: Callable[[int], None], commits: Commits, steps: int, repeats: int) -> dict[str, Any]:
    times, counted = [], 0
    for number in range(repeats):
        before = commits.count
        started = time.perf_counter()
        one(number)
        times.append(time.perf_counter() - started)
        counted = counted or commits.count - before
    return {"per_step": statistics.median(times) / (steps + 1), "commits": counted / (steps + 1)}


CHILDREN = {"forge": forge_child, "langgraph": langgraph_child, "burr": burr_child}
PEER_MODULES = {"langgraph": ("langgraph.checkpoint.sqlite", "langgraph.checkpoint.postgres"),
                "burr": ("burr.core",)}


def measure(backend: str, db: str, steps: int, repeats: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--child", backend, "--db", db, "--steps", str(steps),
                           "--repeats", str(repeats)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{backend} on {db}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def installed(backend: str) -> bool:
    import importlib.util

    try:
        return all(importlib.util.find_spec(module) is not None for module in PEER_MODULES.get(backend, ()))
    except ModuleNotFoundError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", choices=sorted(CHILDREN))
    parser.add_argument("--db")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(CHILDREN[args.child](args.db, args.steps, args.repeats)), flush=True)
        os._exit(0)
    from postgres import postgres_server, why_no_postgres

    peers = [name for name in ("langgraph", "burr") if installed(name)]
    for missing in sorted({"langgraph", "burr"} - set(peers)):
        print(f"{missing}: skipped (pip install -r benchmarks/requirements.txt)")
    no_postgres = why_no_postgres()
    memory = in_memory(args.steps, 50)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as folder, (postgres_server() if no_postgres is None else _none()) as url:
        backends = [("forge", "SQLite"), *((peer, "SQLite") for peer in peers)]
        if url is not None:
            backends += [("forge", "PostgreSQL"), *((p, "PostgreSQL") for p in peers if p == "langgraph")]
        for number in range(args.rounds):
            for backend, database in backends:
                db = str(Path(folder) / f"{backend}-{number}.sqlite") if database == "SQLite" else url
                results.setdefault((backend, database), []).append(measure(backend, db, args.steps, args.repeats))
    print(f"{args.steps + 1}-step run, median of {args.rounds} interleaved rounds; in memory {memory * 1e3:.3f} ms/step")
    for database in ("SQLite", "PostgreSQL"):
        rows = {backend: (statistics.median(r["per_step"] for r in runs), statistics.median(r["commits"] for r in runs))
                for (backend, db), runs in results.items() if db == database}
        if not rows:
            print(f"{database}: skipped ({no_postgres})")
            continue
        for backend, (per_step, commits) in sorted(rows.items(), key=lambda item: item[1][0]):
            print(f"{database:<10} {backend:<10} {per_step * 1e3:7.2f} ms/step  {commits:5.2f} commits/step")
        forge_ms, forge_commits = rows["forge"]
        others = [value for backend, value in rows.items() if backend != "forge"]
        if others:
            best = min(per_step for per_step, _ in others)
            print(f"{database:<10} forge / best peer {forge_ms / best:5.2f}x (target <= 1.00x) "
                  f"{'MET' if forge_ms <= best else 'MISSED'}")
        print(f"{database:<10} forge commits/step {forge_commits:5.2f} (target <= 2 per step, "
              f"plus the run's own start and end) {'MET' if forge_commits <= 2 + 4 / (args.steps + 1) else 'MISSED'}")
        extra = statistics.median(r["answer_commits"] for (backend, db), runs in results.items()
                                  if backend == "forge" and db == database for r in runs)
        print(f"{database:<10} forge: a person's answer to an approval costs {extra:g} commits more than the "
              f"approver's (target <= 1) {'MET' if extra <= 1 else 'MISSED'}")


class _none:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    main()
