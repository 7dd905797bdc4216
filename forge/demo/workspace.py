"""A folder the demo's file tools may touch, and nothing outside it.

Every path a tool is given is resolved (following `..` and symlinks) before use; a path
that lands outside the workspace, is absolute, or holds a NUL byte is refused with a
`PermanentToolError`: retrying cannot make it allowed.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

from forge.agent.retry import PermanentToolError

__all__ = ["NOTES", "Workspace"]

NOTES: dict[str, str] = {
    "notes/forge.md": "# Forge design\n\nThe loop is an explicit state machine.\nEvery stop reason is a state.\n",
    "notes/retries.md": "# Retry policy\n\nOnly transient errors are retried, with backoff and a bound.\n",
    "notes/diagrams.md": "# Diagrams\n\nDrawn from the definition that runs, so they cannot disagree with it.\n",
}


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
        resolved = (self.root / path).resolve()
        if not resolved.is_relative_to(self.root):
            raise PermanentToolError(f"permission denied: {path!r} resolves outside the workspace")
        return resolved

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def list_notes(self, folder: str) -> list[str]:
        """Markdown files directly in `folder`, as sorted workspace-relative paths."""
        directory = self.resolve(folder)
        if not directory.is_dir():
            raise PermanentToolError(f"{folder!r} is not a folder in the workspace")
        found = []
        for entry in directory.iterdir():
            if entry.suffix == ".md" and entry.resolve().is_relative_to(self.root) and entry.resolve().is_file():
                found.append(self.relative(entry))
        return sorted(found)

    def read(self, path: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise PermanentToolError(f"{path!r} is not a file in the workspace")
        return target.read_text(encoding="utf-8")

    def write(self, path: str, text: str) -> int:
        """Write `text` to `path` (parents created inside the workspace); returns bytes written."""
        target = self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        target.write_bytes(data)
        return len(data)

    def seed(self, notes: dict[str, str] = NOTES) -> None:
        """Write the demo's input notes."""
        for path, text in notes.items():
            self.write(path, text)
