"""The pages of `forge ui` (`Pages`): the runs list, the inbox, a run's page and its live
feed, a loop's page, and the answers, cancels and forks posted from them — each a method
over one runs database, behind the app's guard (`forge.ui.guard`); `forge.ui.app` makes the
app of them and of the JSON API (`forge.ui.api`)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from forge.durable.answers import Answer, AnswerRefused, json_text, read_answer
from forge.durable.runs import StoredRuns
from forge.errors import ForgeError, RunNotFound, UsageError
from forge.machine.fork import Patch
from forge.policy import Ask, Finish, Intent
from forge.records.trace import error_text
from forge.ui.api import chosen, run_path_parts
from forge.ui.guard import Guard
from forge.ui.pages import STATUSES, Visit, error_page, inbox_page, loop_html, run_page, run_path, runs_page, stale_answer_page

__all__ = ["ANSWER_FOLLOWED_FOR", "FOLLOW_RENEWED_EVERY", "PAGE_SIZE", "Pages", "failed_page"]

PAGE_SIZE = 50
FOLLOW_RENEWED_EVERY = 3.0
"""Seconds between a live page's renewals of its `StoredRuns.follow` (each for 10 s)."""
ANSWER_FOLLOWED_FOR = 120.0
"""Seconds a page that sent an answer waits, on one connection, for the run to take it up
(its browser connects again after that)."""


def failed_page(status: int, message: str, token_query: str = "", run_id: str | None = None) -> HTMLResponse:
    """A refusal as the app's own page (`error_page`): what was wrong and what to do."""
    return HTMLResponse(error_page(status, message, token_query, run_id), status_code=status)


