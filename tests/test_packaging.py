import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = "import forge; print(forge.__file__); print(forge.load_definition().name)"


def test_editable_install_finds_the_builtin_definition(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[1] == "single_agent"


def test_wheel_ships_the_definitions_and_finds_them(tmp_path):
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the working tree
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__",
                                                                 ".hypothesis", ".pytest_cache", "demo-run"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path / "dist"), str(source)],
        check=True, capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("forge_fsm-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {"forge/machines/single_agent.toml", "forge/py.typed"} <= names
        archive.extractall(tmp_path / "site")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    installed, name = out.stdout.splitlines()
    assert installed.startswith(str(tmp_path / "site"))
    assert name == "single_agent"
