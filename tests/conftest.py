import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest


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
    """`make(loop, **options)`: a DurableLoop on `db` with a name of its own, closed after the test."""
    from forge.durable import DurableLoop

    made = []

    def durable(loop, **options):
        made.append(DurableLoop(loop, name=f"{request.node.name}-{len(made)}", db=db, **options))
        return made[-1]

    yield durable
    for loop in made:
        loop.close()


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


def pytest_sessionstart(session):
    session.config._forge_checkout_status = _checkout_status()


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if the tests wrote into the checkout: a test writes only in its own
    temporary folder (a user's demo-run/, the tracked docs and tests/ stay as they were)."""
    before = getattr(session.config, "_forge_checkout_status", None)
    after = _checkout_status()
    if before is None or after is None or before == after:
        return
    changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = "the tests changed the checkout (git status): " + "; ".join(changed[:20])
    if reporter is not None:
        reporter.write_line(f"FAILED (checkout changed): {message}", red=True)
    session.exitstatus = 1
