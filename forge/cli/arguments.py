"""How the command line's words are read: argparse's parser telling a line it cannot read in
one line, and the types of the flags that take numbers (seconds, ports, counts), each
refusing a bad value by naming it."""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["Parser", "port", "positive", "positive_seconds", "seconds"]


class Parser(argparse.ArgumentParser):
    """argparse's parser, telling a command line it cannot read in one line (the usage is
    one `--help` away) and exiting 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, got {text}")
    return value


def positive_seconds(text: str) -> float:
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return value


def port(text: str) -> int:
    value = _whole(text, "a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value


def positive(text: str) -> int:
    value = _whole(text, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _whole(text: str, what: str) -> int:
    """`text` as a whole number, or refused as not being `what`."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
