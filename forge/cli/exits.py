"""How a `forge` command ends: its exit code (the same meaning for every command, `EXITS`)
and, for what forge refuses on purpose, one line on standard error, never a traceback."""

from __future__ import annotations

from forge.errors import ForgeError

__all__ = ["EXITS", "EXIT_CODES", "USER_ERRORS", "exit_code", "one_line"]


EXIT_CODES = {"success": 0, "failure": 1, "needs_input": 3}
"""How `forge run` and `forge demo` exit: by the outcome of the run's terminal state (2 is
argparse's, for a command line it cannot read; 1 also for an error before the run)."""


EXITS = "".join((
    "What a command's exit code means, the same for every command:\n\n| code | meaning |\n|------|---------|\n",
    "| 0 | done: the run finished in success (`forge run`, `demo`, `runs follow`), or the command did what it "
    "was asked |\n",
    "| 1 | failed: the run ended in failure, or the command was refused, told in one line on stderr |\n",
    "| 2 | a command line forge cannot read (argparse's); and a refusal of the commands whose 1 means \"no\" (`diff`: "
    "the runs differ; `eval`: a gate failed) or that a script waits on (`submit`, `ui`) |\n",
    "| 3 | needs input: the run waits for a person (`forge run`, `demo`, `runs follow`) |\n\n",
))
"""docs/cli.md's table of exit codes (`EXIT_CODES` for a run's outcome)."""


def exit_code(outcome: str | None) -> int:
    return EXIT_CODES.get(outcome or "failure", 1)


def one_line(message: str) -> str:
    """`message` on one line: a refusal that lists several problems keeps them all."""
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


USER_ERRORS = (ForgeError, OSError)
"""What a command tells in one line: what forge refuses on purpose (a ForgeError) and what
the system refuses (a file it cannot read). Anything else is a bug, and keeps its traceback
for the report."""
