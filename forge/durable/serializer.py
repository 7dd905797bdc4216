"""How a durable run's values are stored: as JSON in forge's wire form, nowhere as pickle.

Everything forge keeps of a run in the runs' database is the wire form
(`forge.records.wire`): what DBOS stores for it (the workflow's inputs and result, the
events a run publishes, the answers sent to it, the errors a workflow raised) through
`WireSerializer`, given to DBOS and to every `DBOSClient` forge opens; and forge's own
rows, a journal's calls and a side effect's value (`row`, `from_row`), as UTF-8 JSON. So any
process reads any run without the user's modules, and a row runs no code when read.

Rows an earlier forge stored as pickles are read by `forge.durable.legacy`, which runs no
code either: `LegacyRows` takes the place of DBOS's own pickle serializer. DBOS goes on
writing a workflow's values with the serializer its first row named, so a run an earlier
forge began and today's forge carries on (recovered, or answered) is labelled `py_pickle`
to the end; what today's forge writes for it is the wire form all the same (`LEGACY_JSON`
then the JSON text).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from dbos import Serializer

from forge.durable.legacy import is_legacy, read_legacy
from forge.records.wire import decode, encode

__all__ = ["LEGACY_JSON", "SERIALIZER", "LegacyRows", "WireSerializer", "from_row", "row"]


class WireSerializer(Serializer):
    """DBOS's serializer for forge's values: the wire form as compact JSON text. A value is
    read back as its JSON data, for its reader to decode with the loop's codec where it has
    it (a run's state, `decode`), except a workflow's error, which DBOS needs as an
    exception (a recorded one, `forge.records.recorded`)."""

    def name(self) -> str:
        return "forge_wire"

    def serialize(self, data: Any) -> str:
        """JSON text of `data`: JSON data as it is (what forge hands DBOS, in the wire form
        already), anything else in the wire form (a workflow's error)."""
        try:
            return json.dumps(data, separators=(",", ":"), allow_nan=False)  # \u escapes: a lone surrogate too
        except (TypeError, ValueError):
            return json.dumps(encode(data), separators=(",", ":"))

    def deserialize(self, serialized_data: str) -> Any:
        data = json.loads(serialized_data)
        return decode(data) if isinstance(data, dict) and data.get("$forge") == "error" else data


SERIALIZER = WireSerializer()

LEGACY_JSON = "~"
"""What starts the wire form's text in a row labelled `py_pickle` (never a base64 pickle's)."""


class LegacyRows:
    """DBOS's pickle serializer as forge has it: a row labelled `py_pickle` is read by
    `forge.durable.legacy.read_legacy` (no code it names runs), or is today's wire form after
    `LEGACY_JSON`; what it writes is the wire form (see the module)."""

    def name(self) -> str:
        return "py_pickle"

    def serialize(self, data: Any) -> str:
        return LEGACY_JSON + SERIALIZER.serialize(data)

    def deserialize(self, serialized_data: str) -> Any:
        if serialized_data.startswith(LEGACY_JSON):
            return SERIALIZER.deserialize(serialized_data[len(LEGACY_JSON):])
        return read_legacy(base64.b64decode(serialized_data))


def _reading_legacy_rows() -> None:
    """Put `LegacyRows` where DBOS reads and writes its `py_pickle` rows (its module's
    `DBOSDefaultSerializer`, which it looks up each time), once per process; checked
    against the DBOS versions `forge.durable.worker.CHECKED_DBOS` names."""
    from dbos import _serialization

    if not isinstance(_serialization.DBOSDefaultSerializer, LegacyRows):
        _serialization.DBOSDefaultSerializer = LegacyRows()  # type: ignore[assignment]


_reading_legacy_rows()


def row(value: Any) -> bytes:
    """A row of forge's own tables: `value` (wire form data, JSON already) as UTF-8 JSON."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def from_row(data: bytes) -> Any:
    """The JSON data a row holds (`row`), or for a row an earlier forge stored, the value its
    pickle holds (`forge.durable.legacy.read_legacy`)."""
    return read_legacy(data) if is_legacy(data) else json.loads(data.decode("utf-8", "surrogatepass"))
