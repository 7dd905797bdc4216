"""`forge examples [DIR]`: the examples the documentation runs, written out of the installed
package for a reader who has no checkout (issue 54, item 1)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def forge(*args, cwd):
    return subprocess.run([sys.executable, "-m", "forge", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def tracked_examples():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "examples"], cwd=ROOT,
                            capture_output=True, text=True).stdout.split()
    return {name.removeprefix("examples/") for name in listed} or {
        str(path.relative_to(ROOT / "examples")) for path in (ROOT / "examples").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts}


def test_it_writes_every_example_of_the_repository_byte_for_byte(tmp_path):
    done = forge("examples", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = {str(path.relative_to(tmp_path / "examples")) for path in (tmp_path / "examples").rglob("*")
               if path.is_file()}
    assert written == tracked_examples()
    assert all((tmp_path / "examples" / name).read_bytes() == (ROOT / "examples" / name).read_bytes()
               for name in written)


def test_it_writes_into_the_folder_named(tmp_path):
    assert forge("examples", "mine", cwd=tmp_path).returncode == 0
    assert (tmp_path / "mine" / "writer.py").is_file() and not (tmp_path / "examples").exists()


def test_a_changed_file_is_refused_by_name_and_nothing_is_written_unless_forced(tmp_path):
    assert forge("examples", cwd=tmp_path).returncode == 0
    (tmp_path / "examples" / "hello.py").write_text("# mine\n")
    (tmp_path / "examples" / "writer.py").unlink()
    refused = forge("examples", cwd=tmp_path)
    assert refused.returncode != 0 and "hello.py" in refused.stderr and "--force" in refused.stderr
    assert (tmp_path / "examples" / "hello.py").read_text() == "# mine\n"
    assert not (tmp_path / "examples" / "writer.py").exists()  # nothing written
    assert forge("examples", "--force", cwd=tmp_path).returncode == 0
    assert (tmp_path / "examples" / "hello.py").read_bytes() == (ROOT / "examples" / "hello.py").read_bytes()


def test_running_it_again_over_the_same_files_is_fine(tmp_path):
    assert forge("examples", cwd=tmp_path).returncode == 0
    again = forge("examples", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
