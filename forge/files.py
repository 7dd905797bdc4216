"""Writing forge's output files whole or not at all.

Every file forge writes (a trace, an inspector page, a diagram, a cassette, generated tests)
is written to a temporary file beside it and renamed over the target, so a failure halfway
(a value that cannot be encoded, a full disk, Ctrl-C) leaves the old file as it was, never a
truncated one. Text is UTF-8; a lone surrogate (text decoded from broken bytes) is written
as its `\\udXXX` escape rather than failing the write.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["valid_text", "write_atomically"]


ERRORS = "backslashreplace"
"""How text is made UTF-8 wherever forge writes or shows it: a lone surrogate as its escape."""


def valid_text(text: str) -> str:
    """`text` as valid Unicode, which any UTF-8 writer (a page, a database) can take: a lone
    surrogate (text decoded from broken bytes, a goal or a run id that holds one) becomes its
    `\\udXXX` escape."""
    return text.encode("utf-8", ERRORS).decode("utf-8")


def write_atomically(path: str | os.PathLike[str], content: str | bytes | Iterable[str]) -> Path:
    """Write `content` (text, bytes, or text in pieces, written as they come: a long trace
    is never held whole) to `path` (parents created) whole or not at all; return the path.

    Raises:
        OSError: the file cannot be written (the target is left as it was).
        Whatever producing the pieces raises (the target is left as it was).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    pieces = [content] if isinstance(content, (str, bytes)) else content
    try:
        with temporary.open("wb") as out:
            for piece in pieces:
                out.write(piece if isinstance(piece, bytes) else piece.encode("utf-8", ERRORS))
        temporary.replace(target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return target
