"""What `forge check` reports: findings with a severity, a code, the entry and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Finding", "Severity"]


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing `forge check` found. `entry` names the state or transition concerned;
    `message` says what is wrong and how to fix it."""

    severity: Severity
    code: str
    path: str
    entry: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}[{self.code}] {self.path}: {self.entry}: {self.message}"
