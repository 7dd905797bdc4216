"""The `forge` command: a thin face over the library. Each subcommand calls a function users
could call from Python; errors users can fix print one line, never a traceback.

The commands come in groups, a module each (`local`, `drawing`, `debugging`, `durable`,
`checking`, `serving`): each command is one function that adds it with its own flags and
one that runs it. Each command imports what it needs when it runs, so `forge diagram` does
not load the checker, the demo or the debugger. What forge refuses on purpose is a
ForgeError, told in one line (`forge.cli.exits`); anything else is a bug, and keeps its
traceback for the report.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from forge.cli import checking, debugging, drawing, durable, local, serving
from forge.cli.arguments import Parser
from forge.cli.durable import DEAD_AFTER, HEARTBEAT, RUN_STATUSES
from forge.cli.exits import EXIT_CODES, EXITS, USER_ERRORS, exit_code, one_line

__all__ = ["COMMANDS", "DEAD_AFTER", "EXITS", "EXIT_CODES", "HEARTBEAT", "RUN_STATUSES", "exit_code", "main",
           "one_line", "reference_markdown"]


def _parser() -> argparse.ArgumentParser:
    """forge's command line: one function adds each command (`COMMANDS`), with its own flags."""
    parser = Parser(prog="forge", description="An agent's tool loop as an explicit state machine.")
    parser.add_argument("--version", action="version", version=f"forge {_installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for add in COMMANDS:
        add(commands)
    return parser


COMMANDS: tuple[Callable[[Any], None], ...] = (
    local.run_command,
    local.demo_command,
    local.examples_command,
    drawing.diagram_command,
    drawing.diagrams_command,
    debugging.debug_command,
    debugging.replay_command,
    durable.runs_command,
    debugging.diff_command,
    checking.cover_command,
    durable.submit_command,
    durable.worker_command,
    debugging.inspect_command,
    checking.eval_command,
    serving.serve_command,
    checking.check_command,
    serving.ui_command,
    serving.tools_command,
)
"""What `forge` offers, in the order `forge --help` lists it: each adds its command."""


def reference_markdown() -> str:
    """The command line's reference page (`docs/cli.md`): `forge --help` and each command's
    help, as argparse prints them at 100 columns. Regenerate the page with
    `python -c "from forge.cli import reference_markdown as r; print(r(), end='')" > docs/cli.md`;
    a test keeps it equal to this."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = _parser()
        commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
        parts = ["# The command line\n\nEvery command, as `forge COMMAND --help` prints it.\n\n", EXITS,
                 "```text\n" + parser.format_help() + "```\n"]
        for name, sub in commands.choices.items():
            parts.append(f"\n## forge {name}\n\n```text\n{sub.format_help()}```\n")
            verbs = next((a for a in sub._actions if isinstance(a, argparse._SubParsersAction)), None)
            for verb, under in (verbs.choices.items() if verbs is not None else ()):
                parts.append(f"\n### forge {name} {verb}\n\n```text\n{under.format_help()}```\n")
        return "".join(parts).replace("usage: forge", "forge")
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def _installed_version() -> str:
    import forge

    return str(forge.__version__)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except USER_ERRORS as error:
        print(f"forge: error: {one_line(str(error))}", file=sys.stderr)
        return int(getattr(args, "error_code", 1))
    except KeyboardInterrupt:
        return 130
