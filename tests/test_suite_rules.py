"""The suite's own rules, as conftest.py enforces them: in CI a real part is never skipped
and every `slow` test runs, and no test may leave the checkout changed. Each rule is shown
on a small suite run in a subprocess with this suite's conftest.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")
PYPROJECT = '[tool.pytest.ini_options]\ntestpaths = ["tests"]\nmarkers = ["slow: real processes"]\n'


def suite(tmp_path: Path, body: str, *, ci: bool, git: bool = False) -> subprocess.CompletedProcess[str]:
    root = tmp_path / "project"
    (root / "tests").mkdir(parents=True)
    shutil.copy(CONFTEST, root / "tests" / "conftest.py")
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tests" / "test_small.py").write_text(body)
    if git:
        for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
            subprocess.run(["git", *command], cwd=root, check=True, capture_output=True)
    environment = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": "true"} if ci else {})
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=root,
                          capture_output=True, text=True, env=environment, timeout=120)


SKIPS_A_REAL_PART = '''import pytest

@pytest.mark.slow
def test_needs_postgres():
    pytest.skip("PostgreSQL is not installed")

def test_plain():
    pass
'''


def test_in_ci_a_test_skipped_for_a_missing_real_part_fails_the_run(tmp_path):
    done = suite(tmp_path, SKIPS_A_REAL_PART, ci=True)
    assert done.returncode == 1
    assert "skipped in CI: tests/test_small.py::test_needs_postgres" in done.stdout
    assert "slow tests in CI: 1 collected, 0 passed" in done.stdout


def test_outside_ci_the_same_skip_is_allowed(tmp_path):
    assert suite(tmp_path, SKIPS_A_REAL_PART, ci=False).returncode == 0


def test_a_skip_the_platform_forces_is_allowed_in_ci(tmp_path):
    body = 'import pytest\n\n@pytest.mark.skipif(True, reason="platform: no /proc here")\ndef test_x():\n    pass\n' \
           '\n@pytest.mark.slow\ndef test_slow():\n    pass\n'
    assert suite(tmp_path, body, ci=True).returncode == 0


def test_a_test_that_writes_into_the_checkout_fails_the_run(tmp_path):
    body = 'from pathlib import Path\n\ndef test_writes():\n    (Path(__file__).parents[1] / "stray.txt").write_text("x")\n'
    done = suite(tmp_path, body, ci=False, git=True)
    assert done.returncode == 1 and "the tests changed the checkout (git status): ?? stray.txt" in done.stdout


def test_the_suite_runs_on_one_worker_more_than_the_cores_keeping_each_file_on_one_worker(monkeypatch):
    sys.path.insert(0, str(CONFTEST.parents[1]))
    import tasks

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert tasks.parallel_workers(["test"]) == ["-n", "3", "--dist", "loadfile"]
    assert tasks.parallel_workers(["test", "-k", "retry"]) == ["-n", "3", "--dist", "loadfile"]


def test_arguments_that_choose_their_own_workers_are_left_alone():
    sys.path.insert(0, str(CONFTEST.parents[1]))
    import tasks

    assert tasks.parallel_workers(["test", "-n", "0"]) == []
    assert tasks.parallel_workers(["test", "-p", "no:xdist"]) == []
    assert tasks.parallel_workers(["demo"]) == []


def test_in_ci_a_slow_test_that_did_not_run_fails_the_run_under_parallel_workers(tmp_path):
    body = 'import pytest\n\n@pytest.mark.slow\ndef test_slow():\n    pytest.skip("no server")\n\n' \
           '@pytest.mark.slow\ndef test_other():\n    pass\n'
    root = tmp_path / "project"
    (root / "tests").mkdir(parents=True)
    shutil.copy(CONFTEST, root / "tests" / "conftest.py")
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tests" / "test_small.py").write_text(body)
    environment = {k: v for k, v in os.environ.items() if k != "CI"} | {"CI": "true"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2"], cwd=root,
                          capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 1
    assert "slow tests in CI: 2 collected, 1 passed" in done.stdout


def test_a_test_that_hangs_fails_at_the_suites_timeout_instead_of_holding_it(tmp_path, pytestconfig):
    """The suite's own settings bound every test (pytest-timeout); a small suite with the same
    kind of bound shows a hanging test failing, not waiting."""
    assert pytestconfig.pluginmanager.hasplugin("timeout")
    assert int(pytestconfig.getini("timeout")) > 0
    root = tmp_path / "hanging"
    root.mkdir()
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntimeout = 1\ntimeout_method = "thread"\n')
    (root / "test_hangs.py").write_text("import threading\n\ndef test_hangs():\n    threading.Event().wait()\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Timeout" in done.stdout + done.stderr
