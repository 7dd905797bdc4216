"""The HTML of `forge ui`: the runs list, a run's page (the run inspector, its conversation,
its answers) and the inbox. Every value from a run is escaped: goals, arguments, payloads and
model text are attacker-controlled. Pages fetch nothing from elsewhere (offline)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from forge.durable.answers import Waiting
from forge.durable.result import DurableResult
from forge.durable.runs import RunRow
from forge.files import valid_text
from forge.records.tally import seconds_text
from forge.records.usage import USAGE_KEY, ModelCall

__all__ = ["STATUSES", "Visit", "inbox_page", "loop_html", "run_page", "run_path", "runs_page"]

STATUSES = ("queued", "running", "waiting", "finished", "cancelled", "error")

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2733;background:#f6f8fa}
header{background:#1f4e8c;color:#fff;padding:10px 18px;display:flex;gap:18px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}
main{padding:14px 18px}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid #dde3ea;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#eef2f6}
.status-waiting{color:#8a5a00;font-weight:600}.status-finished{color:#1b5e20}.status-error{color:#b71c1c}
.box{background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:10px 14px;margin:10px 0}
.note{background:#fff8e1;border-color:#f0c36d}
.msg{border-left:3px solid #9fb3c8;padding:4px 10px;margin:6px 0;white-space:pre-wrap}
.msg.assistant{border-color:#1f4e8c}.msg.tool{border-color:#6a8f3a}.msg.user{border-color:#8a5a00}
form.inline{display:inline}
button{font:inherit;padding:5px 14px;border-radius:6px;border:1px solid #1f4e8c;background:#1f4e8c;color:#fff;
cursor:pointer;margin:2px 0}
button:hover{background:#163a69}button.secondary{background:transparent;color:#1f4e8c}
button.secondary:hover{background:#e8eef6}
:focus-visible{outline:3px solid #f0a500;outline-offset:2px}
input,textarea{font:inherit;padding:4px 6px;border:1px solid #9fb3c8;border-radius:4px;background:inherit;color:inherit}
@media (prefers-color-scheme:dark){body{color:#e3e8ee;background:#12171d}table,.box{background:#1b222b;
border-color:#2e3a47}th{background:#232c37}th,td{border-color:#2e3a47}.note{background:#3a2f12;border-color:#7a5c1c}
a{color:#8cc0ff}header{background:#15365f}button{background:#2b6cb8;border-color:#2b6cb8}
button.secondary{color:#8cc0ff;border-color:#8cc0ff;background:transparent}button.secondary:hover{background:#22303f}
.status-waiting{color:#f0c36d}.status-finished{color:#7ccf82}.status-error{color:#ff8a80}}
header .count{background:#fff;color:#1f4e8c;border-radius:9px;padding:0 7px;font-size:12px;margin-left:4px}
textarea{width:100%;font:13px monospace}
.why{color:#52606d;font-size:13px}
#many-runs{overflow:auto}
"""


def run_path(run_id: str, tail: str = "") -> str:
    """The path of a run's page (or of `tail` under it): the id percent-quoted, since run ids
    are anybody's text (a `?`, `#` or `<` in one stays part of it)."""
    return f"/runs/{quote(run_id.encode('utf-8', 'surrogatepass'), safe='')}{tail}"


@dataclass(frozen=True, slots=True)
class Visit:
    """What every page served to one request is made with: `token_query`, the query its
    links carry (`token=...`); `csrf`, the token its forms post (None where no action is
    allowed: `read_only`); `waiting`, how many runs wait (the navigation's badge, counted
    up to 500; None when not counted); `note`, what the page says first (an action done)."""

    token_query: str
    csrf: str | None = None
    waiting: int | None = None
    note: str = ""


def _page(title: str, body: str, visit: Visit) -> str:
    """A whole page; its navigation says how many runs wait (`visit.waiting`, when counted).
    Text that is not valid Unicode (a lone surrogate in a goal or a run id, which a run may
    hold) is shown escaped (`\\udcff`), never failing the page."""
    token_query, waiting = visit.token_query, visit.waiting
    runs, inbox = f"/?{token_query}", f"/inbox?{token_query}"
    count = "" if waiting is None else f' <span class="count" id="waiting-count">{waiting}</span>'
    return valid_text("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                 f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
                 f"<header><a href=\"{escape(runs)}\">forge ui</a><a href=\"{escape(runs)}\">runs</a>"
                 f"<a href=\"{escape(inbox)}\">inbox{count}</a></header><main>{body}</main></body></html>")


