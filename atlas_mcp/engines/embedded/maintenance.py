"""What an operator, the benchmark and the tests do to an embedded store beyond ``Engine``:
bulk loads, the BM25 branch alone, the disk-sync mode of a stretch of commits, re-embedding
every row, and its encryption key (opening a connection with it, re-encrypting the store).
Code outside ``engines/embedded`` reaches the engine's internals only through here.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

import numpy as np

from ...domain.model import Memory
from ..base import RecallPlan
from . import rows, slots, store, versions
from .cipher import StoreKey, configured_key, store_key
from .cipher import connect as connect_file
from .engine import EmbeddedEngine
from .passages import as_passage_vectors, embed_by_model, to_blob
from .reindex import reindex
from .rekey import rekey as re_encrypt
from .slots import owner_key

__all__ = [
    "EmbeddedEngine",
    "StoreKey",
    "configured_key",
    "connect_file",
    "lexical",
    "re_encrypt",
    "reindex",
    "store_key",
    "synchronous",
    "write_many",
]


def write_many(
    engine: EmbeddedEngine,
    memories: Sequence[Memory],
    vectors: np.ndarray | Sequence[np.ndarray] | None = None,
) -> None:
    """Bulk-load finished memories as they are, supersession fields included (bench, tests).

    It embeds in batches (one model call per 32 passages instead of one per memory), or takes
    ``vectors`` the caller already computed with the engine's model (one per memory, or per
    memory its passages' vectors, see ``passages.py``), and commits everything in one
    transaction. No supersession rules run here: whoever loads has applied them. Given
    ``vectors`` must come from the engine's first model (MiniLM under per-language) and are
    recorded as that model's.
    """
    models = engine.models
    if vectors is None:
        per_memory = embed_by_model(models, [m.search_text() for m in memories])
    else:
        per_memory = [(models.members[0], v) for v in as_passage_vectors(vectors)]
    if len(per_memory) != len(memories):
        raise ValueError(f"{len(memories)} memories but {len(per_memory)} vectors")
    stored = [
        rows.to_row(m) | {"embedding": to_blob(v), "embedding_model": model}
        for m, (model, v) in zip(memories, per_memory, strict=True)
    ]
    with engine.store.transaction() as tx:
        following: dict[str, int] = {}
        for row in stored:
            owner = owner_key(row["user_id"])
            row["rowid"] = following[owner] = following.get(owner) or slots.next_rowid(tx.conn, owner)
            following[owner] += 1
        store.insert_many(tx.conn, stored)
        for owner in sorted({owner_key(m.user_id) for m in memories}):
            versions.bump(tx.conn, owner)


def lexical(engine: EmbeddedEngine, plan: RecallPlan) -> list[tuple[str, float]]:
    """The BM25 branch alone, best first, as (id, score)."""
    return engine.search.lexical(plan)


def synchronous(engine: EmbeddedEngine, mode: str) -> AbstractContextManager[None]:
    """Commits made inside wait for the disk as SQLite's ``synchronous=mode`` says (``FULL``:
    the store's setting; ``NORMAL``: none until the next FULL commit): to measure the cost."""
    return engine.store.synchronous(mode)
