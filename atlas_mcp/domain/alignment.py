"""Two word lists aligned: which runs they share, and what replaces, drops or adds the rest.

``opcodes(a, b)`` gives what ``difflib.SequenceMatcher(None, a, b, autojunk=False)
.get_opcodes()`` gives (a test holds it to that): the longest run the two lists share (the one
that starts earliest in ``a``, then earliest in ``b``), then the same on each side of it, and
the runs between as replace / delete / insert. ``domain.sameness`` aligns the two facts of
every pair a recall compares for the first time; its lists are a few words long, where
building a ``SequenceMatcher`` (its index of ``b``, a named tuple per block, a queue) cost
most of the ~8 µs an alignment took.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]


def opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """How to turn ``a`` into ``b``: (tag, a_start, a_end, b_start, b_end), in order."""
    if a == b:
        return [("equal", 0, len(a), 0, len(b))] if a else []
    at: dict[str, list[int]] = {}
    for j, word in enumerate(b):
        at.setdefault(word, []).append(j)
    blocks: list[tuple[int, int, int]] = []
    _shared_runs(a, at, 0, len(a), 0, len(b), blocks)
    blocks.sort()
    out: list[Opcode] = []
    i = j = 0
    for start_a, start_b, size in [*_joined(blocks), (len(a), len(b), 0)]:
        if i < start_a and j < start_b:
            out.append(("replace", i, start_a, j, start_b))
        elif i < start_a:
            out.append(("delete", i, start_a, j, start_b))
        elif j < start_b:
            out.append(("insert", i, start_a, j, start_b))
        i, j = start_a + size, start_b + size
        if size:
            out.append(("equal", start_a, i, start_b, j))
    return out


def _shared_runs(
    a: Sequence[str],
    at: dict[str, list[int]],
    alo: int,
    ahi: int,
    blo: int,
    bhi: int,
    out: list[tuple[int, int, int]],
) -> None:
    """The longest shared run within a[alo:ahi] and b[blo:bhi], then those on either side of it."""
    start_a, start_b, size = _longest(a, at, alo, ahi, blo, bhi)
    if not size:
        return
    out.append((start_a, start_b, size))
    if alo < start_a and blo < start_b:
        _shared_runs(a, at, alo, start_a, blo, start_b, out)
    if start_a + size < ahi and start_b + size < bhi:
        _shared_runs(a, at, start_a + size, ahi, start_b + size, bhi, out)


def _longest(
    a: Sequence[str], at: dict[str, list[int]], alo: int, ahi: int, blo: int, bhi: int
) -> tuple[int, int, int]:
    """The longest run a[i:i+k] == b[j:j+k] inside the ranges: of the longest, the one ending
    (so starting) first in ``a``, then first in ``b``; (alo, blo, 0) when they share nothing."""
    best = (alo, blo, 0)
    ending: dict[int, int] = {}  # j -> length of the run ending at (i - 1, j)
    for i in range(alo, ahi):
        here: dict[int, int] = {}
        for j in at.get(a[i], ()):
            if j < blo:
                continue
            if j >= bhi:
                break
            k = here[j] = ending.get(j - 1, 0) + 1
            if k > best[2]:
                best = (i - k + 1, j - k + 1, k)
        ending = here
    return best


def _joined(blocks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Sorted runs with the ones that continue each other joined into one."""
    out: list[tuple[int, int, int]] = []
    for start_a, start_b, size in blocks:
        if out and out[-1][0] + out[-1][2] == start_a and out[-1][1] + out[-1][2] == start_b:
            out[-1] = (out[-1][0], out[-1][1], out[-1][2] + size)
        else:
            out.append((start_a, start_b, size))
    return out
