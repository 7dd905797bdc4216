#!/usr/bin/env python3
"""Set up and run forge's two jobs on a fresh machine: `python3 tasks.py demo|test`.

Needs only Python >= 3.11 with pip. It creates `.venv` when missing (or when
pyproject.toml or setup.py changed since), installs forge with its test extra into it (the reference
MCP servers from PyPI among it), makes sure Graphviz's `dot` binary is present (installing
Debian's `graphviz` package when running as root where apt-get exists, otherwise saying
how), and for the tests, where npm exists, the reference filesystem MCP server into
`.mcp-servers/`; then it runs the job inside the environment. Extra arguments are passed
through: `python3 tasks.py test -k retry`, `python3 tasks.py demo --scenario mcp`.
For the tests it also installs Debian's PostgreSQL server (the durable-run worker test starts
its own) and Chromium with its driver (the inspector's browser tests), as root. A real part
that fails to install ends the run saying so; one this platform cannot install (not root, no
apt-get) is a note and its tests skip, saying why, except in CI (CI=true), where it fails.
`python3 tasks.py screenshot` remakes the documentation's pictures in headless Chromium
(installed with Debian's chromium and chromium-driver): docs/inspector.png, the run
inspector, and docs/ui-*.png, forge ui's pages, which the UI's browser tests take as they
run (FORGE_UI_SHOTS=docs), docs/counterexample.svg, the path `forge check` draws for a loop
that skips an approval, and diagrams/ (the docs' loop diagrams), from machines/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".forge-installed"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")


def ensure_environment() -> None:
    build_files = (ROOT / "pyproject.toml", ROOT / "setup.py")
    if STAMP.exists() and all(STAMP.stat().st_mtime >= path.stat().st_mtime for path in build_files):
        return
    if not PYTHON.exists():
        print(f"tasks: creating {VENV}", flush=True)
        venv.create(VENV, with_pip=True)
    print("tasks: installing forge and its test dependencies", flush=True)
    subprocess.run(
        [str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-e", f"{ROOT}[test]"],
        check=True,
    )
    STAMP.touch()


def apt_install(*packages: str) -> bool:
    """Install Debian packages when running as root where apt-get exists; False otherwise."""
    apt = shutil.which("apt-get")
    if not (apt and hasattr(os, "geteuid") and os.geteuid() == 0):
        return False
    print(f"tasks: installing {' '.join(packages)} (apt-get install -y)", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not APT_UPDATED:
        subprocess.run([apt, "update", "-qq"], check=True, env=env)
        APT_UPDATED.append(True)
    return subprocess.run([apt, "install", "-y", "-qq", *packages], env=env).returncode == 0


APT_UPDATED: list[bool] = []


def ensure_graphviz(required: bool) -> None:
    if shutil.which("dot"):
        return
    if apt_install("graphviz") and shutil.which("dot"):
        return
    message = (
        "Graphviz's `dot` binary is not on PATH. Install it with your package manager "
        "(Debian/Ubuntu: sudo apt-get install graphviz; macOS: brew install graphviz), "
        "then run this again."
    )
    if required:
        sys.exit(f"tasks: {message}")
    print(f"tasks: note: {message} Diagrams are written as DOT until then.", flush=True)


def missing_part(what: str, attempted: bool) -> None:
    """A real part the tests need is missing. An install that was tried and failed ends the
    run, saying so; where this platform cannot install it (not root, no apt-get, no npm) the
    tests that need it skip, saying why, except in CI (CI=true), which must run them all."""
    if attempted or os.environ.get("CI"):
        sys.exit(f"tasks: {what} could not be installed{'' if attempted else ' here (needs root and apt-get)'}, "
                 "and the tests need it: install it, then run this again")
    print(f"tasks: note: {what} not installed (needs root and apt-get); the tests that need it will skip", flush=True)


def can_apt() -> bool:
    return bool(shutil.which("apt-get")) and hasattr(os, "geteuid") and os.geteuid() == 0


def ensure_postgres() -> None:
    """Debian's PostgreSQL server, for the durable-run worker tests (they start their own
    server as an unprivileged user in a temporary folder)."""
    import glob

    def found() -> bool:
        return bool(glob.glob("/usr/lib/postgresql/*/bin/initdb") or shutil.which("initdb"))

    if found():
        return
    attempted = can_apt()
    if not (apt_install("postgresql") and found()):
        missing_part("PostgreSQL (Debian's postgresql)", attempted)


def ensure_chromium() -> None:
    """Debian's headless-capable Chromium and its driver, for the run inspector's browser
    tests (they skip, saying why, without them)."""
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return
    attempted = can_apt()
    if not (apt_install("chromium", "chromium-driver") and shutil.which("chromium") and shutil.which("chromedriver")):
        missing_part("Chromium and its driver (Debian's chromium, chromium-driver)", attempted)


def ensure_http_tools() -> None:
    """curl and jq, for the test that runs the README's JSON API examples against forge ui."""
    if shutil.which("curl") and shutil.which("jq"):
        return
    attempted = can_apt()
    if not (apt_install("curl", "jq") and shutil.which("curl") and shutil.which("jq")):
        missing_part("curl and jq (Debian's curl, jq)", attempted)


