"""A folder the demo's file tools may touch, and nothing outside it.

Every path a tool is given is checked first (following `..` and symlinks): a path that lands
outside the workspace, is absolute, or holds a NUL byte is refused with a
`PermanentToolError` (retrying cannot make it allowed). Then it is opened one component at a
time from the workspace's own directory descriptor, each with `O_NOFOLLOW`: there is no
moment between the check and the open in which swapping a folder for a symlink could lead
outside, and a symlink met on the way is refused.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath, PureWindowsPath

from forge.agent.retry import PermanentToolError

__all__ = ["NOTES", "Workspace"]

NOTES: dict[str, str] = {
    "notes/forge.md": "# Forge design\n\nThe loop is an explicit state machine.\nEvery stop reason is a state.\n",
    "notes/retries.md": "# Retry policy\n\nOnly transient errors are retried, with backoff and a bound.\n",
    "notes/diagrams.md": "# Diagrams\n\nDrawn from the definition that runs, so they cannot disagree with it.\n",
}


def _made(parent: int, part: str, path: str) -> int:
    """Create the folder `part` in `parent` (someone else may have made it meanwhile) and
    open it, still following no link."""
    try:
        os.mkdir(part, 0o755, dir_fd=parent)
    except FileExistsError:
        pass
    except OSError as error:
        raise _refused(path, part, error) from None
    try:
        return os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as error:
        raise _refused(path, part, error) from None


def _refused(path: str, part: str, error: OSError) -> PermanentToolError:
    if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return PermanentToolError(f"permission denied: {path!r} leads through {part!r}, a symbolic link or not a "
                                  "folder; the workspace follows no link, so nothing outside it can be reached")
    return PermanentToolError(f"{path!r}: {error.strerror}")


class Workspace:
    """A confined root folder. `root` must exist; it is resolved once, here."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve(strict=True)

    def resolve(self, path: str) -> Path:
        """The absolute path inside the workspace that `path` names.

        Raises:
            PermanentToolError: `path` is not a string, contains a NUL byte, is absolute, or
                resolves outside the workspace (through `..` or a symlink).
        """
        if not isinstance(path, str) or not path:
            raise PermanentToolError(f"permission denied: path must be a non-empty string, got {path!r}")
        if "\x00" in path:
            raise PermanentToolError(f"permission denied: path {path!r} contains a NUL byte")
        if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or PureWindowsPath(path).drive:
            raise PermanentToolError(f"permission denied: {path!r} is absolute; give a path inside the workspace")
        try:
            resolved = (self.root / path).resolve()
        except OSError as error:  # a component vanished while being resolved (something is swapping it)
            raise PermanentToolError(f"{path!r} could not be resolved: {error.strerror}") from None
        if not resolved.is_relative_to(self.root):
            raise PermanentToolError(f"permission denied: {path!r} resolves outside the workspace")
        return resolved

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    @contextmanager
    def _folder(self, parts: list[str], path: str, make: bool = False) -> Iterator[int]:
        """A descriptor of the folder `parts` names, reached from the root one component at
        a time without following any symlink; `make` creates missing folders."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts:
                try:
                    inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not make:
                        raise PermanentToolError(f"{path!r} is not in the workspace: {part!r} does not exist") from None
                    inner = _made(fd, part, path)
                except OSError as error:
                    raise _refused(path, part, error) from None
                os.close(fd)
                fd = inner
            yield fd
        finally:
            os.close(fd)

    def _parts(self, path: str) -> list[str]:
        self.resolve(path)  # what is refused outright, refused with its reason
        parts = [p for p in PurePosixPath(os.path.normpath(path)).parts if p not in ("", ".")]
        if ".." in parts:
            raise PermanentToolError(f"permission denied: {path!r} resolves outside the workspace")
        return parts

    def _open(self, path: str, flags: int, make_parents: bool = False) -> int:
        parts = self._parts(path)
        if not parts:
            raise PermanentToolError(f"{path!r} is the workspace itself, not a file in it")
        with self._folder(parts[:-1], path, make_parents) as folder:
            try:
                return os.open(parts[-1], flags | os.O_NOFOLLOW, 0o644, dir_fd=folder)
            except FileNotFoundError:
                raise PermanentToolError(f"{path!r} is not a file in the workspace") from None
            except OSError as error:
                raise _refused(path, parts[-1], error) from None

    def list_notes(self, folder: str) -> list[str]:
        """Markdown files directly in `folder`, as sorted workspace-relative paths (a symlink
        among them is not listed)."""
        parts = self._parts(folder)
        with self._folder(parts, folder) as fd, os.scandir(fd) as entries:
            names = [e.name for e in entries if e.name.endswith(".md") and e.is_file(follow_symlinks=False)]
        prefix = "/".join(parts)
        return sorted(f"{prefix}/{name}" if prefix else name for name in names)

    def read(self, path: str) -> str:
        fd = self._open(path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise PermanentToolError(f"{path!r} is not a file in the workspace")
            return file.read().decode("utf-8")

    def write(self, path: str, text: str) -> int:
        """Write `text` to `path` (parents created inside the workspace); returns bytes written."""
        data = text.encode("utf-8")
        fd = self._open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, make_parents=True)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        return len(data)

    def seed(self, notes: dict[str, str] = NOTES) -> None:
        """Write the demo's input notes."""
        for path, text in notes.items():
            self.write(path, text)
