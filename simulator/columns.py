"""Per-request columns of a run, packed: a day of traffic is millions of requests.

A run keeps, for every request, when it arrived, its first token, its end,
its output tokens and why it failed. As tuples of Python floats that is
about 100 bytes a request; a week of a production service (17 million
requests) would not fit in memory. These columns hold the same values in
arrays (8 bytes a time, 1 a failure reason) and read back as the tuples
did: a time that never came is None, a request that did not fail has
reason None.

Main decision: they are :class:`~collections.abc.Sequence` s, equal to any
sequence with the same items (a tuple, another column), so a scorecard, a
chart or a test reads a packed run exactly as it read one made of tuples.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar, overload

__all__ = ["Counts", "Reasons", "Seconds", "Times"]

T = TypeVar("T")


class _Column(Sequence[T]):
    """Equality and a short repr shared by the columns (by items, as tuples compare)."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} values)"


class Times(_Column[float | None]):
    """Seconds, or None for a moment that never came (a failed request's first token)."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[float | None] = ()) -> None:
        self._values = array("d", (math.nan if v is None else v for v in values))

    def append(self, value: float | None) -> None:
        self._values.append(math.nan if value is None else value)

    def set(self, index: int, value: float) -> None:
        self._values[index] = value

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> float | None: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[float | None]: ...
    def __getitem__(self, index: int | slice) -> float | Sequence[float | None] | None:
        if isinstance(index, slice):
            return tuple(self)[index]
        value = self._values[index]
        return None if math.isnan(value) else value

    def __iter__(self) -> Iterator[float | None]:
        isnan = math.isnan
        for value in self._values:
            yield None if isnan(value) else value


class Reasons(_Column[str | None]):
    """Why each request failed, or None: a byte per request and the reasons' names."""

    __slots__ = ("_codes", "_names")

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._codes = array("B")
        self._names: list[str] = []
        for value in values:
            self.append(value)

    def _code(self, reason: str | None) -> int:
        if reason is None:
            return 0
        try:
            return self._names.index(reason) + 1
        except ValueError:
            self._names.append(reason)
            return len(self._names)

    def append(self, reason: str | None) -> None:
        self._codes.append(self._code(reason))

    def set(self, index: int, reason: str) -> None:
        self._codes[index] = self._code(reason)

    def __len__(self) -> int:
        return len(self._codes)

    @overload
    def __getitem__(self, index: int) -> str | None: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str | None]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str | None] | None:
        if isinstance(index, slice):
            return tuple(self)[index]
        code = self._codes[index]
        return None if code == 0 else self._names[code - 1]

    def __iter__(self) -> Iterator[str | None]:
        names = [None, *self._names]
        for code in self._codes:
            yield names[code]


class Counts(_Column[int]):
    """Whole numbers (tokens), four bytes each."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[int] = ()) -> None:
        self._values = array("i", values)

    def append(self, value: int) -> None:
        self._values.append(value)

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...
    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return tuple(self._values[index])
        return self._values[index]

    def __iter__(self) -> Iterator[int]:
        return iter(self._values)


class Seconds(_Column[float]):
    """Seconds, every one present (arrival times)."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[float] = ()) -> None:
        self._values = array("d", values)

    def append(self, value: float) -> None:
        self._values.append(value)

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> float: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[float]: ...
    def __getitem__(self, index: int | slice) -> float | Sequence[float]:
        if isinstance(index, slice):
            return tuple(self._values[index])
        return self._values[index]

    def __iter__(self) -> Iterator[float]:
        return iter(self._values)
