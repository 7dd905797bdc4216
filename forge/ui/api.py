"""`forge ui`'s JSON API, under `/api/`: what a team's own front end (an approval screen, a
chat) needs, without scraping the pages.

    GET  /api/runs?status=&reason=&q=&page=   a page of runs, newest first
    GET  /api/runs/RUN                         one run: its status, what it waits for, trace and journal
    POST /api/runs/RUN/answer                  {"kind", "value", "question", "arguments"?}: answer what it waits for
    POST /api/runs/RUN/cancel                  stop it at its next step
    POST /api/runs/RUN/fork                    {"at": K, "patch": {...}?}: a new run, replayed to K, live from there
    GET  /api/runs/RUN/events                  its events as server-sent events, until it waits or stops

Every request passes the app's checks: the `Host` header names this server, and the token
comes with it — as `Authorization: Bearer TOKEN` (a program's way), or as the page's
`?token=` or session cookie (a browser's). A POST made with the cookie or `?token=` must also
come from this server (`Origin`) and carry the session's CSRF token in an `X-CSRF-Token`
header, as the page's forms do; a bearer token needs neither (a browser never sends one on
its own). A POST's body is JSON (`Content-Type: application/json`). A read-only app serves
no POST. Errors are JSON too: `{"error": "what was wrong and what to do"}`, with 400 (a bad
request), 401 (no token), 403 (refused), 404 (no such run), 405, 409 (an answer to a question
the run no longer asks: the body says what it asks now).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import unquote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from forge.durable.answers import AnswerRefused, read_answer
from forge.durable.runs import RunRow, StoredRuns
from forge.errors import ForgeError, RunNotFound, UsageError
from forge.machine.fork import Patch
from forge.records.answers import Waiting
from forge.records.trace import summary

__all__ = ["API_PREFIX", "Api", "api_routes", "chosen", "run_path_parts", "event_json", "row_json", "run_json", "waiting_json"]

API_PREFIX = "/api/runs"
PAGE_SIZE = 50


def error(code: int, message: str, **more: Any) -> JSONResponse:
    """An error as the API answers one: `{"error": message, ...more}` with HTTP status `code`."""
    return JSONResponse({"error": message, **more}, status_code=code)


def row_json(row: RunRow) -> dict[str, Any]:
    """A line of the runs list, as the API gives it."""
    return {"run_id": row.run_id, "status": row.status, "loop": row.loop, "goal": row.goal, "reason": row.reason,
            "steps": row.steps, "tokens": row.tokens, "created_at": row.created_at, "updated_at": row.updated_at,
            "question": row.question,
            **({} if row.timing is None else {"working_s": row.timing.working, "waiting_s": row.timing.waiting})}


def _plain(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return summary(value, 2000)


def waiting_json(waiting: Waiting | None) -> dict[str, Any] | None:
    """What a run waits for, as the API gives it: `Waiting`'s JSON and its question in words."""
    return None if waiting is None else waiting.shown()


def run_json(stored: Any, journal: Any = ()) -> dict[str, Any]:
    """A stored run (`DurableResult`) as the API gives it, with its `journal` entries."""
    calls = []
    for entry in journal:
        try:
            calls.append(entry.to_json())
        except ForgeError:  # a value only the loop's codec writes: its text
            calls.append({"transition": entry.transition, "kind": entry.kind, "name": entry.name,
                          "value": summary(entry.value, 2000)})
    return {"run_id": stored.run_id, "status": stored.status, "loop": stored.loop, "goal": stored.goal,
            "reason": stored.reason, "outcome": stored.outcome, "summary": stored.summary,
            "answer": _plain(stored.answer), "error": stored.error, "answers": stored.answers,
            "waiting": waiting_json(stored.waiting),
            "forked_from": None if stored.forked_from is None else stored.forked_from.to_json(),
            "continues": stored.continues,
            "trace": [record.to_json() for record in stored.records], "journal": calls}


