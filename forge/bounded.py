"""Values forge reads from outside — a model's reply, a client's request, a file — bounded in
depth and size before anything walks them.

Python's own parsers and validators recurse: a JSON value nested 100,000 deep raises
`RecursionError` from `json.loads`, pydantic or a recursive walk, far from where it came in
and with nothing saying what was wrong. Reading through `loads` (JSON text) or `checked`
(a value already parsed) turns that into `TooLarge`, a `ValueError` naming what was read
and which bound it broke, so the caller can tell it to whoever sent it: a model is told its
answer is invalid, a client gets a 400, a file read names the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from forge.errors import ForgeError

__all__ = ["MAX_DEPTH", "MAX_TEXT", "TooLarge", "checked", "loads"]

MAX_DEPTH = 100
"""How deeply lists and objects may nest in a value read from outside (JSON's own
interchange profile, I-JSON, leaves this to the reader; 100 is far beyond any real payload)."""

MAX_TEXT = 16 * 1024 * 1024
"""The most characters of JSON text read as one value."""


class TooLarge(ForgeError, ValueError):
    """A value read from outside nests deeper than `MAX_DEPTH` or is longer than `MAX_TEXT`.
    `what` names where it came from."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what} refused: {why}")
        self.what, self.why = what, why


def loads(text: str | bytes, what: str) -> Any:
    """`json.loads(text)`, bounded.

    Raises:
        TooLarge: the text is longer than MAX_TEXT, or its value nests deeper than MAX_DEPTH.
        json.JSONDecodeError: it is not JSON (as `json.loads`).
    """
    if len(text) > MAX_TEXT:
        raise TooLarge(what, f"{len(text):,} characters long, more than the {MAX_TEXT:,} read at most")
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooLarge(what, f"nested deeper than {MAX_DEPTH} levels") from None
    return checked(value, what)


def checked(value: Any, what: str) -> Any:
    """`value` itself, once it is known to nest no deeper than MAX_DEPTH (walked without
    recursion, so any depth is measured safely).

    Raises:
        TooLarge: it nests deeper than MAX_DEPTH.
    """
    if not isinstance(value, (Mapping, list, tuple)):
        return value
    level: list[Any] = [value]
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise TooLarge(what, f"nested deeper than {MAX_DEPTH} levels")
        below: list[Any] = []
        for each in level:
            inner = each.values() if isinstance(each, Mapping) else each
            below.extend(item for item in inner if isinstance(item, (Mapping, list, tuple)))
        level = below
    return value

