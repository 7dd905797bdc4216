"""`forge ui` at scale: the runs list's first page over many runs, and how soon a running run's
page hears that it moved.

    python benchmarks/ui.py [--runs 100000]

The runs are queued (`StoredRuns.submit`) in a fresh SQLite database, with no worker to take
them: the list reads them as any run. The first page is timed unfiltered (what the UI opens
on), filtered by a status no queued run has (DBOS's index answers), and searched for a goal
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

sys.path.insert(0, str(Path(__file__).parent))

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100_000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    db = str(folder / "runs.sqlite")
    launch(db)
    try:
        with StoredRuns(db, create=True) as runs:
            started = time.perf_counter()
            for number in range(args.runs):
                runs.submit("nobody-serves-it", f"goal number {number}", f"run-{number:06d}")
            seeded = time.perf_counter() - started
            print(f"{args.runs:,} runs queued in {seeded:.0f} s")
            plain = first_page(runs)
            print(f"runs list, first page of {args.runs:,} runs:   {plain * 1000:7.1f} ms {against(plain, 0.5, ' s')}")
            status = first_page(runs, status="finished")
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
