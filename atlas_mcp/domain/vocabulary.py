"""Words as small integers: one code per distinct word for the life of the process.

A memory's coverage words (``pool.RowFacts.words``) are kept as codes beside the set
(``RowFacts.codes``, worked out once per memory, when its facts are). A recall then asks which
of its ~300 candidates hold each query word as one gather over the pool's codes
(``calibration.coverages``) instead of a set intersection per candidate (at one-chat 12k,
~195 -> ~50 us a recall on captured pools).

Only memories' words are given codes; a query looks its words up (``code``) and never adds
one, so the table grows with what is stored, not with what is asked.
"""

from __future__ import annotations

import threading
from collections.abc import Collection

import numpy as np

_CODES: dict[str, int] = {}
_LOCK = threading.Lock()  # a new code is the table's size: two writers must not both take it


def encoded(words: Collection[str]) -> bytes:
    """The codes of ``words``, in their iteration order, as packed int32 (a memory's
    ``RowFacts.codes``: bytes, so a pool joins ~300 of them at C speed)."""
    codes = _CODES
    missing = [word for word in words if word not in codes]
    if missing:
        with _LOCK:
            for word in missing:
                codes.setdefault(word, len(codes))
    return np.array([codes[word] for word in words], dtype=np.int32).tobytes()


def code(word: str) -> int | None:
    """``word``'s code, None if no memory's words hold it."""
    return _CODES.get(word)


def size() -> int:
    """One more than the highest code given so far."""
    return len(_CODES)
