"""How every benchmark line ends: its target and whether this run met it, so that a reader
can tell a miss from noise."""

from __future__ import annotations


def against(ratio: float, target: float, unit: str = "x") -> str:
    """`(target <= 1.5x) MET` or `… MISSED`."""
    return f"(target <= {target:g}{unit}) {'MET' if ratio <= target else 'MISSED'}"


def at_least(ratio: float, target: float, unit: str = "x") -> str:
    """`(target >= 5x) MET` or `… MISSED`: for a ratio that should be large (a speed-up)."""
    return f"(target >= {target:g}{unit}) {'MET' if ratio >= target else 'MISSED'}"
