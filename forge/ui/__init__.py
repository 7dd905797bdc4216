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

import sys
from collections.abc import Callable

from forge.durable.database import database_url

__all__ = ["serve"]


def serve(db: str | None = None, *, host: str = "127.0.0.1", port: int = 8765, read_only: bool = False,
          token: str | None = None, say: Callable[[str], None] = print) -> None:
    """Serve the UI over `db` (default: forge-runs.sqlite here) until interrupted; `say`
    the URL to open. `--host 0.0.0.0` (any non-local host) is warned about: the page can
    approve side effects.

    Raises:
        UsageError: no runs database at `db`.
    """
    try:
        import uvicorn
    except ImportError as missing:  # pragma: no cover - exercised only without the extra
        raise ImportError("forge ui needs starlette and uvicorn: pip install 'forge-fsm[ui]'") from missing
    from forge.ui.app import create_app, new_token

    token = token or new_token()
    hosts = {f"127.0.0.1:{port}", f"localhost:{port}", f"{host}:{port}"}
    app = create_app(db or database_url(None), token, hosts=hosts, read_only=read_only)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: forge ui serves {host}, not only this machine: anyone who can reach it and has the URL "
              "can approve side effects", file=sys.stderr)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    say(f"forge ui{' (read-only)' if read_only else ''}: http://{shown}:{port}/?token={token}")
    uvicorn.run(app, host=host, port=port, log_level="warning")