_ERROR_TITLES = {400: "not done", 403: "forbidden", 404: "not found", 405: "not served here"}


def error_page(status: int, message: str, token_query: str = "", run_id: str | None = None) -> str:
    """What a request forge ui refuses gets: the app's page saying what was wrong and what
    to do — go back to the run (`run_id`), or to the runs list. A page for a request
    without the token links nowhere that needs it (`token_query` empty)."""
    title = _ERROR_TITLES.get(status, "error")
    if run_id is not None and token_query:
        back = (f'<p><a href="{escape(run_path(run_id))}?{escape(token_query)}">back to run '
                f"{escape(run_id)}</a> to see what it waits for now</p>")
    elif token_query:
        back = f'<p><a href="/?{escape(token_query)}">back to the runs</a></p>'
    else:
        back = "<p>Open the URL <code>forge ui</code> printed when it started: it carries the token.</p>"
    return _page(f"forge ui · {title}", f'<section class="box status-error" id="error-page"><h2>{escape(title)} '
                 f'({status})</h2><p id="error-message">{escape(message)}</p>{back}</section>', Visit(token_query))


def stale_answer_page(stored: DurableResult, answered: int, token_query: str) -> str:
    """What a form made for question `answered` gets when the run no longer asks it: what
    the run asks now (or that it asks nothing), and a link to its page."""
    if stored.status == "waiting" and stored.waiting is not None:
        now = (f"It now asks question {stored.waiting.asked}: <b>{escape(stored.waiting.asks)}</b>. "
               "Answer that on the run's page.")
    else:
        now = f"It no longer waits for an answer: it is {escape(stored.status)}."
    return _page(f"forge ui · {stored.run_id}",
                 f'<section class="box" id="stale"><h2>not sent: that form answered question {answered}</h2>'
                 f"<p>Run {escape(stored.run_id)} no longer asks that question, so your answer was not taken for "
                 f'another one. {now}</p><p><a href="{escape(run_path(stored.run_id))}?{escape(token_query)}">'
                 "open the run's page</a></p></section>", Visit(token_query))


def _duration(row: RunRow) -> str:
    """A run's time as the list shows it: working and waiting for a person apart (`1.2 s
    working, 3 min waiting`), and since when it waits; a run that has published no timing
    (queued, running, or stored before forge kept one) its time from start to last change."""
    if row.timing is None:
        return "" if row.seconds is None else seconds_text(row.seconds)
    if row.status != "waiting":
        return str(row.timing)
    since, started = _when(row.updated_at), _when(row.created_at)
    return f"{row.timing} · waits since {since[11:] if since[:10] == started[:10] else since}"  # its time, that day


def _when(at: float | None) -> str:
    return "" if at is None else datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def runs_page(rows: Sequence[RunRow], visit: Visit, *, more: bool, page: int, filters: Mapping[str, str]) -> str:
    """The runs list: newest first, filtered, paged."""
    token_query = visit.token_query

    def link(**change: Any) -> str:
        query = {**{k: v for k, v in filters.items() if v}, **{k: str(v) for k, v in change.items()}}
        return escape(f"/?{urlencode(query)}&{token_query}" if query else f"/?{token_query}")

    options = "".join(f'<option value="{s}"{" selected" if filters.get("status") == s else ""}>{s}</option>'
                      for s in ("", *STATUSES))
    form = (f'<form method="get" action="/" class="box">'
            f'<input type="hidden" name="token" value="{escape(_token_of(token_query))}">'
            f'status <select name="status">{options}</select> '
            f'end state <input name="reason" value="{escape(filters.get("reason", ""))}" size="18"> '
            f'search <input name="q" value="{escape(filters.get("q", ""))}" placeholder="goal or run id"> '
            '<button type="submit">filter</button></form>')
    lines = []
    for row in rows:
        lines.append(
            f'<tr data-run="{escape(row.run_id)}"><td><a href="{escape(run_path(row.run_id))}?{escape(token_query)}">'
            f"{escape(row.run_id)}</a></td><td>{escape(row.goal)}</td>"
            f'<td><a href="/loops/{escape(quote(row.loop, safe=""))}?{escape(token_query)}">{escape(row.loop)}</a></td>'
            f'<td class="status-{escape(row.status)}">{escape(row.status)}'
            f'{" · " + escape(row.reason) if row.reason else ""}</td><td>{row.steps}</td>'
            f"<td>{_when(row.created_at)}</td><td>{escape(_duration(row))}</td>"
            f"<td>{row.tokens or ''}</td></tr>")
    table = ("<table><thead><tr><th>run</th><th>goal</th><th>loop</th><th>status</th><th>steps</th><th>started</th>"
             f"<th>time</th><th>tokens</th></tr></thead><tbody>{''.join(lines)}</tbody></table>")
    if not rows:
        table = '<p class="box">no runs match</p>'
    pager = (f'<p>page {page + 1}'
             + (f' · <a href="{link(page=page - 1)}">newer</a>' if page > 0 else "")
             + (f' · <a href="{link(page=page + 1)}" rel="next">older</a>' if more else "") + "</p>")
    return _page("forge ui · runs", form + table + pager, visit)