class Pages:
    """The page routes over `runs` (see the module); `query` is the token as a link's query,
    `db` the database as a command line names it; `read_only` serves no POST."""

    def __init__(self, db: str, runs: StoredRuns, guard: Guard, query: str, read_only: bool) -> None:
        self.db, self.runs, self.guard, self.query, self.read_only = db, runs, guard, query, read_only
        self.gets: dict[str, Any] = {"": self.one, "events": self.events}
        self.posts: dict[str, Any] = {} if read_only else {"answer": self.answer, "cancel": self.cancel,
                                                            "fork": self.fork}

    def routes(self) -> list[Route]:
        return [Route("/", self.listing), Route("/inbox", self.inbox), Route("/loops/{name}", self.loop_page),
                Route("/runs/{rest:path}", self.run_route, methods=["GET", "POST"])]

    def waiting_count(self) -> int:
        """How many runs wait for an answer (what the navigation shows; at most 500 counted)."""
        return self.runs.waiting_count(500)

    async def visit(self, request: Request, note: str = "") -> Visit:
        """What the page answering `request` is made with: the token's query, the session's
        CSRF token unless `read_only`, how many runs wait, and `note`."""
        return Visit(self.query, None if self.read_only else self.guard.csrf(request),
                     await run_in_threadpool(self.waiting_count), note)

    def run_id_of(self, request: Request) -> str:
        """The run id in the request's path (see `_run_path_of`)."""
        return _run_path_of(request)[0]

    async def listing(self, request: Request) -> Response:
        filters = {k: request.query_params.get(k, "").strip() for k in ("status", "reason", "q")}
        if filters["status"] and filters["status"] not in STATUSES:
            return failed_page(400, f"unknown status {filters['status']!r}; one of {', '.join(STATUSES)}", self.query)
        try:
            page = max(0, int(request.query_params.get("page", "0")))
        except ValueError:
            return failed_page(400, "page must be a number", self.query)
        try:
            rows, more = await run_in_threadpool(self.runs.find, status=filters["status"] or None,
                                                 reason=filters["reason"] or None, text=filters["q"] or None,
                                                 offset=page * PAGE_SIZE, limit=PAGE_SIZE)
        except UsageError as refused_search:
            return failed_page(400, str(refused_search), self.query)
        return HTMLResponse(runs_page(rows, await self.visit(request), more=more, page=page, filters=filters))

    async def inbox(self, request: Request) -> Response:
        try:
            page = max(0, int(request.query_params.get("page", "0")))
        except ValueError:
            return failed_page(400, "page must be a number", self.query)
        rows, more = await run_in_threadpool(self.runs.find, status="waiting", offset=page * PAGE_SIZE, limit=PAGE_SIZE)
        note = f"Answered {request.query_params.get('run', '')}." if request.query_params.get("done") == "answered" else ""
        return HTMLResponse(inbox_page([(row, row.waiting) for row in rows], await self.visit(request, note),
                                       page=page, more=more))

    async def one(self, request: Request) -> Response:
        run_id = self.run_id_of(request)
        try:
            stored = await run_in_threadpool(self.runs.get, run_id)
        except RunNotFound as error:
            return failed_page(404, str(error), self.query)
        seen = ""
        answered = _answered(request)
        following = answered if (stored.status == "waiting" and stored.waiting is not None and answered > 0
                                 and stored.waiting.asked == answered) else 0  # answered, not yet taken up: follow it
        if stored.status in ("queued", "running") or following:
            await run_in_threadpool(self.runs.follow, run_id)
            seen = await run_in_threadpool(_moment, self.runs, stored)
        if stored.status == "running":
            inspector = await run_in_threadpool(_live, self.runs, stored)
        else:
            inspector = await run_in_threadpool(_inspector, stored.records, False, stored.children)
        note = _NOTES.get(request.query_params.get("done", ""), "")
        if note and request.query_params.get("served") == "0":
            note += (f" No forge worker is live, so it goes on only in the program that started it, if that is still "
                     f"running: start one (forge worker --db {self.db} --loops MODULE, where MODULE makes the "
                     f"durable loop named {stored.loop!r}).")
        return HTMLResponse(run_page(stored, inspector, await self.visit(request, note), seen=seen,
                                     following=following))

    async def gone_on(self, run_id: str, done: str, answered: int = 0) -> Response:
        """To the page of a run just answered (question `answered`) or forked, saying whether
        a worker is live to take it on."""
        worker = await run_in_threadpool(self.runs.who_serves, run_id)
        more = f"&answered={answered}" if answered else ""
        return RedirectResponse(f"{run_path(run_id)}?{self.query}&done={done}&served={int(worker is not None)}{more}",
                                status_code=303)

    async def loop_page(self, request: Request) -> Response:
        name = request.path_params["name"]
        found = await run_in_threadpool(self.runs.outcomes, name)
        machine = None if found else await run_in_threadpool(_machine_of_loop, self.runs, name)
        svg = await run_in_threadpool(_many_runs_svg, found, machine)
        return HTMLResponse(loop_html(name, svg, len(found), await self.visit(request)))

    async def fork(self, request: Request) -> Response:
        refused, form = await self.guard.posted(request)
        if refused is not None:
            return failed_page(refused.status, refused.message)
        run_id = self.run_id_of(request)
        try:
            at = int(str(form.get("at", "")))
            text = str(form.get("patch", "")).strip()
            patch = Patch.from_json(json_text(text, "the patch")) if text else None
            new = await run_in_threadpool(self.runs.fork, run_id, at, patch, None)
        except (ForgeError, ValueError, LookupError) as error:
            return failed_page(400, f"not forked: {error}", self.query, run_id)
        return await self.gone_on(new, "forked")

    async def events(self, request: Request) -> Response:
        run_id = self.run_id_of(request)
        try:
            await run_in_threadpool(self.runs.get, run_id)
        except RunNotFound as error:  # a feed of nothing would make a browser reconnect forever
            return failed_page(404, str(error), self.query)

        return StreamingResponse(_changes(self.runs, run_id, request), media_type="text/event-stream",
                                 headers={"cache-control": "no-store"})

    async def answer(self, request: Request) -> Response:
        refused, form = await self.guard.posted(request)
        if refused is not None:
            return failed_page(refused.status, refused.message)
        run_id = self.run_id_of(request)
        try:
            given = _answer_of(form)
        except (AnswerRefused, ForgeError, ValueError) as error:
            return failed_page(400, f"not sent: {error}", self.query, run_id)
        try:
            await run_in_threadpool(self.runs.resume, run_id, given)  # refuses an answer to a question not asked now
        except RunNotFound as error:
            return failed_page(404, str(error), self.query)
        except AnswerRefused as error:
            stored = await run_in_threadpool(self.runs.get, run_id)
            if stored.waiting is None or stored.waiting.asked != given.question:  # the form is stale: say what is asked now
                return (HTMLResponse(stale_answer_page(stored, given.question, self.query), status_code=409))
            return failed_page(400, f"not sent: {error}", self.query, run_id)
        except (ForgeError, ValueError) as error:
            return failed_page(400, f"not sent: {error}", self.query, run_id)
        if form.get("back") == "inbox":
            return RedirectResponse(f"/inbox?{self.query}&{urlencode({'done': 'answered', 'run': run_id})}", status_code=303)
        return await self.gone_on(run_id, "answered", given.question)

    async def cancel(self, request: Request) -> Response:
        refused, _ = await self.guard.posted(request)
        if refused is not None:
            return failed_page(refused.status, refused.message)
        run_id = self.run_id_of(request)
        try:
            await run_in_threadpool(self.runs.cancel, run_id)
        except RunNotFound as error:
            return failed_page(404, str(error), self.query)
        return RedirectResponse(f"{run_path(run_id)}?{self.query}&done=cancelled", status_code=303)

    async def run_route(self, request: Request) -> Response:
        """Every route under /runs/, chosen by the path as sent (`_run_path_of`): a run id
        with a `/` in it (`%2F` in its links) is one id, whatever it ends with."""
        _, tail = _run_path_of(request)
        handler, allowed = chosen(self.gets, self.posts, request.method, tail)
        if handler is None:
            refusal = failed_page(405 if allowed else 404, f"{request.method} is not served here" if allowed else
                                  f"no page at {request.url.path}", self.query)
            if allowed:
                refusal.headers["allow"] = ", ".join(allowed)
            return refusal
        answered: Response = await handler(request)
        return answered


