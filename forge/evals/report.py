"""The static HTML report of an eval: one page, no script, that a CI job keeps as an
artifact. A row per case — its score, how it ended, each scorer's verdict with its reason,
how it ran (replayed, live, departed) — and links that open each turn of its run in the
inspector (`forge.inspect` pages written beside it). With a baseline, each row says what
changed and where the runs diverge, and regressions are marked.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from forge.files import write_atomically

if TYPE_CHECKING:
    from forge.evals.compare import CaseChange, Comparison
    from forge.evals.results import CaseResult, EvalResults

__all__ = ["report_html", "write_report"]

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2rem;color:#1b1f24;background:#fff}
h1{font-size:1.4rem;margin:0 0 .25rem}p.summary{margin:0 0 1.25rem;color:#4b5563}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #e5e7eb;padding:.5rem;text-align:left;
vertical-align:top}th{font-size:.8rem;text-transform:uppercase;color:#6b7280}
.pass{color:#116329}.fail{color:#b42318}.regressed{background:#fef3f2}.why{color:#4b5563;font-size:.9rem}
a{color:#0b5cad}code{font-size:.85rem}
@media (prefers-color-scheme:dark){body{background:#111827;color:#e5e7eb}th{color:#9ca3af}
td,th{border-color:#374151}.regressed{background:#3b1219}.why,p.summary{color:#9ca3af}a{color:#7cb7ff}
.pass{color:#5ad17a}.fail{color:#ff8a80}}
"""


def report_html(results: EvalResults, against: Comparison | None = None) -> str:
    """The report's page (see the module)."""
    rows = []
    for case in results.cases:
        change = next((c for c in against.changes if c.name == case.name), None) if against is not None else None
        rows.append(_row(case, change))
    summary = f"{len(results.cases)} cases, score {results.score:.2f}"
    if against is not None:
        summary += (f" (baseline {against.scores[0]:.2f}); {len(against.regressions)} "
                    f"regression{'s' if len(against.regressions) != 1 else ''}")
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport "
            f"content='width=device-width,initial-scale=1'><title>forge eval: {escape(results.name)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>forge eval: {escape(results.name)}</h1>"
            f"<p class=summary>{escape(summary)}</p><table><thead><tr><th>case</th><th>score</th><th>ended in</th>"
            f"<th>scorers</th><th>ran</th><th>runs</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"</body></html>\n")


def _row(case: CaseResult, change: CaseChange | None) -> str:
    score = f"{case.score:.2f}"
    ended = escape(case.reason or "—")
    if change is not None and change.before is not None:
        score = f"{change.before.score:.2f} → {score}"
        if change.before.reason != case.reason:
            ended = f"{escape(change.before.reason or '—')} → {ended}"
    verdicts = [f"<div><span class={'pass' if held else 'fail'}>{'✔' if held else '✘'} {escape(name)}</span> "
                f"<span class=why>{escape(case.reasons.get(name, ''))}</span></div>"
                for name, held in case.assertions.items()]
    verdicts += [f"<div>{escape(name)}: {value:.2f} <span class=why>{escape(case.reasons.get(name, ''))}</span></div>"
                 for name, value in case.scores.items()]
    if case.error is not None:
        verdicts.append(f"<div class=fail>error: {escape(case.error)}</div>")
    if change is not None:
        if change.divergence is not None:
            verdicts.append(f"<div class=why>diverges from the baseline at {escape(str(change.divergence))}</div>")
        verdicts += [f"<div class=fail>regression: {escape(why)}</div>" for why in change.regressions]
    links = " ".join(f"<a href='{escape(Path(run).with_suffix('.html').as_posix())}'>turn {number}</a>"
                     for number, run in enumerate(case.runs, 1))
    marked = " class=regressed" if change is not None and change.regressed else ""
    return (f"<tr{marked}><td><b>{escape(case.name)}</b><div class=why>{escape(case.goal)}</div></td>"
            f"<td>{score}</td><td>{ended}</td><td>{''.join(verdicts) or '—'}</td>"
            f"<td>{escape(', '.join(case.modes)) or '—'}</td><td>{links or '—'}</td></tr>")


def write_report(results: EvalResults, path: str | Path, against: Comparison | None = None) -> Path:
    """Write `report_html(results, against)` to `path` and return it."""
    return write_atomically(path, report_html(results, against))