def _token_of(token_query: str) -> str:
    return token_query.partition("=")[2]


def conversation(messages: Iterable[Mapping[str, Any]]) -> str:
    """The conversation panel: every message sent and received, tool calls with their
    results, and what each model call cost."""
    from forge.records.pricing import cost_of

    parts, total, spent, priced = [], 0, 0.0, True
    for message in messages:
        role = str(message.get("role", "?"))
        text = message.get("content")
        body = "" if text is None else escape(str(text))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            body += (f"\n→ call {escape(str(call.get('id')))}: {escape(str(function.get('name')))}"
                     f"({escape(str(function.get('arguments')))})")
        if role == "tool":
            body = f"← result of {escape(str(message.get('tool_call_id')))}: {body}"
        if USAGE_KEY in message:
            call = ModelCall.from_json(message[USAGE_KEY])
            total += call.total_tokens
            cost = cost_of(call)  # at public prices (genai-prices): a loop's own table is the loop's
            spent, priced = spent + (cost or 0.0), priced and cost is not None
            body += (f"\n[{call.prompt_tokens} prompt + {call.completion_tokens} completion tokens"
                     + (f", {call.cached_tokens} cached" if call.cached_tokens else "")
                     + (f", ${cost:.4f}" if cost is not None else "") + "]")
        parts.append(f'<div class="msg {escape(role)}"><b>{escape(role)}</b> {body}</div>')
    if not parts:
        return ""
    money = f" · ${spent:.4f}" if priced and total else ""
    return (f'<section class="box" id="conversation"><h3>conversation · {total} tokens{money}</h3>'
            f'{"".join(parts)}</section>')


def answer_forms(run_id: str, waiting: Waiting, csrf: str, token_query: str, back: str = "") -> str:
    """The actions that fit what the run waits for, each a POST with the CSRF token; `back`
    ("inbox") is where the answer returns to, instead of the run's page."""
    action = escape(run_path(run_id, "/answer") + "?" + token_query)

    def form(fields: str, label: str) -> str:
        return (f'<form method="post" action="{action}" class="inline">'
                f'<input type="hidden" name="csrf" value="{escape(csrf)}">{fields}'
                f"<button type=\"submit\">{escape(label)}</button></form> ")

    def hidden(**values: Any) -> str:
        return "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(str(v))}">'
                       for k, v in {**values, "question": asked, **({"back": back} if back else {})}.items())

    out = [f'<p class="asks"><b>waiting for your answer</b> ({escape(waiting.state)}): {escape(waiting.asks)}</p>']
    if waiting.fingerprint:  # short, the whole on demand: an approval is bound to it
        out.append(f'<details class="fingerprint"><summary>call {escape(waiting.fingerprint[:12])}…</summary>'
                   f"<code>{escape(waiting.fingerprint)}</code></details>")
    asked = waiting.asked  # every form says which question it answers: a stale one is refused, not taken for the next
    kinds = waiting.answers
    if "approve" in kinds and waiting.fingerprint:
        out.append(form(hidden(kind="approve", value=waiting.fingerprint), "approve"))
        out.append(form(hidden(kind="reject", value=waiting.fingerprint), "reject"))
        out.append(form(hidden(kind="approve", value=waiting.fingerprint)
                        + f'<textarea name="arguments" rows="3">{escape(json.dumps(dict(waiting.arguments)))}</textarea>',
                        "approve with these arguments"))
    for kind in ("tool", "add_tool"):
        if kind in kinds:
            out.append(form(hidden(kind=kind) + '<input name="value" placeholder="tool name">',
                            "run with this tool" if kind == "tool" else "add this tool"))
    if "text" in kinds:
        out.append(form(hidden(kind="text") + '<input name="value" size="50" placeholder="your reply">', "reply"))
    if "did_run" in kinds:
        out.append(form(hidden(kind="did_run") + '<input name="value" placeholder="its result, as JSON">', "it ran"))
        out.append(form(hidden(kind="run_again"), "run it again"))
    where = f'data-run="{escape(run_id)}" class="box answer"' if back else 'class="box" id="answer"'
    return f"<section {where}>" + "".join(out) + "</section>"