_NOTES = {"answered": "Answered.", "cancelled": "Cancelled: the run stops at its next step.",
          "forked": "Forked: this new run is queued for a forge worker serving its loop."}


def _many_runs_svg(found: list[tuple[list[Any], str | None]], machine: str | None = None) -> str:
    """The many-runs diagram of `found` (records, outcome), as inline SVG, with a table of
    its edges' figures beside it (readable at any width); with no finished run, the
    definition `machine` (a run of the loop that has not finished names it) drawn plain;
    or why there is none."""
    from html import escape

    from forge.diagram.dot import to_digraph
    from forge.diagram.many import edge_stats, many_runs_digraph
    from forge.inspect.page import inline_svg
    from forge.machine.loader import load_definition

    if found:
        machine = next((r.machine for r in found[0][0] if r.machine), "single_agent")
    if machine is None:
        return '<p class="box">no run of this loop yet: its definition is drawn once a run of it starts</p>'
    try:
        definition = load_definition(machine)
        if not found:
            return ('<p class="box note">no finished run of this loop yet: its definition, with no figures</p>'
                    + inline_svg(_full_size(to_digraph(definition))))
        stats, count = edge_stats(definition, found)
        return inline_svg(_full_size(many_runs_digraph(definition, stats, count))) + _edge_table(definition, stats)
    except (ForgeError, FileNotFoundError, ValueError) as error:
        return f'<p class="box">cannot draw the runs of {escape(machine)}: {escape(str(error))}</p>'


def _full_size(graph: Any) -> Any:
    """`graph` drawn at its own size, not shrunk to a page's 8.3 inches: on a screen its labels
    stay readable (a wide machine shrunk had 6 px text) and its box scrolls instead."""
    graph.graph_attr.pop("size", None)
    return graph


def _machine_of_loop(runs: StoredRuns, name: str) -> str | None:
    """The definition a loop's latest run that has fired a transition names, if any."""
    rows, _ = runs.find(loop=name, limit=20)
    for row in rows:
        records = runs.get(row.run_id).records
        machine = next((r.machine for r in records if r.machine), None)
        if machine:
            return machine
    return None


def _edge_table(definition: Any, stats: Any) -> str:
    """Each edge the runs took, most taken first: what the diagram's labels say, as text."""
    from html import escape

    edges = {edge.index: edge for edge in definition.transitions}
    for state in definition.states:
        for edge in (None if state.terminal else definition.failure_edge(state.name), definition.answer_edge(state.name)):
            if edge is not None:
                edges.setdefault(edge.index, edge)
    rows = []
    for index, figures in sorted(stats.items(), key=lambda item: -item[1].runs):
        edge = edges.get(index)
        if edge is None:
            continue
        guard = f" [{escape(edge.guard)}]" if edge.guard else ""
        rows.append(f"<tr><td>{escape(edge.source)} -{escape(edge.trigger)}-&gt; {escape(edge.dest)}{guard}</td>"
                    f"<td>{figures.runs}</td><td>{figures.p50 * 1000:.1f} ms</td><td>{figures.p95 * 1000:.1f} ms</td>"
                    f"<td>{figures.failed:.0%}</td></tr>")
    return ('<table id="edges"><thead><tr><th>edge</th><th>runs</th><th>p50</th><th>p95</th><th>failed</th></tr>'
            f"</thead><tbody>{''.join(rows)}</tbody></table>")


def _run_path_of(request: Request) -> tuple[str, str]:
    """The run id and what follows it in a path under /runs/ (`run_path_parts`)."""
    return run_path_parts(request, "/runs/")


def _answered(request: Request) -> int:
    """The question a page says it answered (`?answered=N`, what an answer's redirect adds); 0: none."""
    try:
        return int(request.query_params.get("answered", "0"))
    except ValueError:
        return 0


def _answer_of(form: Any) -> Answer:
    """The Answer a posted form gives (`read_answer`, its fields as text), bound to the
    question the form says it answers.

    Raises:
        AnswerRefused, ValueError: a kind forge does not know, a value that does not fit, or
            a form that does not say which question it answers.
    """
    return read_answer(str(form.get("kind", "")), str(form.get("value", "")).strip(),
                       str(form.get("arguments", "")).strip() or None, question=str(form.get("question", "")),
                       as_text=True)