def event_json(event: Any) -> dict[str, Any]:
    """A stored run's event (`StoredRuns.stream`) as one JSON object with its `type`: the
    event's own wire form (`forge.events`)."""
    return event.to_json()  # type: ignore[no-any-return]


async def _body(request: Request) -> Mapping[str, Any]:
    """The JSON object a POST carries.

    Raises:
        ValueError: (a UsageError) not JSON, or not an object, or not sent as JSON.
    """
    from forge.errors import UsageError

    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise UsageError("send the body as JSON, with Content-Type: application/json")
    raw = await request.body()
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        raise UsageError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise UsageError("the body must be a JSON object")
    return data


def run_path_parts(request: Request, prefix: str) -> tuple[str, str]:
    """The run id and what follows it (`""`, `events`, `answer`, …) in a path under `prefix`
    (`/runs/`, `/api/runs/`), read from the path as sent: links quote an id whole, so a `/` in
    one is `%2F` there, where a decoded path could not tell it from a separator."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    rest = raw.decode("latin-1").split("?", 1)[0][len(prefix):]
    segment, _, tail = rest.partition("/")
    return unquote(segment, errors="surrogatepass"), tail


def api_routes(runs: StoredRuns, *, read_only: bool) -> list[Route]:
    """The API's routes over `runs` (see the module); `read_only` serves no POST."""
    return Api(runs, read_only).routes()


