"""`forge worker` processes for the tests of many workers: started on a runs database with
the loops of durable_workers.py, and stopped, whatever state they are in, when a test ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

LOOPS = str(Path(__file__).with_name("durable_workers.py"))


def start_worker(url: str, ledger: Path, concurrency: int = 4) -> subprocess.Popen[str]:
    """A worker serving durable_workers.py's loops, its side effects written to `ledger`."""
    env = dict(os.environ, FORGE_TEST_LEDGER=str(ledger), FORGE_TEST_DB=url)
    return subprocess.Popen([sys.executable, "-m", "forge", "worker", "--db", url, "--loops", LOOPS,
                             "--concurrency", str(concurrency)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop_all(workers: Iterable[subprocess.Popen[str]], timeout: float = 60) -> None:
    """Stop every worker still running politely (SIGTERM), and kill one that does not stop
    within `timeout` seconds."""
    workers = list(workers)
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            worker.kill()
