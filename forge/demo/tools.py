"""The demo agent's tools: confined file access and a real HTTP call."""

from __future__ import annotations

import email.utils
import json
import time
import urllib.error
import urllib.request
from typing import Any

from forge.agent.retry import PermanentToolError, TransientToolError
from forge.demo.workspace import Workspace
from forge.tools import Tool

__all__ = ["analyse_tool", "file_tools", "parse_retry_after"]

_TRANSIENT_HTTP = frozenset({429, 502, 503, 504})


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date); None if absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def file_tools(workspace: Workspace) -> list[Tool]:
    """list_notes, read_note and write_file (side-effecting), all confined to `workspace`."""

    def list_notes(folder: str) -> list[str]:
        return workspace.list_notes(folder)

    def read_note(path: str) -> dict[str, str]:
        return {"path": path, "text": workspace.read(path)}

    def write_file(path: str, text: str) -> dict[str, Any]:
        return {"path": path, "bytes": workspace.write(path, text)}

    return [
        Tool("list_notes", {"fs", "list"}, list_notes, required={"folder"}),
        Tool("read_note", {"fs", "read"}, read_note, required={"path"}),
        Tool("write_file", {"fs", "write"}, write_file, required={"path", "text"}, side_effect=True),
    ]


def analyse_tool(base_url: str, timeout: float = 2.0) -> Tool:
    """`analyse(path, text)`: POST the text to the analysis service; 5xx/429 and refused
    connections are transient (the server's Retry-After is carried along), other HTTP errors
    permanent."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def analyse(path: str, text: str) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{base_url}/analyse", data=json.dumps({"text": text}).encode(),
            headers={"Content-Type": "application/json"}, method="POST",
        )
        try:
            with opener.open(request, timeout=timeout) as response:
                body = json.load(response)
        except urllib.error.HTTPError as error:
            if error.code in _TRANSIENT_HTTP:
                raise TransientToolError(f"HTTP {error.code} from the analysis service",
                                         retry_after=parse_retry_after(error.headers.get("Retry-After"))) from None
            raise PermanentToolError(f"HTTP {error.code} from the analysis service") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            raise TransientToolError(f"analysis service unreachable: {error}") from None
        return {"path": path, "title": body["title"], "words": body["words"]}

    return Tool("analyse", {"http", "analyse"}, analyse, required={"path", "text"})