NODE_SERVERS = ROOT / ".mcp-servers"
FILESYSTEM_SERVER = "@modelcontextprotocol/server-filesystem"


def ensure_node_servers() -> None:
    """The npm filesystem MCP server, for the tests that talk to it (they skip without it)."""
    if (NODE_SERVERS / "node_modules" / ".bin" / "mcp-server-filesystem").exists():
        return
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        if os.environ.get("CI"):
            sys.exit("tasks: node and npm are needed for the filesystem MCP server's tests, and CI must run them")
        print("tasks: note: node/npm not found, so the filesystem MCP server tests will skip", flush=True)
        return
    print(f"tasks: installing {FILESYSTEM_SERVER} into {NODE_SERVERS}", flush=True)
    done = subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(NODE_SERVERS),
                           FILESYSTEM_SERVER])
    if done.returncode != 0:
        sys.exit(f"tasks: npm could not install {FILESYSTEM_SERVER} (exit {done.returncode}), and the tests need it")


def main(argv: list[str]) -> int:
    jobs = {
        "demo": ([str(BIN / "forge"), "demo"], False),
        "test": ([str(PYTHON), "-m", "pytest"], True),
        "screenshot": ([str(PYTHON), str(ROOT / "tests" / "browser.py")], True),
    }
    if not argv or argv[0] not in jobs:
        print(f"usage: python3 tasks.py {{{'|'.join(jobs)}}} [ARGS...]", file=sys.stderr)
        return 2
    command, needs_dot = jobs[argv[0]]
    ensure_environment()
    ensure_graphviz(required=needs_dot)
    if argv[0] == "test":
        ensure_node_servers()
        ensure_postgres()
        ensure_http_tools()
    if argv[0] in ("test", "screenshot"):
        ensure_chromium()
    if argv[0] == "screenshot":
        return screenshots()
    return subprocess.run([*command, *parallel_workers(argv), *argv[1:]], cwd=ROOT).returncode


def screenshots() -> int:
    inspector = subprocess.run([str(PYTHON), str(ROOT / "tests" / "browser.py")], cwd=ROOT).returncode
    subprocess.run([str(BIN / "forge"), "diagrams"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([str(BIN / "forge"), "check", "examples/skips_approval.toml", "--require",
                    "approval-before-side-effect", "--diagram", "docs/counterexample.svg"], cwd=ROOT,
                   stdout=subprocess.DEVNULL)  # exits 1: the counterexample is the picture
    pages = subprocess.run([str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_ui.py", "-k",
                            "not_blank or followed_live"], cwd=ROOT, env=dict(os.environ, FORGE_UI_SHOTS="docs"))
    return inspector or pages.returncode


def parallel_workers(argv: list[str]) -> list[str]:
    """For the tests, pytest-xdist's options: one worker more than the cores (the suite waits
    on real processes and servers as much as it computes; 3 on 2 cores took the suite from
    8.4 to 4.3 minutes), each test file kept on one worker so its module fixtures (a DBOS, a
    uvicorn, a PostgreSQL server) start once. None when the arguments choose their own (`-n`,
    `-p no:xdist`) or for the other jobs."""
    if argv[0] != "test" or any(arg.startswith(("-n", "--numprocesses", "--dist")) or arg == "no:xdist"
                                for arg in argv[1:]):
        return []
    return ["-n", str(min((os.cpu_count() or 1) + 1, 6)), "--dist", "loadfile"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
