"""Names as small integers: one code per distinct word (or speaker) for the life of the process.

A memory's coverage words (``pool.RowFacts.words``) are kept as codes beside the set
(``RowFacts.codes``, worked out once per memory, when its facts are). A recall then asks which
of its ~300 candidates hold each query word as one gather over the pool's codes
(``calibration.coverages``) instead of a set intersection per candidate (at one-chat 12k,
~195 -> ~50 us a recall on captured pools). A turn's speaker is kept as a code too
(``RowFacts.speaker_code``), so "is this the same speaker" is one array comparison.

Only memories' names are given codes; a query looks its words up (``Codes.code``) and never
adds one, so a table grows with what is stored, not with what is asked.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Collection, Sequence

import numpy as np


class Codes:
    """One table of codes: 0, 1, 2 ... in the order names are first added."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}
        self._names: list[str] = []  # by code
        self._lock = threading.Lock()  # a new code is the table's size: two writers must not both take it

    def add(self, names: Collection[str]) -> list[int]:
        """The codes of ``names``, in their iteration order (new names get new codes)."""
        codes = self._codes
        missing = [name for name in names if name not in codes]
        if missing:
            with self._lock:
                for name in missing:
                    if name not in codes:
                        codes[name] = len(self._names)
                        self._names.append(name)
        return [codes[name] for name in names]

    @property
    def known(self) -> Callable[[str], int]:
        """The code of a name already added (KeyError for another): a look-up, no lock."""
        return self._codes.__getitem__

    def code(self, name: str) -> int | None:
        """``name``'s code, None if it was never added."""
        return self._codes.get(name)

    def name(self, code: int) -> str:
        """The name of ``code`` (one ``add`` gave)."""
        return self._names[code]

    def size(self) -> int:
        """One more than the highest code given so far."""
        return len(self._codes)


WORDS = Codes()  # coverage words and their stems
SPEAKERS = Codes()  # the speakers of transcript turns and the heads of events (``openings``)
NO_SPEAKER = -1
# Code 0 of ``WORDS`` is no word (a coverage word has a letter): it ends each memory's codes, so
# in a pool's joined codes where each memory's end is found by one comparison over the array,
# not by asking each of ~300 byte strings its length.
END = WORDS.add(("",))[0]
_END = np.array([END], dtype=np.int32).tobytes()
if array("i").itemsize != 4:  # the codes' bytes are read back as int32 (``joined``)
    raise ImportError("vocabulary codes need a 4-byte C int")


def encoded(words: Collection[str]) -> bytes:
    """The ``WORDS`` codes of ``words``, in their iteration order, then ``END``, as packed
    int32 (a memory's ``RowFacts.codes``: bytes, so a pool joins ~300 of them at C speed)."""
    # Most memories' words all have codes already: one pass of look-ups in C, packed by
    # ``array`` (7.7 -> 4.4 us a LoCoMo turn; every memory a recall meets first is encoded).
    try:
        codes = array("i", map(WORDS.known, words))
    except KeyError:  # a word new to the process
        codes = array("i", WORDS.add(words))
    return codes.tobytes() + _END


def joined(codes: Sequence[bytes]) -> np.ndarray:
    """Memories' codes (each as ``encoded`` gives them) joined in order, as int32."""
    return np.frombuffer(b"".join(codes), dtype=np.int32)


def speaker_code(name: str | None) -> int:
    """``name``'s ``SPEAKERS`` code, ``NO_SPEAKER`` for None."""
    return NO_SPEAKER if name is None else SPEAKERS.add((name,))[0]
