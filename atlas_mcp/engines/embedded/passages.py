"""A memory's vectors: one per overlapping passage of its text, stored as one blob.

MiniLM reads at most 256 tokens, so one vector per memory made the middle and end of a long
note invisible to the dense branch. A long text is cut into overlapping token windows
(``Embedder.passages``: a model without a window keeps the whole text as one passage)
and each window gets its own vector; a memory's dense similarity is its best passage's.
The vectors are stored back to back in the ``embedding`` column, first passage first, so a
short memory's blob is exactly what it always was, and an empty blob still means "pending".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...inference.base import Embedder
from ...inference.embedder import ModelChoice


def embed_memories(embedder: Embedder, texts: Sequence[str]) -> list[np.ndarray]:
    """Per text, a float32 array (passages, dimensions); one batched model call for them all."""
    pieces = [embedder.passages(text) for text in texts]
    flat = embedder.embed_batch([p for text_pieces in pieces for p in text_pieces])
    out, start = [], 0
    for text_pieces in pieces:
        out.append(np.asarray(flat[start : start + len(text_pieces)], dtype=np.float32))
        start += len(text_pieces)
    return out


def embed_by_model(models: ModelChoice, texts: Sequence[str]) -> list[tuple[str, np.ndarray]]:
    """Per text, the model its language calls for and its passage vectors from that model;
    one batched call per model."""
    chosen = [models.model_for(text) for text in texts]
    out: list[tuple[str, np.ndarray]] = [("", np.zeros(0))] * len(texts)
    for model_id in dict.fromkeys(chosen):
        at = [i for i, m in enumerate(chosen) if m == model_id]
        vectors = embed_memories(models.embedder(model_id), [texts[i] for i in at])
        for i, v in zip(at, vectors, strict=True):
            out[i] = (model_id, v)
    return out


def to_blob(vectors: np.ndarray) -> bytes:
    return np.asarray(vectors, dtype=np.float32).tobytes()


def from_blob(blob: bytes, dimensions: int) -> np.ndarray:
    """(passages, dimensions) float32; zero rows for a pending (empty) blob."""
    return np.frombuffer(blob, dtype=np.float32).reshape(-1, dimensions)


def as_passage_vectors(vectors: np.ndarray | Sequence[np.ndarray]) -> list[np.ndarray]:
    """Accept one vector per memory (2-D array) or per-memory passage arrays, as given to bulk loads."""
    if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
        return [vectors[i : i + 1] for i in range(len(vectors))]
    return [np.atleast_2d(np.asarray(v, dtype=np.float32)) for v in vectors]
