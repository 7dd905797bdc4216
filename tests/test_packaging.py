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


def built_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the working tree
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__",
                                                                 ".hypothesis", ".pytest_cache", "demo-run", ".mcp-servers",
                                                                 ".forge-traces", ".forge-cover-tests"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path / "dist"), str(source)],
        check=True, capture_output=True,
    )
    return next((tmp_path / "dist").glob("forge_fsm-*.whl"))


def test_wheel_ships_every_file_of_the_package_and_every_definition(tmp_path):
    with zipfile.ZipFile(built_wheel(tmp_path)) as archive:
        shipped = set(archive.namelist())
    sources = {path.relative_to(ROOT).as_posix() for path in (ROOT / "forge").rglob("*")
               if path.is_file() and "__pycache__" not in path.parts}
    definitions = {f"forge/machines/{path.name}" for path in (ROOT / "machines").glob("*.toml")}
    assert "forge/ui/app.py" in sources
    assert sorted(sources - shipped) == []
    assert sorted(definitions - shipped) == []


def test_wheel_ships_the_definitions_and_finds_them(tmp_path):
    wheel = built_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {"forge/machines/single_agent.toml", "forge/py.typed"} <= names
        archive.extractall(tmp_path / "site")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    installed, name = out.stdout.splitlines()
    assert installed.startswith(str(tmp_path / "site"))
    assert name == "single_agent"
