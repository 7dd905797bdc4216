"""`forge ui` (extra `ui`: Starlette and uvicorn): a local web app over the runs database.

The runs list (filtered, searched, paged), a run's page (the run inspector over every turn,
the conversation with what each model call cost; while the run runs, its transitions as they
fire, `forge.durable.live`), the inbox of
runs that wait, and the answers that make them go on: approve or reject the exact call,
approve it with edited arguments (checked against the tool's contract first), choose or add
a tool, reply with text, say whether a call in doubt ran, cancel. It binds 127.0.0.1 and
prints one URL carrying a secret token, as Jupyter does (see `forge.ui.app` for the checks
every request passes).
"""

from __future__ import annotations

import errno
import socket
import sys
from collections.abc import Callable

from forge.durable.database import database_url

__all__ = ["serve"]


def serve(db: str | None = None, *, host: str = "127.0.0.1", port: int = 8765, read_only: bool = False,
          token: str | None = None, say: Callable[[str], None] = print) -> None:
    """Serve the UI over `db` (default: forge-runs.sqlite here) until interrupted; `say`
    the URL to open, once the port is bound (so the URL printed is served; port 0 takes a
    free one). `--host 0.0.0.0` (any non-local host) is warned about: the page can
    approve side effects.

    Raises:
        UsageError: no runs database at `db`, or the port cannot be bound (busy, or not
            this machine's address): the message names it and the `--port` to change.
    """
    try:
        import uvicorn
    except ImportError as missing:  # pragma: no cover - exercised only without the extra
        raise ImportError("forge ui needs starlette and uvicorn: pip install 'forge-fsm[ui]'") from missing
    from forge.ui.app import create_app, new_token

    token = token or new_token()
    listening = _bound(host, port)
    port = listening.getsockname()[1]
    hosts = {f"127.0.0.1:{port}", f"localhost:{port}", f"{host}:{port}"}
    try:
        app = create_app(db or database_url(None), token, hosts=hosts, read_only=read_only)
    except BaseException:
        listening.close()
        raise
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: forge ui serves {host}, not only this machine: anyone who can reach it and has the URL "
              "can approve side effects", file=sys.stderr)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    say(f"forge ui{' (read-only)' if read_only else ''}: http://{shown}:{port}/?token={token}")
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listening])


def _bound(host: str, port: int) -> socket.socket:
    """A socket listening on `host`:`port`, bound before the URL is printed.

    Raises:
        UsageError: the address is in use or cannot be bound here.
    """
    from forge.errors import UsageError

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        listening = socket.socket(family, socket.SOCK_STREAM)
    except OSError as error:
        raise UsageError(f"forge ui cannot serve {host!r}: {error.strerror or error}; give --host an address "
                         "of this machine (default 127.0.0.1)") from None
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(2048)
    except OSError as error:
        listening.close()
        if error.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is in use: choose another with --port N (or --port 0 for any "
                             "free one)") from None
        raise UsageError(f"forge ui cannot listen on {host}:{port}: {error.strerror or error}") from None
    return listening
