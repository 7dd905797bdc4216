import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest

_DBOS = logging.getLogger("dbos")
if not _DBOS.handlers:  # DBOS's own console handler would bind sys.stderr as it is when DBOS first
    _DBOS.addHandler(logging.StreamHandler(sys.__stderr__))  # starts: a test's capsys, closed after it
    _DBOS.propagate = False


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """A runs database this test module's process launches DBOS on (one DBOS per process),
    shut down when the module is done."""
    from forge.durable import launch, shutdown

    path = tmp_path_factory.mktemp("durable") / "runs.sqlite"
    launch(path)
    yield path
    shutdown()


@pytest.fixture
def make(db, request):
    """`make(loop, **options)`: the loop made durable on `db`, with a name of its own, closed after the test."""
    made = []

    def durable(loop, **options):
        made.append(loop.durable(name=f"{request.node.name}-{len(made)}", db=db, **options))
        return made[-1]

    yield durable
    for loop in made:
        loop.close()


def pytest_addoption(parser):
    parser.addoption("--full-trials", action="store_true", default=False,
                     help="run every crash trial of tests/test_durable_crash.py (100; the default run samples 25), "
                          "the whole fleet of tests/test_fleet.py (240 runs; the default runs 60) and every mode of "
                          "every policy in tests/test_model_conformance.py (the default runs each policy in one)")


# --- the checkout stays as it was ------------------------------------------------------

_ROOT = Path(__file__).resolve().parents[1]


def _checkout_status() -> str | None:
    """`git status` of the checkout (untracked files included, ignored ones not), or None
    where the tests do not run in a git checkout."""
    import subprocess

    try:
        done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=_ROOT,
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _is_worker(config) -> bool:
    """Whether this process is one of pytest-xdist's workers (the controller checks the run)."""
    return hasattr(config, "workerinput")


def _forge_temporaries() -> set[str]:
    """What forge made in the system's temporary folder (its names start `forge-`): a test's
    files belong in its own temporary folder, and what forge makes there a test removes."""
    import tempfile

    return {entry.name for entry in Path(tempfile.gettempdir()).glob("forge-*")}


def pytest_sessionstart(session):
    if not _is_worker(session.config):
        session.config._forge_checkout_status = _checkout_status()
        session.config._forge_temporaries = _forge_temporaries()


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if the tests wrote into the checkout (a test writes only in its own
    temporary folder: a user's demo-run/, the tracked docs and tests/ stay as they were) or
    left forge's files in the system's temporary folder (the whole suite only: a suite run
    beside another may see the other's), or,
    in CI, if a real part was skipped or a slow test did not run (`_ci_refusals`). Under
    pytest-xdist only the controller checks: it is told of every worker's tests."""
    if _is_worker(session.config):
        return
    refusals = _ci_refusals(session.config)
    before = getattr(session.config, "_forge_checkout_status", None)
    after = _checkout_status()
    if before is not None and after is not None and before != after:
        changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
        if __import__("os").environ.get("FORGE_UI_SHOTS") == "docs":  # python3 tasks.py screenshot remakes them
            changed = [line for line in changed if not (line.startswith(" M docs/") and line.endswith(".png"))]
        if changed:
            refusals.append("the tests changed the checkout (git status): " + "; ".join(changed[:20]))
    left = sorted(_forge_temporaries() - getattr(session.config, "_forge_temporaries", set()))
    if left and _whole_suite(session.config):
        refusals.append("the tests left forge's files in the system's temporary folder: " + ", ".join(left[:10]))
    if not refusals:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for refusal in refusals:
        if reporter is not None:
            reporter.write_line(f"FAILED: {refusal}", red=True)
    session.exitstatus = 1


# --- real parts are never skipped in CI ---------------------------------------------------

_SKIPPED: list[str] = []
_SLOW_TESTS: set[str] = set()
_SLOW_PASSED: set[str] = set()


def pytest_runtest_logreport(report):
    """Counted from the reports (every collected test has a setup report, in this process or,
    under pytest-xdist, sent here from a worker)."""
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if "platform:" not in reason:  # only a part this platform cannot have may be skipped
            _SKIPPED.append(f"{report.nodeid} ({reason})")
    if "slow" in report.keywords:
        _SLOW_TESTS.add(report.nodeid)
        if report.when == "call" and report.passed:
            _SLOW_PASSED.add(report.nodeid)


def _whole_suite(config) -> bool:
    """Whether this session runs the whole suite (no -k, -m or chosen files)."""
    return not config.option.keyword and not config.option.markexpr and all(
        Path(arg).resolve() == _ROOT / "tests" for arg in config.args)


def _ci_refusals(config) -> list[str]:
    """In CI (CI=true, as .ci/run runs), what makes the run fail though every test passed: a
    test skipped for a missing real part (PostgreSQL, Chromium, an MCP server), or, for the
    whole suite, a `slow` test (real processes) collected but not run."""
    if not __import__("os").environ.get("CI"):
        return []
    refusals = [f"skipped in CI: {skipped}" for skipped in _SKIPPED]
    if _whole_suite(config) and (not _SLOW_TESTS or _SLOW_PASSED != _SLOW_TESTS):
        refusals.append(f"slow tests in CI: {len(_SLOW_TESTS)} collected, {len(_SLOW_PASSED)} passed; each must run")
    return refusals
