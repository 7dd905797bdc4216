"""The run inspector: one self-contained HTML page (inline SVG, script and style; nothing
fetched) that replays a run on its diagram, transition by transition.

The page carries the trace as compact JSON: each distinct edge, guard tuple, verdict and
detail is written once and records refer to them by index, so a 10,000-transition run is a
few hundred kilobytes, and the script draws only the rows of the timeline that are visible.
"""

from __future__ import annotations

import html as html_text
import json
import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

from forge.diagram.dot import to_digraph
from forge.diagram.overlay import overlay_of, records_of, transition_of
from forge.diagram.render import GraphvizNotInstalled, image_of
from forge.errors import UsageError
from forge.files import write_atomically
from forge.machine.loader import load_definition
from forge.records.definition import MachineDefinition
from forge.records.details import repeated_call
from forge.records.tally import steps_taken, timing
from forge.records.trace import TransitionRecord, capped

__all__ = ["definition_of", "html", "inline_svg", "page_data", "write"]


def html(run: Any, definition: str | Path | MachineDefinition | None = None, *, title: str | None = None,
         fragment: bool = False, running: bool = False, children: Sequence[Any] | None = None) -> str:
    """The inspector page of `run`: a `LoopResult`, a trace (records, as `read_trace` gives),
    or anything with a `.trace` (a debug session).

    `definition` is the machine the run went through; by default the result's own, else the
    built-in definition the trace names. `fragment` gives a `<div>` to embed in another page
    (what Jupyter shows) instead of a whole document. `running` says the run goes on past
    its last transition (what `forge ui` shows of a running run): the banner says where it
    is now rather than where its trace stops. Without Graphviz's `dot` the page has
    everything but the diagram, and says why.

    Each child run of the run (`children`, default the result's `children`: a `ChildRun`
    each, or anything with `path`, `tool`, `transition` and a `trace` and `summary` of its
    own or in its `result`) has its own inspector on the page, folded under a line naming the
    call that made it, and the calling transition's panel opens it.

    Raises:
        UsageError: the run has no transitions, or its machine cannot be told.
        FileNotFoundError, DefinitionError: the definition cannot be loaded.
        TraceMismatch: the trace is not a run of the definition.
    """
    records = records_of(run)
    if not records:
        raise UsageError("the run has no transitions to inspect")
    machine = definition_of(run, records, definition)
    data = page_data(machine, records, summary=getattr(run, "summary", None), running=running)
    root = f"fi-{os.urandom(4).hex()}"
    children = [child for child in (getattr(run, "children", ()) if children is None else children)
                if len(getattr(_ran(child), "trace", ()))]
    data["children"] = [{"path": child.path, "name": child.path.rsplit("/", 1)[-1], "tool": child.tool,
                         "transition": child.transition, "anchor": f"{root}-child-{number}",
                         "summary": getattr(_ran(child), "summary", "") or ""} for number, child in enumerate(children)]
    body = _body(root, data, _svg(machine, records)) + _children(root, children)
    if fragment:
        return body
    heading = title or f"forge · {data['machine']} · run {data['run_id'] or '(no id)'}"
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html_text.escape(heading)}</title></head><body class=\"fi-page\">{body}</body></html>\n")


def write(run: Any, path: str | Path, definition: str | Path | MachineDefinition | None = None,
          title: str | None = None) -> Path:
    """Write `html(run, definition)` to `path` (parents created) and return the path."""
    return write_atomically(path, html(run, definition, title=title))


def definition_of(run: Any, records: Sequence[TransitionRecord],
                  definition: str | Path | MachineDefinition | None) -> MachineDefinition:
    """The machine a run went through: `definition` when given (loaded if a name or path),
    else the run's own (a LoopResult's), else the built-in one its records name.

    Raises:
        UsageError: the records name no machine.
    """
    if isinstance(definition, MachineDefinition):
        return definition
    if definition is not None:
        return load_definition(definition)
    own = getattr(run, "definition", None)
    if isinstance(own, MachineDefinition):
        return own
    name = records[0].machine
    if not name:
        raise UsageError("the trace does not name its machine; pass the definition it ran: "
                         "forge inspect TRACE --machine PATH, or html(records, definition=PATH)")
    return load_definition(name)


def page_data(definition: MachineDefinition, records: Sequence[TransitionRecord],
              summary: str | None = None, running: bool = False) -> dict[str, Any]:
    """What the page's script reads: tables of distinct edges, guard tuples, verdicts and
    details, and one short row per record referring to them (see the module); `running` as
    `html` says."""
    overlay = overlay_of(definition, records)
    edges: _Table = _Table()
    guards: _Table = _Table()
    verdicts: _Table = _Table()
    details: _Table = _Table()
    rows: list[list[Any]] = []
    first = next((r.at for r in records if r.at), 0.0)
    for record in records:
        transition = transition_of(definition, record)
        element = f"fail-{record.source}" if transition.index < 0 else f"edge-{transition.index}"
        edge = edges.index([record.source, record.trigger, record.dest, element])
        rows.append([
            edge, record.step, verdicts.index(record.verdict), guards.index([[g.name, g.value] for g in record.guards]),
            details.index(capped(dict(record.detail), PAGE_TEXT_LIMIT)), round(record.duration_s * 1000, 3),
            round((record.at - first) * 1000, 1) if record.at and first else None,
        ])
    end = definition.state(overlay.position)
    last = records[-1]
    return {
        "machine": definition.title or definition.name,
        "run_id": last.run_id,
        "started": _iso(first),
        "end": {"state": overlay.position, "finished": overlay.finished and not running, "outcome": end.outcome,
                **({"running": True} if running else {}),
                "summary": summary or (f"under way: {len(records)} transitions so far, the latest into {overlay.position}"
                                       if running else
                                       _summary(overlay.position, end.outcome, overlay.finished, last, records))},
        "steps": steps_taken(definition, records),
        "took": str(timing(definition, records) or ""),
        "edges": edges.items, "guards": guards.items, "verdicts": verdicts.items, "details": details.items,
        "records": rows,
    }


