"""A case's model calls outside its runs — a model-played user's, a judge's — recorded and
answered again, so a judged or simulated conversation replays offline as its runs do.

A run's own model calls are in its journal; these are not part of any run, so the case
keeps them on a tape of its own (`calls.jsonl` in the case's cassette folder): one JSON
object per line, `{"kind": "user" | "judge", "request": {…}, "reply": {…}}`, sorted keys.
A call is answered from the tape when the tape's next call of that kind asked the same
request; otherwise it is sent live (`ChatPolicy.send`, the seam the policy itself uses),
unless the tape is offline: then `TapeMiss` names the first field that differs.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from forge.errors import ForgeError, UsageError
from forge.files import write_atomically
from forge.machine.cassette import timeless_usage
from forge.records.journal import first_difference

__all__ = ["ModelTape", "TapeMiss"]


class TapeMiss(ForgeError, LookupError):
    """An offline case made a model call its tape does not have (none left of that kind, or
    another request): nothing was sent."""


class ModelTape:
    """The tape of one case (see the module): `recorded` calls to answer from, `offline`
    refusing any other, and every call made kept in `calls` (written by `save`)."""

    def __init__(self, recorded: list[dict[str, Any]] | None = None, *, offline: bool = False) -> None:
        self._recorded = list(recorded or ())
        self.offline = offline
        self.calls: list[dict[str, Any]] = []
        self.live = 0
        self._lock = threading.Lock()

    @classmethod
    def read(cls, path: Path, *, offline: bool = False) -> ModelTape:
        """The tape at `path` (an empty one when there is no file).

        Raises:
            ValueError: a line is not a JSON object with kind, request and reply.
        """
        recorded = []
        if path.exists():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    call = json.loads(line)
                except json.JSONDecodeError as error:
                    raise UsageError(f"{path}:{number}: not JSON: {error}") from None
                if not isinstance(call, dict) or not {"kind", "request", "reply"} <= set(call):
                    raise UsageError(f"{path}:{number}: a tape line has kind, request and reply")
                recorded.append(call)
        return cls(recorded, offline=offline)

    def save(self, path: Path) -> Path | None:
        """Write the calls made to `path` (none made: nothing written, None)."""
        if not self.calls:
            return None
        return write_atomically(path, (json.dumps(call, sort_keys=True, separators=(",", ":")) + "\n"
                                       for call in self.calls))

    def _due(self, kind: str) -> dict[str, Any] | None:
        made = sum(1 for call in self.calls if call["kind"] == kind)
        of_kind = [call for call in self._recorded if call["kind"] == kind]
        return of_kind[made] if made < len(of_kind) else None

    def _answered(self, kind: str, request: Mapping[str, Any]) -> dict[str, Any] | None:
        due = self._due(kind)
        plain = json.loads(json.dumps(request))
        if due is not None and first_difference(due["request"], plain) is None:
            return dict(due["reply"])
        if self.offline:
            where = ("the tape has no more calls of that kind" if due is None
                     else f"the recorded request differs at {first_difference(due['request'], plain)}")
            raise TapeMiss(f"a {kind} model call is not on the case's tape ({where}); record the case again "
                           "with --record")
        return None

    def send(self, kind: str, policy: Any, request: Mapping[str, Any]) -> dict[str, Any]:
        """The reply to `request` (`{"message": …, "usage": …}`): the tape's, or `policy`'s
        (a `ChatPolicy`) sent live. Call it where no event loop runs (a worker thread).

        Raises:
            TapeMiss: the tape is offline and does not have the call.
            openai.OpenAIError, ModelError: as `ChatPolicy.send`, for a live call.
        """
        with self._lock:
            reply = self._answered(kind, request)
        if reply is None:
            reply = policy.send(dict(request))
            if inspect.isawaitable(reply):  # pragma: no cover - send is called from worker threads
                raise UsageError("ModelTape.send must be called where no event loop runs")
            self.live += 1
        usage = reply.get("usage")
        if isinstance(usage, dict):  # the clock's parts differ between any two recordings
            reply = {**reply, "usage": timeless_usage(usage)}
        with self._lock:
            self.calls.append({"kind": kind, "request": json.loads(json.dumps(request)), "reply": reply})
        return reply
