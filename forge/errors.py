"""The root of forge's own errors, so that a program (and forge's command line) can tell
forge's refusals apart from its own bugs: `except ForgeError` catches every error forge
raises on purpose, and each also keeps its standard base (ValueError, RuntimeError, …).

Errors a tool raises to tell the loop what happened (`TransientToolError`,
`PermanentToolError`, `ToolError`) are forge's types too.
"""

from __future__ import annotations

__all__ = ["ForgeError", "UsageError"]


class ForgeError(Exception):
    """Raised by forge on purpose: bad input, a refused definition, a run that cannot go on."""


class UsageError(ForgeError, ValueError):
    """A command or call was given something it cannot use (a format, a folder, a name);
    the message says what and how to fix it."""
