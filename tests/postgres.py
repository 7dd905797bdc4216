"""A real PostgreSQL server for tests: Debian's `postgresql` (installed by tasks.py),
started as an unprivileged user in a temporary folder on a free port, and stopped after."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def why_no_postgres() -> str | None:
    """None when a server can be started here, else why not."""
    if _bin("initdb") is None or _bin("pg_ctl") is None:
        return "PostgreSQL is not installed (Debian: apt-get install postgresql; tasks.py does it as root)"
    if os.geteuid() == 0 and _unprivileged() is None:
        return "running as root with no unprivileged user (postgres or nobody) to run the server"
    return None


def _unprivileged() -> str | None:
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def postgres_server() -> Iterator[str]:
    """A fresh server; yields its URL (postgresql://USER@127.0.0.1:PORT/postgres)."""
    folder = Path(tempfile.mkdtemp(prefix="forge-pg-"))
    data, port = folder / "data", _free_port()
    user = None
    if os.geteuid() == 0:
        user = _unprivileged()
        assert user is not None
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)

    def as_user(*command: str) -> subprocess.CompletedProcess[str]:
        full = ["runuser", "-u", user, "--", *command] if user else list(command)
        return subprocess.run(full, capture_output=True, text=True, timeout=120, cwd=folder)

    role = user or pwd.getpwuid(os.getuid()).pw_name
    made = as_user(str(_bin("initdb")), "-D", str(data), "-A", "trust", "-U", role, "--no-sync")
    if made.returncode != 0:
        raise RuntimeError(f"initdb failed: {made.stderr}")
    started = as_user(str(_bin("pg_ctl")), "-D", str(data), "-l", str(folder / "log"), "-w", "-o",
                      f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off", "start")
    if started.returncode != 0:
        raise RuntimeError(f"PostgreSQL did not start: {started.stderr} {(folder / 'log').read_text()[-2000:]}")
    url = f"postgresql://{role}@127.0.0.1:{port}/postgres"

    def restart(down_for: float, while_down: Callable[[], object]) -> None:
        stopped = as_user(str(_bin("pg_ctl")), "-D", str(data), "-m", "fast", "-w", "stop")
        assert stopped.returncode == 0, stopped.stderr
        while_down()
        time.sleep(down_for)  # how long the database is away: the outage the test is about
        again = as_user(str(_bin("pg_ctl")), "-D", str(data), "-l", str(folder / "log"), "-w", "-o",
                        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off",
                        "start")
        assert again.returncode == 0, again.stderr

    _RESTARTS[url] = restart
    try:
        yield url
    finally:
        _RESTARTS.pop(url, None)
        as_user(str(_bin("pg_ctl")), "-D", str(data), "-m", "immediate", "stop")
        time.sleep(0.2)
        shutil.rmtree(folder, ignore_errors=True)


_RESTARTS: dict[str, object] = {}


def restart_postgres(url: str, down_for: float = 0.5, while_down: Callable[[], object] = lambda: None) -> None:
    """Stop the server `postgres_server` yielded `url` for (fast: clients are disconnected),
    call `while_down()`, keep it down for `down_for` seconds, and start it again on the same
    port and data."""
    restart = _RESTARTS[url]
    restart(down_for, while_down)  # type: ignore[operator]
