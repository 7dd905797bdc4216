"""`forge ui` at scale: the runs list's first page over many runs, and how soon a running run's
page hears that it moved.

    python benchmarks/ui.py [--runs 100000]

The runs are queued (`StoredRuns.submit`) in a fresh SQLite database, with no worker to take
them: the list reads them as any run. The first page is timed unfiltered (what the UI opens
on), filtered by a status no queued run has (DBOS's index answers), and searched for a goal
no run has (forge's own table of goals answers, `forge_runs`, which the first search of a
database fills, once, and each later one brings up to date). The live
latency is the time from a durable run finishing to the server-sent event that tells its page,
through a real uvicorn server on 127.0.0.1.
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
from forge.durable import DurableLoop, launch, shutdown
from forge.durable.runs import StoredRuns


def first_page(runs: StoredRuns, **filters: str) -> float:
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        runs.find(limit=50, **filters)  # type: ignore[arg-type]
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def live_latency(db: str) -> float:
    import uvicorn

    from forge.ui.app import create_app

    released, finished_at = threading.Event(), []

    @tool
    def wait_for_the_bench(n: int) -> int:
        """Returns when the benchmark lets it."""
        released.wait(30)
        finished_at.append(time.perf_counter())
        return n

    loop = AgentLoop([wait_for_the_bench],
                     lambda goal, state: Intent.call("wait_for_the_bench", n=1) if not state.observations else Finish(1),
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
    durable = DurableLoop(loop, name="ui-bench", db=db)
    try:
        durable.start("wait", run_id="live-bench")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/runs/live-bench/events?token=bench", headers={"Host": f"127.0.0.1:{port}"})
        response = connection.getresponse()
        time.sleep(0.5)  # the stream has read the run as it is
        released.set()
        while not response.fp.readline().startswith(b"data:"):
            pass
        heard = time.perf_counter()
        return heard - finished_at[0]
    finally:
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
        latency = live_latency(db)
        print(f"live update: a run's page hears it finished after {latency * 1000:.0f} ms {against(latency, 1.0, ' s')}")
    finally:
        shutdown()


if __name__ == "__main__":
    main()
