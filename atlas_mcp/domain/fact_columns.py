"""A pool's columns of its candidates' ``pool.RowFacts``, without a pass over every fact.

Numbers: a memory's number facts are packed as one record, so a pool reads ~300 as arrays at once.

Each memory's ``pool.RowFacts`` numbers (type, dates, length, speaker and head codes, expiry,
whether it asks) are packed once, when its facts are made, into one little-endian record of
fixed size. A recall's pool joins its candidates' records and reads them as one structured
array, a copy per column: ~11 us at 300 candidates, where a transposition of the facts and
an ``np.fromiter`` per column took ~85 us (warm; each number is its own Python object, so in a
recall, after the model and the scan have passed through the caches, most of them are also a
cache miss).

The other facts (speaker, words, head, opening, codes, names inside) are objects; a pool makes
the list of one (``FactColumn``) when it is first read, ~8 us at 300 candidates: most recalls
read two of the six.
"""

from __future__ import annotations

import struct
from collections.abc import Hashable, Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from operator import attrgetter
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

NO_TIME = np.iinfo(np.int64).min  # a date a memory does not have
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def microseconds(when: datetime | None) -> int:
    """A date as whole microseconds since 1970 (exact, so dates compare and subtract as they do)."""
    return NO_TIME if when is None else (when - EPOCH) // MICROSECOND


# The field order and types of a record; the dtype below reads exactly these bytes.
_RECORD = struct.Struct("<Bqqdqqq?")
RECORD_DTYPE = np.dtype(
    [
        ("kind", "<u1"),
        ("occurred", "<i8"),
        ("created", "<i8"),
        ("log_words", "<f8"),
        ("speaker_code", "<i8"),
        ("expires", "<i8"),
        ("head_code", "<i8"),
        ("asks", "?"),
    ]
)
assert RECORD_DTYPE.itemsize == _RECORD.size  # packed, no padding on either side


def packed(
    kind: int,
    occurred: int,
    created: int,
    log_words: float,
    speaker_code: int,
    expires: int,
    head_code: int,
    asks: bool,
) -> bytes:
    """One memory's numbers as its record (the float's own 8 bytes: read back bit for bit)."""
    return _RECORD.pack(kind, occurred, created, log_words, speaker_code, expires, head_code, asks)


def number_columns(records: Sequence[bytes]) -> dict[str, np.ndarray]:
    """Per field of ``RECORD_DTYPE``, the column of ``records`` (contiguous, writable)."""
    table = np.frombuffer(b"".join(records), dtype=RECORD_DTYPE)
    return {name: table[name].copy() for name in RECORD_DTYPE.names or ()}


# A memory's use count and last use (``microseconds``), which every use changes: an engine that
# keeps a memory keeps this record beside it, made anew with each use (``use_record``), so a
# pool reads the uses of its ~140 facts from one join instead of from each memory object and
# its date (most of them cache misses in a recall: ~130 us against ~30 for the join).
_USES = struct.Struct("<qq")
_USES_DTYPE = np.dtype([("count", "<i8"), ("last", "<i8")])
assert _USES_DTYPE.itemsize == _USES.size
# a memory keeps its last use from one recall to the next (a use makes a new memory), so most
# of the ~200 a recall of facts reads were read before
_last_use = lru_cache(maxsize=1 << 15)(microseconds)


def use_record(use_count: int, last_used_at: datetime | None) -> bytes:
    return _USES.pack(use_count, _last_use(last_used_at))


def use_columns(picked: Sequence[bytes], rows: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate, the use count and last use of the records ``picked`` for ``rows`` (0 and
    NO_TIME at the others)."""
    counts = np.zeros(size, dtype=np.int64)
    last = np.full(size, NO_TIME, dtype=np.int64)
    if len(rows):
        table = np.frombuffer(b"".join(picked), dtype=_USES_DTYPE)
        counts[rows], last[rows] = table["count"], table["last"]
    return counts, last


T = TypeVar("T")


class FactRows(Protocol):
    """What a ``FactColumn`` reads: the candidates' facts and memories, and where to keep what
    it made."""

    @property
    def facts(self) -> Sequence[Any]: ...

    @property
    def memories(self) -> Sequence[Any]: ...

    @property
    def derived(self) -> dict[Hashable, Any]: ...


class FactColumn(Generic[T]):
    """One field of every candidate's facts (or of its memory: ``of_memory``) as a list, in
    candidate order, made when first read and kept in the pool's ``derived`` (a pool copied by
    ``replace`` makes it again)."""

    def __init__(self, field: str, of_memory: bool = False) -> None:
        self._read = attrgetter(field)
        self._of_memory = of_memory
        self._key = ("memories" if of_memory else "facts", field)

    def __get__(self, rows: FactRows, owner: type | None = None) -> list[T]:
        column: list[T] | None = rows.derived.get(self._key)
        if column is None:
            column = rows.derived[self._key] = list(
                map(self._read, rows.memories if self._of_memory else rows.facts)
            )
        return column