def run_page(stored: DurableResult, inspector: str, visit: Visit, *, seen: str = "", following: int = 0) -> str:
    """A run's page: its status, the inspector (every turn), its conversation, and, when it
    waits and actions are allowed, the answers that fit. While the run is queued or running,
    the page listens for its changes since `seen` (what the page shows, as the events
    route digests it) and reloads at the first, unless the user has typed into it (a fork's
    patch): then it says the run moved on, and keeps what they typed. `following`: the
    question it waits on (its number) was just answered from this page, so the page offers no answer
    and follows the run until it takes the answer up (it waits again, or ends)."""
    token_query, csrf, note = visit.token_query, visit.csrf, visit.note
    head = (f"<h2>run {escape(stored.run_id)} · {escape(stored.loop or '?')} · "
            f'<span class="status-{escape(stored.status)}" id="status">{escape(stored.status)}</span>'
            + (f" · {escape(stored.reason)}" if stored.reason else "") + "</h2>"
            f"<p>goal: {escape(stored.goal or '')}</p>")
    origin = stored.forked_from
    if origin is not None:
        parent = f'<a href="{escape(run_path(origin.run_id))}?{escape(token_query)}">{escape(origin.run_id)}</a>'
        patched = (f"; transition {origin.transition} patched: <code>{escape(json.dumps(origin.patch))}</code>"
                   if origin.patch else f"; live from transition {origin.transition}")
        head += f'<p class="box" id="forked-from">forked from run {parent} at transition {origin.transition}{patched}</p>'
    if stored.answer_text is not None:
        head += f"<p>answer: {escape(stored.answer_text)}</p>"
    if stored.summary and stored.waiting is None:  # a waiting run's answer box says where it waits
        head += f'<p class="box">{escape(stored.summary)}</p>'
    if stored.error and stored.error not in (stored.summary or ""):
        head += f'<p class="box status-error" id="error">error: {escape(stored.error)}</p>'
    if note:
        head += f'<p class="box note" id="note">{escape(note)}</p>'
    actions = ""
    if following:
        actions = ('<p class="box note" id="following">Your answer is sent: this page follows the run and shows '
                   "where it goes next.</p>")
    elif stored.waiting is not None and csrf is not None:
        actions = answer_forms(stored.run_id, stored.waiting, csrf, token_query)
    if csrf is not None and stored.status in ("queued", "running", "waiting"):
        actions += (f'<form method="post" action="{escape(run_path(stored.run_id, "/cancel") + "?" + token_query)}">'
                    f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
                    '<button class="secondary">cancel the run</button></form>')
    if csrf is not None and stored.traces:
        actions += fork_form(stored.run_id, len(stored.traces[0]), csrf, token_query, stored.legacy)
    talk = conversation(stored.state.messages) if stored.state is not None else ""
    events = run_path(stored.run_id, "/events") + f"?{token_query}&{urlencode({'seen': seen})}" + \
        (f"&answered={following}" if following else "")
    fresh = run_path(stored.run_id) + f"?{token_query}"  # a reload drops what an answer's redirect added
    # a page the user has typed into is not reloaded under them: it says the run moved on instead
    live = ('<p class="box note" id="moved" hidden>the run has moved on since this page was made: '
            f'<a href="{escape(fresh)}">reload it</a> (what you typed here is kept until you do)</p>'
            "<script>(function(){var s=new EventSource(" + json.dumps(events) + "),typed=false;"
            'document.addEventListener("input",function(){typed=true});'
            's.onmessage=function(){if(!typed){location.replace(' + json.dumps(fresh) + ');return}'
            'document.getElementById("moved").hidden=false;s.close()};})();</script>'
            if stored.status in ("queued", "running") or following else "")
    return _page(f"forge ui · {stored.run_id}", head + actions + inspector + talk + live, visit)


