"""See a run: `forge.inspect.html(result_or_trace)` is a self-contained HTML page that
replays the run on its diagram (`forge inspect RUN.jsonl -o run.html` writes one)."""

from forge.inspect.page import html, page_data, write

__all__ = ["html", "page_data", "write"]