PAGE_TEXT_LIMIT = 400
"""How much of any one text in a detail (arguments, payload, error, a message) the page
shows: a 10,000-transition run stays under 5 MB even when every call sends and returns the
trace's full 1,000 characters; the trace file itself keeps them."""


class _Table:
    """Distinct values in first-seen order; `index` gives a value's position."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._positions: dict[str, int] = {}

    def index(self, value: Any) -> int:
        key = json.dumps(value, sort_keys=True, default=str)
        position = self._positions.get(key)
        if position is None:
            position = self._positions[key] = len(self.items)
            self.items.append(json.loads(key))
        return position


def _summary(state: str, outcome: str | None, finished: bool, last: TransitionRecord,
             records: Sequence[TransitionRecord] = ()) -> str:
    if not finished:
        return f"the trace stops in {state}, before the run ended"
    text = f"waits in {state} for an answer, in step {last.step}" if outcome == "needs_input" else \
        f"ended in {state}" + (f" ({outcome})" if outcome else "")
    error = last.detail.get("error")
    if error:
        return f"{text}: {error}"
    if state == "repeated_action":
        repeated = repeated_call(records)
        if repeated is not None:
            return f"{text}: {repeated}"
    return text


def _iso(at: float) -> str | None:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z") if at else None


def _svg(definition: MachineDefinition, records: Iterable[TransitionRecord]) -> str:
    return inline_svg(to_digraph(definition, overlay_of(definition, records), ids=True))


def inline_svg(graph: Any) -> str:
    """`graph` (a graphviz.Digraph) as an `<svg>` element to put in a page; without
    Graphviz's `dot`, a paragraph saying why there is no diagram."""
    try:
        image = image_of(graph.source, "svg")
    except GraphvizNotInstalled as missing:
        return f'<p class="fi-missing">No diagram: {html_text.escape(str(missing))}</p>'
    text = image.decode("utf-8")
    return text[text.index("<svg"):]


def _finite(value: Any) -> Any:
    """`value` with NaN and infinities as their text: JSON has no such numbers, and the
    page's script parses its data as JSON (a trace written by Python may hold them)."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _children(root: str, children: Sequence[Any]) -> str:
    """Each child run's own inspector (`AgentLoop.as_tool`), folded under a line that says
    which call made it; the parent's panel links the calling transition to it. A child the
    inspector cannot draw (its machine unknown here) says why in its place."""
    if not children:
        return ""
    folded = []
    for number, child in enumerate(children):
        ran = _ran(child)
        try:
            inside = html(ran, fragment=True)
        except (UsageError, FileNotFoundError, ValueError) as error:
            inside = f'<p class="fi-child-missing">the inspector cannot draw this child run: {html_text.escape(str(error))}</p>'
        folded.append(
            f'<details class="fi-child" id="{root}-child-{number}" data-path="{html_text.escape(child.path)}">'
            f"<summary>child run <strong>{html_text.escape(child.path.rsplit('/', 1)[-1])}</strong> · "
            f"{html_text.escape(child.tool)} at transition {child.transition} · "
            f"{html_text.escape(getattr(ran, 'summary', '') or '')}</summary>{inside}</details>")
    return f'<section class="fi-children" aria-label="child runs">{"".join(folded)}</section>'


def _ran(child: Any) -> Any:
    """A child run's own run: a `ChildRun`'s result, or the child itself when it carries its
    trace (a stored one)."""
    return getattr(child, "result", child)


def _asset(name: str) -> str:
    return files("forge.inspect").joinpath(name).read_text(encoding="utf-8")


def _body(root: str, data: dict[str, Any], svg: str) -> str:
    """The inspector's markup, its style and script, and the data, all inline. The data is
    JSON inside a script element, with `<` escaped so no value can end that element."""
    payload = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), default=str).replace("<", "\\u003c")
    return (
        f'<div class="forge-inspector" id="{root}" tabindex="-1">'
        f"<style>{_asset('inspector.css')}</style>"
        f'<div class="fi-diagram-source" hidden>{svg}</div>'
        "</div>"
        f'<script type="application/json" id="{root}-data">{payload}</script>'
        f"<script>{_asset('inspector.js')}\n"
        f"forgeInspector(document.getElementById({json.dumps(root)}), "
        f"JSON.parse(document.getElementById({json.dumps(root + '-data')}).textContent));</script>"
    )
