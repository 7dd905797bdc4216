import dataclasses
import subprocess
import sys
from pathlib import Path

import forge

ROOT = Path(__file__).resolve().parents[1]


def test_everything_in_all_is_importable_from_forge():
    for name in forge.__all__:
        assert hasattr(forge, name), name


def test_the_readme_names_are_exported():
    for name in ["AgentLoop", "Intent", "ScriptedPolicy", "Tool", "LoopResult", "read_trace", "write_trace"]:
        assert name in forge.__all__


def test_exported_dataclasses_are_frozen_values():
    mutable_on_purpose = {"LoopState"}  # LoopState.record mutates, by contract
    for name in forge.__all__:
        value = getattr(forge, name)
        if dataclasses.is_dataclass(value) and name not in mutable_on_purpose:
            assert value.__dataclass_params__.frozen, name


def test_the_package_ships_py_typed_and_type_checks_strictly_with_the_projects_own_settings(tmp_path):
    """pyproject.toml holds the settings (strict, over forge/); `mypy` with no arguments uses
    them. Its cache goes to the test's own folder, not the checkout."""
    import tomllib

    assert (ROOT / "forge" / "py.typed").exists()
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert settings["strict"] is True and settings["files"] == ["forge"]
    mypy = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy")], cwd=ROOT,
                          capture_output=True, text=True)
    assert mypy.returncode == 0, mypy.stdout


def test_ruff_passes_with_the_projects_own_settings():
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "forge", "tests", "benchmarks",
                           "examples", "tasks.py"], cwd=ROOT, capture_output=True, text=True)
    assert ruff.returncode == 0, ruff.stdout


def test_lazy_parts_stay_lazy_and_the_cli_lists_what_the_library_has():
    """Importing forge (or building a loop's names) loads none of the checker, diagrams,
    debugger or demo; the CLI's copies of scenario and format names match the library's."""
    import subprocess
    import sys

    probe = ("import sys, forge; from forge import AgentLoop, Intent, Tool, read_trace; "
             "print(sorted(m for m in ('forge.check', 'forge.diagram', 'forge.debug', 'forge.demo', 'asyncio') "
             "if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    from forge.cli import drawing, local
    from forge.demo.scenarios import SCENARIOS
    from forge.diagram import FORMATS

    assert tuple(SCENARIOS) == local.SCENARIOS and drawing.FORMATS == FORMATS
