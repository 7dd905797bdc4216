"""A sequence kept as columns and made into values when read: what a run's trace and journal
are, since a long run keeps a few of each per step and a column of small numbers costs far
less than an object per entry."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar, overload

__all__ = ["Columns"]

T = TypeVar("T")


class Columns(Sequence[T]):
    """The read side of a columnar sequence: a subclass keeps the columns and says how long
    it is (`__len__`) and how to make the item at an index (`_item`); `what` names it in
    errors. Equal to any sequence of equal items."""

    __slots__ = ()
    what = "columns"

    def _item(self, index: int) -> T:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...
    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(self._item(i) for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"{self.what} index out of range")
        return self._item(index)

    def __iter__(self) -> Iterator[T]:
        return (self._item(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, bytes)) or not isinstance(other, Sequence):
            return NotImplemented
        return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]
