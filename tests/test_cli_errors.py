"""Every subcommand, given missing, nonexistent or malformed arguments, files and databases,
says what was wrong in one line on stderr and exits 1 or 2: never a traceback."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest


def _forge(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "forge", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    (folder / "junk.jsonl").write_text("this is not json\n")
    (folder / "wrong.jsonl").write_text('{"v": 9}\n')
    (folder / "broken.py").write_text("def (:\n")
    (folder / "empty.py").write_text("x = 1\n")
    (folder / "bad.toml").write_text("[machine\n")
    (folder / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    (folder / "a folder").mkdir()
    import sqlite3

    other = sqlite3.connect(folder / "other.sqlite")  # another program's database
    other.execute("create table notes (text)")
    other.commit()
    other.close()
    from forge.durable.database import RunsDatabase, database_url

    RunsDatabase(database_url(folder / "runs.sqlite")).close()  # an empty runs database: no run in it
    return folder


CASES: dict[str, tuple[str, ...]] = {
    "no command": (),
    "unknown command": ("frobnicate",),
    "run: missing scenario": ("run",),
    "run: nonexistent scenario": ("run", "nope.py"),
    "run: malformed scenario": ("run", "broken.py"),
    "run: scenario without a loop": ("run", "empty.py"),
    "demo: unknown scenario": ("demo", "--scenario", "nope"),
    "diagram: nonexistent definition": ("diagram", "nope.toml"),
    "diagram: malformed definition": ("diagram", "bad.toml"),
    "diagram: nonexistent trace": ("diagram", "--trace", "nope.jsonl"),
    "diagram: malformed trace": ("diagram", "--trace", "junk.jsonl"),
    "diagram: unknown format": ("diagram", "--format", "gif"),
    "diagrams: nonexistent folder": ("diagrams", "--machines", "nope", "--out", "out"),
    "debug: missing scenario": ("debug",),
    "debug: nonexistent scenario": ("debug", "nope.py"),
    "debug: nonexistent database": ("debug", "RUN", "--db", "nope.sqlite"),
    "debug: malformed database": ("debug", "RUN", "--db", "junk.sqlite"),
    "debug: unknown run": ("debug", "NOPE", "--db", "runs.sqlite"),
    "replay: missing trace": ("replay",),
    "replay: nonexistent trace": ("replay", "nope.jsonl"),
    "replay: malformed trace": ("replay", "junk.jsonl"),
    "replay: unknown version": ("replay", "wrong.jsonl"),
    "replay: unknown run": ("replay", "NOPE", "--db", "runs.sqlite"),
    "replay: bad turn": ("replay", "NOPE", "--db", "runs.sqlite", "--turn", "zero"),
    "runs: missing action": ("runs",),
    "runs: missing database": ("runs", "list"),
    "runs: nonexistent database": ("runs", "list", "--db", "nope.sqlite"),
    "runs: malformed database": ("runs", "list", "--db", "junk.sqlite"),
    "runs: unsupported database url": ("runs", "list", "--db", "mysql://localhost/x"),
    "runs: a folder as the database": ("runs", "list", "--db", "a folder"),
    "runs: another program's database": ("runs", "list", "--db", "other.sqlite"),
    "runs: an empty database path": ("runs", "list", "--db", ""),
    "runs: a PostgreSQL server nobody runs": ("runs", "list", "--db", "postgresql://forge:secret@127.0.0.1:1/runs"),
    "runs show: a folder as the database": ("runs", "show", "R", "--db", "a folder"),
    "submit: a folder as the database": ("submit", "goal", "--loop", "x", "--db", "a folder"),
    "runs show: missing run id": ("runs", "show", "--db", "runs.sqlite"),
    "runs list: a flag of another verb": ("runs", "list", "--db", "runs.sqlite", "--approve", "fp"),
    "runs: an unknown verb": ("runs", "approve", "R", "--db", "runs.sqlite"),
    "runs show: unknown run": ("runs", "show", "NOPE", "--db", "runs.sqlite"),
    "runs cancel: unknown run": ("runs", "cancel", "NOPE", "--db", "runs.sqlite"),
    "runs resume: unknown run": ("runs", "resume", "NOPE", "--db", "runs.sqlite", "--run-again"),
    "runs resume: no answer": ("runs", "resume", "NOPE", "--db", "runs.sqlite"),
    "runs resume: malformed did-run": ("runs", "resume", "NOPE", "--db", "runs.sqlite", "--did-run", "{nope"),
    "submit: missing goal": ("submit", "--loop", "x", "--db", "runs.sqlite"),
    "submit: blank goal": ("submit", " ", "--loop", "x", "--db", "runs.sqlite"),
    "submit: malformed database": ("submit", "goal", "--loop", "x", "--db", "junk.sqlite"),
    "worker: nonexistent loops": ("worker", "--db", "runs.sqlite", "--loops", "nope.py"),
    "worker: malformed loops": ("worker", "--db", "runs.sqlite", "--loops", "broken.py"),
    "inspect: missing output": ("inspect", "junk.jsonl"),
    "inspect: nonexistent trace": ("inspect", "nope.jsonl", "-o", "page.html"),
    "inspect: malformed trace": ("inspect", "junk.jsonl", "-o", "page.html"),
    "check: nonexistent definition": ("check", "nope.toml"),
    "check: bad number": ("check", "--max-steps", "0"),
    "check: bad stages": ("check", "--stages", "nope"),
    "tools: no server": ("tools",),
    "tools: nonexistent command": ("tools", "--", "/nonexistent/server"),
    "run: --at without --fork": ("run", "nope.py", "--at", "3"),
    "debug: a recorded run that is not a trace": ("debug", "junk.jsonl", "--at", "2"),
    "debug: --at of a scenario": ("debug", "empty.py", "--at", "2"),
    "diff: nonexistent trace": ("diff", "nope.jsonl", "junk.jsonl"),
    "diff: malformed trace": ("diff", "junk.jsonl", "junk.jsonl"),
    "diff: unknown runs": ("diff", "A", "B", "--db", "runs.sqlite"),
    "diff: malformed database": ("diff", "A", "B", "--db", "junk.sqlite"),
    "cover: nonexistent traces": ("cover", "single_agent", "nope"),
    "cover: nonexistent definition": ("cover", "nope.toml", "."),
    "cover: missing traces": ("cover", "single_agent"),
    "runs fork: missing K": ("runs", "fork", "NOPE", "--db", "runs.sqlite"),
    "runs fork: unknown run": ("runs", "fork", "NOPE", "--at", "3", "--db", "runs.sqlite"),
    "runs fork: malformed patch": ("runs", "fork", "NOPE", "--at", "3", "--patch", "junk.jsonl", "--db", "runs.sqlite"),
    "runs fork: unknown patch": ("runs", "fork", "NOPE", "--at", "3", "--patch", "bad.toml", "--db", "runs.sqlite"),
    "inspect: against a malformed trace": ("inspect", "junk.jsonl", "--against", "junk.jsonl", "-o", "page.html"),
}


NAMED: dict[str, str] = {
    'no command': 'COMMAND',
    'unknown command': 'frobnicate',
    'run: missing scenario': 'SCENARIO',
    'run: nonexistent scenario': 'nope.py',
    'run: malformed scenario': 'broken.py',
    'run: scenario without a loop': 'empty.py',
    'demo: unknown scenario': 'nope',
    'diagram: nonexistent definition': 'nope.toml',
    'diagram: malformed definition': 'bad.toml',
    'diagram: nonexistent trace': 'nope.jsonl',
    'diagram: malformed trace': 'junk.jsonl',
    'diagram: unknown format': 'gif',
    'diagrams: nonexistent folder': 'nope',
    'debug: missing scenario': 'SCENARIO',
    'debug: nonexistent scenario': 'nope.py',
    'debug: nonexistent database': 'nope.sqlite',
    'debug: malformed database': 'junk.sqlite',
    'debug: unknown run': 'runs.sqlite',
    'replay: missing trace': 'RUN.jsonl|RUN_ID',
    'replay: nonexistent trace': 'nope.jsonl',
    'replay: malformed trace': 'junk.jsonl',
    'replay: unknown version': 'wrong.jsonl',
    'replay: unknown run': 'runs.sqlite',
    'replay: bad turn': '--turn',
    'runs: missing action': 'action',
    'runs: missing database': '--db',
    'runs: nonexistent database': 'nope.sqlite',
    'runs: malformed database': 'junk.sqlite',
    'runs: unsupported database url': 'mysql://localhost/x',
    'runs: a folder as the database': 'a folder',
    "runs: another program's database": 'other.sqlite',
    'runs: an empty database path': 'empty path',
    'runs: a PostgreSQL server nobody runs': '127.0.0.1:1',
    'runs show: a folder as the database': 'a folder',
    'submit: a folder as the database': 'a folder',
    'runs show: missing run id': 'RUN_ID',
    'runs list: a flag of another verb': '--approve',
    'runs: an unknown verb': 'approve',
    'runs show: unknown run': 'runs.sqlite',
    'runs cancel: unknown run': 'runs.sqlite',
    'runs resume: unknown run': 'runs.sqlite',
    'runs resume: no answer': 'runs.sqlite',
    'runs resume: malformed did-run': 'runs.sqlite',
    'submit: missing goal': 'GOAL',
    'submit: blank goal': 'goal',
    'submit: malformed database': 'junk.sqlite',
    'worker: nonexistent loops': 'nope.py',
    'worker: malformed loops': 'broken.py',
    'inspect: missing output': '--output',
    'inspect: nonexistent trace': 'nope.jsonl',
    'inspect: malformed trace': 'junk.jsonl',
    'check: nonexistent definition': 'nope.toml',
    'check: bad number': '--max-steps',
    'check: bad stages': 'nope',
    'tools: no server': 'name one MCP server',
    'tools: nonexistent command': '/nonexistent/server',
    'run: --at without --fork': '--fork',
    'debug: a recorded run that is not a trace': 'junk.jsonl',
    'debug: --at of a scenario': '--at',
    'diff: nonexistent trace': 'nope.jsonl',
    'diff: malformed trace': 'junk.jsonl',
    'diff: unknown runs': 'runs.sqlite',
    'diff: malformed database': 'junk.sqlite',
    'cover: nonexistent traces': 'nope',
    'cover: nonexistent definition': 'nope.toml',
    'cover: missing traces': 'TRACES',
    'runs fork: missing K': '--at K',
    'runs fork: unknown run': 'runs.sqlite',
    'runs fork: malformed patch': 'junk.jsonl',
    'runs fork: unknown patch': 'bad.toml',
    'inspect: against a malformed trace': 'junk.jsonl',
}
"""What each case's line must name: the argument, file, value or option that was wrong."""


