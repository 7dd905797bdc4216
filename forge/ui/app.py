"""The `forge ui` web app, on Starlette: the runs list, a run's live page, the inbox, and
the answers that make a waiting run go on.

This page can approve side effects, so every request is checked before it is served, by one
guard that is the app's outermost layer (`forge.ui.guard`):

- the `Host` header must name this server (127.0.0.1, localhost or the host it was given,
  on its port), against DNS rebinding;
- the secret token must come with it, as `?token=` (what the printed URL carries) or the
  session cookie that a first visit with it sets;
- a state-changing request is a POST whose `Origin` (or `Referer`) is this server and whose
  form carries the session's CSRF token;
- `read_only` serves no action at all: the POST routes do not exist.

The same runs and answers are a JSON API under `/api/` (`forge.ui.api`), for a front end of
a team's own; a program authenticates there with `Authorization: Bearer TOKEN`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator, Iterable
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from forge.durable.runs import StoredRuns
from forge.ui.api import api_routes
from forge.ui.api import error as api_error
from forge.ui.guard import COOKIE, Guard, Guarded, Refusal
from forge.ui.routes import PAGE_SIZE, Pages, failed_page

__all__ = ["COOKIE", "PAGE_SIZE", "create_app", "new_token"]


def create_app(db: str, token: str, *, hosts: Iterable[str], read_only: bool = False) -> Starlette:
    """The app over the runs database `db`. `token` is the secret every request needs;
    `hosts` the `Host` values it answers to (host:port)."""
    guard = Guard(token, hosts)
    runs = StoredRuns(db)
    query = urlencode({"token": token})

    routes = [*api_routes(runs, read_only=read_only), *Pages(db, runs, guard, query, read_only).routes()]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        threading.Thread(target=_quietly, args=(runs.note_new_runs,), name="forge-ui-search", daemon=True).start()
        yield
        runs.close()

    async def failed(request: Request, exc: Exception) -> Response:
        """What a request that raised is answered: JSON under /api (every answer of the API
        is), the error page elsewhere; the exception itself goes to the server's log."""
        said = f"internal error ({type(exc).__name__}); the server's log has the details"
        return api_error(500, said) if request.url.path.startswith("/api/") else failed_page(500, said, query)

    def refuse(refusal: Refusal, api: bool) -> Response:
        return api_error(refusal.status, refusal.message) if api else failed_page(refusal.status, refusal.message)

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={Exception: failed})
    app.add_middleware(Guarded, guard=guard, refuse=refuse)
    return app


def _quietly(action: Any) -> None:
    """`action()` in the background; one that fails (an unreadable database) says so where
    it is next asked for, on a page."""
    with contextlib.suppress(Exception):
        action()


def new_token() -> str:
    """A secret for the printed URL."""
    return os.urandom(24).hex()