def inbox_page(waiting: Sequence[tuple[RunRow, Waiting | None]], visit: Visit, *, page: int = 0,
               more: bool = False) -> str:
    """The runs that wait for an answer, a page at a time (`page`, `more` after it), with
    what each waits for — the call and its arguments — and, when actions are allowed
    (`visit.csrf`), the answers that fit, answered from here (each returns to the inbox).
    `visit.waiting` is how many wait in all (the navigation's badge: counted up to 500)."""
    token_query, csrf, note, count = visit.token_query, visit.csrf, visit.note, visit.waiting
    told = f'<p class="box note" id="note">{escape(note)}</p>' if note else ""
    if not waiting and not page:
        return _page("forge ui · inbox", told + '<p class="box">nothing waits for an answer</p>',
                     replace(visit, waiting=0))
    items = []
    for row, asked in waiting:
        link = f'<a href="{escape(run_path(row.run_id))}?{escape(token_query)}">{escape(row.run_id)}</a>'
        call = ""
        if asked is not None and asked.tool:
            call = (f'<p>call <code>{escape(asked.tool)}</code> with '
                    f"<code>{escape(json.dumps(dict(asked.arguments), default=str))}</code></p>")
        forms = (answer_forms(row.run_id, asked, csrf, token_query, back="inbox")
                 if asked is not None and csrf is not None else f"<p>{escape(row.question or '')}</p>")
        items.append(f'<div class="box" data-run="{escape(row.run_id)}">{link} · {escape(row.goal)}{call}{forms}</div>')
    shown = len(waiting) if count is None else count
    pager = ""
    if page or more:
        link = f"/inbox?{token_query}&page="
        pager = (f"<p>page {page + 1}" + (f' · <a href="{escape(link)}{page - 1}">newer</a>' if page > 0 else "")
                 + (f' · <a href="{escape(link)}{page + 1}" rel="next">older</a>' if more else "") + "</p>")
    return _page("forge ui · inbox", f"{told}<h2>waiting for you: {shown}{'+' if shown >= 500 else ''}</h2>"
                 f"{''.join(items)}{pager}", replace(visit, waiting=shown))


def loop_html(name: str, svg: str, runs: int, visit: Visit) -> str:
    """A loop's page: its definition with, per edge, what its finished runs did there."""
    return _page(f"forge ui · {name}", f"<h2>loop {escape(name)} · {runs} finished runs</h2>"
                 f'<div class="box" id="many-runs">{svg}</div>', visit)


def fork_form(run_id: str, transitions: int, csrf: str, token_query: str, legacy: bool = False) -> str:
    """Fork the run at a transition — the one selected in the inspector, as it is selected —
    optionally patching the outcome recorded there; what a fork may be asked is said beside it."""
    script = ('<script>document.addEventListener("forge-inspector-select",function(e){'
              'var at=document.querySelector("#fork input[name=at]");if(at){at.value=e.detail.sequence;'
              'document.getElementById("fork-at").textContent=e.detail.sequence}});</script>')
    return (f'<form method="post" action="{escape(run_path(run_id, "/fork") + "?" + token_query)}" class="box" id="fork">'
            f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
            f'fork at the selected transition, #<span id="fork-at">{transitions}</span> '
            f'<input name="at" type="number" min="1" max="{transitions}" value="{transitions}" '
            'aria-label="the transition to fork at"> '
            'with the outcome there replaced by (optional, a forge Patch as JSON) '
            '<textarea name="patch" rows="2" placeholder=\'{"tool_result": "…"}\'></textarea>'
            '<p class="why">The fork replays transitions 1 to the one before it, calling nothing, and goes on live '
            f"from it; any of 1 to {transitions}"
            + (" (a run stored by an earlier forge forks within its first turn only)" if legacy else "")
            + ". A patch must fit the call recorded there (a tool's result or "
            "error for a tool call, a decision for the policy's, a verdict for verify or an approval): one that "
            "does not is refused before anything runs.</p>"
            + script +
            "<button type=\"submit\" class=\"secondary\">fork</button></form>")