@pytest.fixture(scope="module")
def outcomes(files: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = dict(zip(CASES, pool.map(lambda args: _forge(*args, cwd=files), CASES.values()), strict=True))
    return done


@pytest.mark.parametrize("case", list(CASES))
def test_a_mistake_is_told_in_one_line_with_exit_1_or_2(case: str, outcomes: dict[str, subprocess.CompletedProcess[str]]
                                                        ) -> None:
    out = outcomes[case]
    lines = out.stderr.strip().splitlines()
    assert "Traceback" not in out.stderr, out.stderr
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("forge"), lines[0]
    assert out.returncode in (1, 2), (out.returncode, out.stderr)


@pytest.mark.parametrize("case", list(CASES))
def test_a_mistake_s_line_names_what_was_wrong(case: str, outcomes: dict[str, subprocess.CompletedProcess[str]]) -> None:
    assert NAMED[case] in outcomes[case].stderr, (NAMED[case], outcomes[case].stderr)


def test_every_case_says_what_its_line_must_name():
    assert set(NAMED) == set(CASES)


def test_forge_worker_refuses_a_dead_after_not_above_its_heartbeat(capsys):
    from forge.cli import main

    assert main(["worker", "--db", "x.sqlite", "--loops", "nothing.py", "--heartbeat", "2", "--dead-after", "1"]) == 1
    assert "--dead-after (1 s) must be more than --heartbeat (2 s)" in capsys.readouterr().err


def test_forge_workers_defaults_are_the_workers_own():
    import inspect

    from forge.cli import DEAD_AFTER, HEARTBEAT
    from forge.durable.worker import work

    defaults = inspect.signature(work).parameters
    assert (defaults["beat_every"].default, defaults["dead_after"].default) == (HEARTBEAT, DEAD_AFTER)
