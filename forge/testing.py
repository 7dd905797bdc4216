"""forge's pytest plugin: cassettes, so an agent's test calls no model and no tool in CI.

Installed with forge (the `pytest11` entry point), so there is nothing to set up::

    def test_the_agent_files_the_notes(cassette):
        result = cassette.run(loop, "file the notes")
        assert result.reason == "verified_success"

The first run records the run's journal (every policy decision with the messages the model
added, every tool outcome, verify and approver answer) and its trace to
`cassettes/NAME.jsonl` beside the test file (NAME: the test's name, or the one given with
`@pytest.mark.forge_cassette("NAME")`). Every later run replays it (`AgentLoop.replay`):
nothing reaches the network or a tool. A replay that makes a call the cassette does not
have there fails the test with the first diverging call, expected against got.

`--forge-record=none|new|all` chooses what is recorded: `none` records nothing (a missing
cassette fails the test), `new` (the default) records missing cassettes, `all` records every
cassette again. `--forge-rerecord-from-divergence` makes a diverging replay record from the
divergence on instead of failing: the calls before it stay as recorded.

Cassettes are meant to be reviewed: one JSON object per line with sorted keys, no clock
times or durations, the run id set to the cassette's name, and the loop's `redact` applied
to arguments, results and messages, so no secret it masks reaches the file. `redact` should
keep a value's type (a masked string for a string): the replay checks calls with the masked
values.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from forge.errors import UsageError
from forge.machine.cassette import write_cassette
from forge.machine.redaction import redacted_journal
from forge.records.journal import JournalMiss

if TYPE_CHECKING:
    from forge.loop import AgentLoop
    from forge.result import LoopResult

__all__ = ["RECORD_MODES", "Cassette", "cassette", "redacted_journal", "write_cassette"]

RECORD_MODES = ("none", "new", "all")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("forge", "forge cassettes")
    group.addoption("--forge-record", choices=RECORD_MODES, default="new",
                    help="which forge cassettes to record: none, new (missing ones; the default) or all")
    group.addoption("--forge-rerecord-from-divergence", action="store_true",
                    help="a cassette whose replay diverges is recorded again from the divergence on")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "forge_cassette(name): the forge cassette this test records and replays")


class Cassette:
    """One test's cassette at `path`: `run(loop, goal)` records or replays a run of it.

    `mode` is `--forge-record`'s; `rerecord` is `--forge-rerecord-from-divergence`.
    `recorded` says whether the last `run` recorded (rather than replayed)."""

    def __init__(self, path: Path, mode: str = "new", rerecord: bool = False) -> None:
        if mode not in RECORD_MODES:
            raise UsageError(f"record mode must be one of {', '.join(RECORD_MODES)}, got {mode!r}")
        self.path, self.mode, self.rerecord = path, mode, rerecord
        self.recorded = False

    @property
    def name(self) -> str:
        return self.path.stem

    def run(self, loop: AgentLoop, goal: str, **options: Any) -> LoopResult:
        """Run `goal` on `loop`: recorded live into the cassette when the mode says so,
        else replayed from it. `options` are `AgentLoop.run`'s (`state`, `observers`).

        Fails the test (pytest.fail): the cassette is missing under `--forge-record=none`,
        or the replay diverged from it (naming the first diverging call)."""
        if self.mode == "all" or (self.mode == "new" and not self.path.exists()):
            result = loop.run(goal, run_id=self.name, **options)
            write_cassette(self.path, result, loop.codec, loop.spec.config.redact)
            self.recorded = True
            return result
        if not self.path.exists():
            pytest.fail(f"no forge cassette at {self.path}; record it with --forge-record=new", pytrace=False)
        self.recorded = False
        try:
            return loop.replay(self.path, goal=goal, **options)
        except JournalMiss as miss:
            if not self.rerecord:
                pytest.fail(f"the run diverged from its cassette {self.path}: {miss} "
                            "(record it again with --forge-record=all or --forge-rerecord-from-divergence)",
                            pytrace=False)
            result = loop.fork(self.path, at=None, goal=goal, run_id=self.name, **options)
            write_cassette(self.path, result, loop.codec, loop.spec.config.redact)
            self.recorded = True
            return result


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> Cassette:
    """The test's cassette (see the module)."""
    marker = request.node.get_closest_marker("forge_cassette")
    name = str(marker.args[0]) if marker is not None and marker.args else request.node.name
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.") or "cassette"
    folder = Path(str(request.node.path)).parent / "cassettes"
    return Cassette(folder / f"{safe}.jsonl", request.config.getoption("--forge-record"),
                    request.config.getoption("--forge-rerecord-from-divergence"))