class Api:
    """The API's handlers over one runs database; an answer's body is read by
    `read_answer`, the reader of the page's form and of `forge runs resume` too."""

    def __init__(self, runs: StoredRuns, read_only: bool) -> None:
        self.runs = runs
        self.gets: dict[str, Callable[..., Any]] = {"": self.one, "events": self.events}
        self.posts: dict[str, Callable[..., Any]] = {} if read_only else {"answer": self.answer,
                                                                          "cancel": self.cancel, "fork": self.fork}

    def routes(self) -> list[Route]:
        return [Route(API_PREFIX, self.listing),
                Route(API_PREFIX + "/{rest:path}", self.run_route, methods=["GET", "POST"]),
                Route("/api/{rest:path}", self.unknown, methods=["GET", "POST"])]

    async def listing(self, request: Request) -> Response:
        from forge.ui.pages import STATUSES

        status, reason, text = (request.query_params.get(k, "").strip() for k in ("status", "reason", "q"))
        if status and status not in STATUSES:
            return error(400, f"unknown status {status!r}; one of {', '.join(STATUSES)}")
        try:
            page = max(0, int(request.query_params.get("page", "0")))
        except ValueError:
            return error(400, "page must be a whole number")
        try:
            rows, more = await run_in_threadpool(self.runs.find, status=status or None, reason=reason or None,
                                                 text=text or None, offset=page * PAGE_SIZE, limit=PAGE_SIZE)
        except UsageError as refused_search:
            return error(400, str(refused_search))
        return JSONResponse({"runs": [row_json(row) for row in rows], "page": page, "more": more})

    async def one(self, request: Request, run_id: str) -> Response:
        def read() -> dict[str, Any]:
            stored = self.runs.get(run_id)
            return run_json(stored, self.runs.recorded(run_id)[1])

        try:
            return JSONResponse(await run_in_threadpool(read))
        except RunNotFound as missing:
            return error(404, str(missing))

    async def answer(self, request: Request, run_id: str) -> Response:
        try:
            body = await _body(request)
            given = read_answer(body.get("kind"), body.get("value"), body.get("arguments"),
                                question=body.get("question", ""))
        except (AnswerRefused, ForgeError, ValueError) as refusal:
            return error(400, f"not sent: {refusal}")
        try:
            await run_in_threadpool(self.runs.resume, run_id, given)  # refuses an answer to a question not asked now
        except RunNotFound as missing:
            return error(404, str(missing))
        except AnswerRefused as refusal:
            try:
                stored = await run_in_threadpool(self.runs.get, run_id)
            except RunNotFound as missing:
                return error(404, str(missing))
            if stored.waiting is None or stored.waiting.asked != given.question:  # stale: say what is asked now
                return error(409, f"not sent: {refusal}", status=stored.status, waiting=waiting_json(stored.waiting))
            return error(400, f"not sent: {refusal}")
        except (ForgeError, ValueError) as refusal:
            return error(400, f"not sent: {refusal}")
        worker = await run_in_threadpool(self.runs.who_serves, run_id)
        return JSONResponse({"run_id": run_id, "answered": True, "served": worker is not None})

    async def cancel(self, request: Request, run_id: str) -> Response:
        try:
            await run_in_threadpool(self.runs.cancel, run_id)
        except RunNotFound as missing:
            return error(404, str(missing))
        return JSONResponse({"run_id": run_id, "cancelled": True})

    async def fork(self, request: Request, run_id: str) -> Response:
        try:
            body = await _body(request)
            at = body.get("at")
            if not isinstance(at, int) or isinstance(at, bool) or at < 1:
                return error(400, "not forked: 'at' must be a transition number, 1 or more")
            patch = Patch.from_json(body["patch"]) if body.get("patch") is not None else None
            new = await run_in_threadpool(self.runs.fork, run_id, at, patch, body.get("run_id"))
        except RunNotFound as missing:
            return error(404, str(missing))
        except (ForgeError, ValueError, LookupError) as refusal:
            return error(400, f"not forked: {refusal}")
        return JSONResponse({"run_id": new, "forked_from": run_id, "at": at}, status_code=201)

    async def events(self, request: Request, run_id: str) -> Response:
        try:
            await run_in_threadpool(self.runs.get, run_id)
        except RunNotFound as missing:
            return error(404, str(missing))
        return StreamingResponse(_feed(self.runs, run_id, request), media_type="text/event-stream",
                                 headers={"cache-control": "no-store"})

    async def run_route(self, request: Request) -> Response:
        run_id, tail = run_path_parts(request, API_PREFIX + "/")
        handler, allowed = chosen(self.gets, self.posts, request.method, tail)
        if handler is not None:
            answered: Response = await handler(request, run_id)
            return answered
        if allowed:
            return JSONResponse({"error": f"{request.method} is not served here"}, status_code=405,
                                headers={"allow": ", ".join(allowed)})
        return error(404, f"no such API route: {request.url.path}")

    async def unknown(self, request: Request) -> Response:
        return error(404, f"no such API route: {request.url.path}")


def chosen(gets: Mapping[str, Any], posts: Mapping[str, Any], method: str, tail: str) -> tuple[Any, list[str]]:
    """The handler of `method` for the path's `tail` under a run (None where there is none),
    and the methods that do have one there (for a 405's `Allow`)."""
    handler = (gets if method == "GET" else posts).get(tail)
    return handler, [] if handler is not None else [m for m, table in (("GET", gets), ("POST", posts)) if tail in table]


async def _feed(runs: StoredRuns, run_id: str, request: Request) -> AsyncIterator[str]:
    """The run's events (`StoredRuns.stream`, read in a worker thread) as server-sent
    events, one JSON object each; a failure to read ends the feed with an `error` event."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    stop = threading.Event()
    done = object()

    def read() -> None:
        try:
            for event in runs.stream(run_id):
                loop.call_soon_threadsafe(queue.put_nowait, event_json(event))
                if stop.is_set():
                    return
        except (ForgeError, LookupError) as failure:
            loop.call_soon_threadsafe(queue.put_nowait, {"type": "error", "error": str(failure)})
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, done)

    threading.Thread(target=read, name="forge-ui-feed", daemon=True).start()
    try:
        while True:
            item = await queue.get()
            if item is done:
                return
            yield f"data: {json.dumps(item)}\n\n"
    finally:
        stop.set()
