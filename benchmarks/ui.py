"""`forge ui` at scale: the runs list's first page over many runs, and how soon a running run's
page hears that it moved.

    python benchmarks/ui.py [--runs 100000] [--waiting 10000] [--quick]

The runs are one real finished run and one real run a worker parked waiting for a person,
copied in SQL (`tests/cloned_runs.py`) into a fresh SQLite database: 100,000 runs of which
10,000 wait. Target (issue 50 item 3): the runs list, the waiting runs, the inbox and a run's
page each answer within 100 ms (in process, through the app, median of 5). The list is also
timed filtered by a status no run has (DBOS's index answers) and searched for a goal
no run has (forge's own table of goals answers, `forge_runs`, which `forge ui` fills as it
starts, or else the first search of a database, once; each later one brings it up to date). The live latencies, through a
real uvicorn server on 127.0.0.1: from a followed run's call returning to its page showing
the transitions the run fired after it (the page reloads at each server-sent event, as a
browser does), and from a run finishing to the event that tells its page.
"""

from __future__ import annotations

import argparse
import http.client
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from targets import against

from forge import AgentLoop, Finish, Intent, tool
from forge.durable import launch, shutdown
from forge.durable.runs import StoredRuns


def first_page(runs: StoredRuns, **filters: str) -> float:
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        runs.find(limit=50, **filters)  # type: ignore[arg-type]
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def live_latency(db: str) -> tuple[float, float]:
    """(transition, finish): from the run's held call returning to its page showing the
    transitions fired after it (the page follows the run: each server-sent event reloads it,
    as the browser does), and from its last call returning to the event that says it finished."""
    import json

    import uvicorn

    from forge.ui.app import create_app

    released, returned = [threading.Event(), threading.Event()], []

    @tool
    def wait_for_the_bench(n: int) -> int:
        """Returns when the benchmark lets it."""
        released[n - 1].wait(30)
        returned.append(time.perf_counter())
        return n

    loop = AgentLoop([wait_for_the_bench],
                     lambda goal, state: Intent.call("wait_for_the_bench", n=len(state.observations) + 1)
                     if len(state.observations) < 2 else Finish(1),
                     lambda o: o.tool_name == "finish")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(db, "bench", hosts={f"127.0.0.1:{port}"}), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)

    def page() -> str:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/runs/live-bench?token=bench", headers={"Host": f"127.0.0.1:{port}"})
        return connection.getresponse().read().decode()

    def events(shown: str) -> http.client.HTTPResponse:
        feed = json.loads(shown[shown.index("new EventSource(") + len("new EventSource("):].split(")")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", feed, headers={"Host": f"127.0.0.1:{port}"})
        return connection.getresponse()

    durable = loop.durable(name="ui-bench", db=db)
    try:
        durable.start("wait", run_id="live-bench")
        shown = page()
        while "1 calls so far, 1 transitions" not in shown:  # held in its first call, followed
            time.sleep(0.05)
            shown = page()
        stream = events(shown)
        released[0].set()
        while "5 transitions in the inspector" not in shown:  # held in its second call: the 4 after the first, shown
            while not stream.fp.readline().startswith(b"data:"):
                pass
            shown = page()
            stream = events(shown)
        transition = time.perf_counter() - returned[0]
        released[1].set()
        while True:
            line = stream.fp.readline()
            if line.startswith(b"data:") and json.loads(line[5:])["status"] == "finished":
                return transition, time.perf_counter() - returned[1]
    finally:
        for each in released:
            each.set()
        durable.close()
        server.should_exit = True
        thread.join(10)


def http_page(app: Any, path: str) -> float:
    """Median seconds of five GETs of `path` from the app, in process (no network)."""
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        app.get(path).raise_for_status()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def seeded(db: str, runs: int, waiting: int) -> None:
    """`runs` stored runs of which `waiting` wait for a person: one real run finished and one
    parked by a real worker, copied in SQL (`tests/cloned_runs.py`)."""
    from cloned_runs import clone_runs
    from worker_processes import start_worker, stop_all

    finishing = AgentLoop([wait_for_nothing], lambda goal, state: Intent.call("wait_for_nothing")
                          if not state.observations else Finish("ok"), lambda o: o.tool_name == "finish")
    with finishing.durable("bench", db=db) as done:
        done.run("a finished run", run_id="finished-template")
    worker = start_worker(db, Path(db).parent / "ledger", 4)
    try:
        with StoredRuns(db) as stored:
            stored.submit("filing-approved", "file every item", "waiting-template")
            stored.wait("waiting-template", timeout=120)
    finally:
        stop_all([worker])
    shutdown()
    clone_runs(db, "finished-template", runs - waiting - 2, "finished-")
    clone_runs(db, "waiting-template", waiting, "waiting-")


@tool
def wait_for_nothing() -> int:
    """Returns at once."""
    return 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="10,000 runs of which 1,000 wait")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.waiting = 10_000, 1_000
    folder = Path(tempfile.mkdtemp())
    db = str(folder / "runs.sqlite")
    started = time.perf_counter()
    seeded(db, args.runs, args.waiting)
    print(f"{args.runs:,} runs stored, {args.waiting:,} of them waiting for a person, in "
          f"{time.perf_counter() - started:.0f} s")
    launch(db)
    try:
        from starlette.testclient import TestClient

        from forge.ui.app import create_app

        app = TestClient(create_app(db, "bench", hosts={"testserver"}))
        app.get("/?token=bench").raise_for_status()
        for label, path in (("runs list, first page", "/?token=bench"),
                            ("runs list, waiting runs", "/?token=bench&status=waiting"),
                            ("inbox, first page", "/inbox?token=bench"),
                            ("a waiting run's page", f"/runs/waiting-{args.waiting // 2}?token=bench"),
                            ("a finished run's page", f"/runs/finished-{args.runs // 2}?token=bench")):
            seconds = http_page(app, path)
            print(f"forge ui, {label:24} {seconds * 1000:7.1f} ms {against(seconds, 0.1, ' s')}")
        with StoredRuns(db) as runs:
            status = first_page(runs, status="cancelled")
            print(f"runs list, a status no run has:            {status * 1000:7.1f} ms {against(status, 0.5, ' s')}")
            started = time.perf_counter()
            runs.find(limit=50, text="no goal says this")
            once = time.perf_counter() - started
            print(f"runs list, the first search of the database notes every run's goal, once: {once:.1f} s")
            search = first_page(runs, text="no goal says this")
            print(f"runs list, a search no goal or id matches: {search * 1000:7.1f} ms {against(search, 0.5, ' s')}")
        transition, finish = live_latency(db)
        print(f"live update: a followed run's page shows the transitions after a call {transition * 1000:.0f} ms "
              f"after it returns {against(transition, 1.0, ' s')}")
        print(f"live update: a run's page hears it finished after {finish * 1000:.0f} ms {against(finish, 1.0, ' s')}")
    finally:
        shutdown()


if __name__ == "__main__":
    main()