def _inspector(records: list[Any], running: bool = False, children: Sequence[Any] = ()) -> str:
    """The run inspector of `records` (a fragment; `running`: the run goes on past them), with
    its `children` (child runs, `StoredChild`) nested, or why there is none."""
    from html import escape

    from forge.inspect import html

    if not records:
        return '<p class="box">no transition has fired yet</p>'
    try:
        return html(records, fragment=True, running=running, children=children)
    except (ForgeError, FileNotFoundError, ValueError) as error:
        return f'<p class="box">the inspector cannot draw this run: {escape(str(error))}</p>'


def _live(runs: StoredRuns, stored: Any) -> str:
    """A running run: the inspector over what it has fired so far (stored while the page
    follows it; until then, what it published when it last waited), and its calls so far.
    """
    from html import escape

    from forge.records.trace import summary

    so_far = runs.fired_so_far(stored.run_id)
    records = so_far or list(stored.records)
    try:
        calls = runs.under_way(stored.run_id)
    except ForgeError as error:
        return f'<p class="box">{escape(str(error))}</p>' + _inspector(records, running=True)
    def outcome(call: Any) -> str:
        if call.error is not None:
            return error_text(call.error, 200)
        value = call.value
        if isinstance(value, Intent):  # a decision, as the inspector writes it
            wanted = value.tool or "/".join(sorted(value.capabilities))
            return f"call {wanted} {summary(dict(value.arguments), 180)}"
        if isinstance(value, Finish):
            return f"finish: {summary(value.answer, 180)}"
        if isinstance(value, Ask):
            return f"ask: {summary(value.question, 180)}"
        return summary(value, 200)

    rows = "".join(
        f"<tr><td>{call.transition}</td><td>{call.step}</td><td>{escape(call.kind)}</td>"
        f"<td>{escape(call.name)}</td><td>{escape(outcome(call))}</td></tr>" for call in calls)
    return (_inspector(records, running=True) +
            f'<section class="box" id="under-way"><h3>under way: {len(calls)} calls so far, '
            f'{len(records)} transitions in the inspector above</h3>'
            "<table><thead><tr><th>transition</th><th>step</th><th>call</th><th>name</th><th>outcome</th></tr>"
            f"</thead><tbody>{rows}</tbody></table></section>")


def _moment(runs: StoredRuns, stored: Any) -> str:
    """A digest of what a run's page shows of it: its status and answers, and the calls and
    transitions it has stored while under way. A page is given the digest it was made at,
    and its events route tells it of the first change after that one, so no change between
    making the page and listening for changes goes unseen."""
    shown = (stored.status, stored.answers, *runs.database.so_far(stored.run_id))
    return str(hashlib.sha256(repr(shown).encode()).hexdigest()[:16])


async def _changes(runs: Any, run_id: str, request: Request) -> Any:
    """One message per change after `seen` (the digest a page was made at); without `seen`,
    the first message is the run as it is now. With `answered=N` (a page that answered
    question N), one message once the run no longer waits on it. A run that no longer runs
    ends the stream; so does a database that cannot be read, with an `error` event (a
    browser's EventSource then connects again by itself)."""
    answered = _answered(request)  # a page that answered question N: told once it is no longer asked
    last, until = request.query_params.get("seen") or "", time.monotonic() + ANSWER_FOLLOWED_FOR
    read = _Reading(runs, run_id)
    while True:
        try:
            stored = await read.stored()
            now = "" if answered else await run_in_threadpool(_moment, runs, stored)
        except (ForgeError, LookupError) as error:
            yield f"event: error\ndata: {json.dumps({'error': str(error)})}\n\n"
            return
        if answered:  # its own digest moves as a followed run stores what it fired: not a change
            taken = stored.waiting is None or stored.waiting.asked != answered
            if taken:
                yield f"data: {json.dumps({'status': stored.status})}\n\n"
            if taken or time.monotonic() > until or await request.is_disconnected():
                return
        else:
            if now != last:
                yield f"data: {json.dumps({'status': stored.status})}\n\n"
            last = now
            if stored.status not in ("queued", "running") or await request.is_disconnected():
                return
        await asyncio.sleep(0.25)


class _Reading:
    """A run read again and again for a page's feed, followed while it is read (the process
    running it stores its transitions as it goes), the follow renewed now and then."""

    def __init__(self, runs: Any, run_id: str) -> None:
        self.runs, self.run_id, self.followed = runs, run_id, 0.0

    async def stored(self) -> Any:
        if time.monotonic() - self.followed > FOLLOW_RENEWED_EVERY:
            await run_in_threadpool(self.runs.follow, self.run_id)
            self.followed = time.monotonic()
        return await run_in_threadpool(self.runs.get, self.run_id)
