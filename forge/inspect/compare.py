"""Two runs on one page: `forge inspect A.jsonl --against B.jsonl`.

Both paths are drawn on the machine's diagram (edges each run took, in its own colour, and
the state where they diverged marked), with the timelines aligned transition by
transition beneath it: the rows before the divergence are the same in both runs and shown
once, dimmed; from the divergence on, each row shows what each run did and what differs
(`forge.machine.diff`). One self-contained HTML file, with no script.
"""

from __future__ import annotations

import html as html_text
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forge.diagram.dot import to_digraph
from forge.diagram.overlay import overlay_of
from forge.errors import UsageError
from forge.files import write_atomically
from forge.inspect.page import definition_of, inline_svg
from forge.machine.diff import Difference, RunDiff, diff, recorded_run
from forge.narrate import describe
from forge.records.definition import MachineDefinition
from forge.records.trace import TransitionRecord, quoted

__all__ = ["comparison_html", "write_comparison"]

_STYLE = """
body{font-family:Helvetica,Arial,sans-serif;margin:1.5rem;color:#222}
h1{font-size:1.3rem} .fc-names{color:#555} .fc-a{color:#1f77b4} .fc-b{color:#d35400}
.fc-diagram svg{max-width:100%;height:auto}
table{border-collapse:collapse;width:100%;font-size:.85rem;margin:1rem 0}
th,td{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
tr.fc-same td{color:#999} tr.fc-diverge td{border-top:3px solid #c62828}
tr.fc-differs td.fc-run{background:#fff4e5} td.fc-n{text-align:right;width:3rem}
code{white-space:pre-wrap;word-break:break-word}
"""


def comparison_html(a: Any, b: Any, definition: str | Path | MachineDefinition | None = None,
                    names: tuple[str, str] = ("A", "B")) -> str:
    """The comparison page of runs `a` and `b` (each a `LoopResult`, a trace file written
    with its journal, or `(records, journal)`); `names` say what each is (file names).

    Raises:
        UsageError: a run has no transitions, or the definition cannot be told.
        TraceMismatch: a trace is not a run of the definition.
        OSError, TraceFormatError: a file cannot be read.
    """
    records_a, journal_a = recorded_run(a)
    records_b, journal_b = recorded_run(b)
    if not records_a or not records_b:
        raise UsageError("both runs need transitions to compare")
    machine = definition_of(None, records_a, definition)
    found = diff((records_a, journal_a), (records_b, journal_b), names=("A", "B"))
    diverged = records_a[found.first - 1].source if found.first is not None and found.first <= len(records_a) else None
    svg = _svg(machine, records_a, records_b, diverged)
    rows = _timeline(records_a, records_b, found)
    differences = "".join(_difference_row(d) for d in found.differences[:200])
    more = (f"<p>… and {len(found.differences) - 200} more differences</p>" if len(found.differences) > 200 else "")
    e = html_text.escape
    heading = str(found).splitlines()[0]
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>forge · compare · {e(machine.name)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>forge · {e(machine.name)}: {e(heading)}</h1>"
        f'<p class="fc-names"><span class="fc-a">A</span> = {e(names[0])} · '
        f'<span class="fc-b">B</span> = {e(names[1])}</p>'
        f'<div class="fc-diagram">{svg}</div>'
        "<h2>Timelines</h2><table><thead><tr><th>#</th><th>A</th><th>B</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        + (f"<h2>What differs</h2><table><thead><tr><th>#</th><th>what</th><th>A</th><th>B</th></tr></thead>"
           f"<tbody>{differences}</tbody></table>{more}" if found.differences else "")
        + "</body></html>\n"
    )


def write_comparison(a: Any, b: Any, path: str | Path, definition: str | Path | MachineDefinition | None = None,
                     names: tuple[str, str] = ("A", "B")) -> Path:
    """Write `comparison_html(a, b, ...)` to `path` (parents created; written whole or not
    at all) and return the path."""
    return write_atomically(path, comparison_html(a, b, definition, names))


def _svg(definition: MachineDefinition, a: Sequence[TransitionRecord], b: Sequence[TransitionRecord],
         diverged: str | None) -> str:
    return inline_svg(to_digraph(definition, overlay_of(definition, a), against=overlay_of(definition, b),
                                 diverged=diverged))


def _timeline(a: Sequence[TransitionRecord], b: Sequence[TransitionRecord], found: RunDiff) -> str:
    differing = {d.transition for d in found.differences}
    rows = []
    for n in range(1, max(len(a), len(b)) + 1):
        kind = "fc-same" if found.first is None or n < found.first else (
            "fc-differs" if n in differing else "")
        if n == found.first:
            kind += " fc-diverge"
        shown_a = _record(a[n - 1]) if n <= len(a) else "—"
        shown_b = _record(b[n - 1]) if n <= len(b) else "—"
        mark = "◆ " if n == found.first else ""
        rows.append(f'<tr class="{kind.strip()}" id="t{n}"><td class="fc-n">{mark}{n}</td>'
                    f'<td class="fc-run"><code>{shown_a}</code></td><td class="fc-run"><code>{shown_b}</code></td></tr>')
    return "".join(rows)


def _record(record: TransitionRecord) -> str:
    return html_text.escape(quoted(describe(record).strip(), 300))


def _difference_row(difference: Difference) -> str:
    e = html_text.escape
    return (f'<tr><td class="fc-n"><a href="#t{difference.transition}">{difference.transition}</a></td>'
            f"<td>{e(difference.what)}</td><td><code>{e(difference.a)}</code></td>"
            f"<td><code>{e(difference.b)}</code></td></tr>")
