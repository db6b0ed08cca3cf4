"""Per-owner vector matrices, cached in memory and refreshed when another write lands.

Exact cosine over one owner's vectors is a single matrix-vector product (~3 ms for 20k × 384
on 2 cores), so no approximate index is needed at agent-memory scale. The cache is keyed by
``owner_versions``: any process that changes an owner's vectors or supersession state bumps
that owner's version, and every process reloads only what changed on its next recall.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

import numpy as np

CATALOG_OWNER = ""


@dataclass
class OwnerVectors:
    version: int = -1
    ids: list[str] = field(default_factory=list)
    types: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    superseded: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 384), dtype=np.float32))
    rowids: dict[int, int] = field(default_factory=dict)  # rowid -> row of matrix
    index: dict[str, int] = field(default_factory=dict)  # memory id -> row of matrix


def owner_key(user_id: str | None) -> str:
    return CATALOG_OWNER if user_id is None else user_id


def owner_version(conn: sqlite3.Connection, owner: str) -> int:
    row = conn.execute("SELECT version FROM owner_versions WHERE owner = ?", (owner,)).fetchone()
    return row[0] if row else 0


def bump_version(conn: sqlite3.Connection, owner: str) -> None:
    conn.execute(
        "INSERT INTO owner_versions(owner, version) VALUES (?, 1) "
        "ON CONFLICT(owner) DO UPDATE SET version = version + 1",
        (owner,),
    )


class VectorCache:
    def __init__(self, dimensions: int) -> None:
        self._dimensions = dimensions
        self._owners: dict[str, OwnerVectors] = {}

    def get(self, conn: sqlite3.Connection, owner: str) -> OwnerVectors:
        version = owner_version(conn, owner)
        cached = self._owners.get(owner)
        if cached is None or cached.version != version:
            cached = self._reload(conn, owner, version, cached or OwnerVectors())
            self._owners[owner] = cached
        return cached

    def _reload(
        self, conn: sqlite3.Connection, owner: str, version: int, old: OwnerVectors
    ) -> OwnerVectors:
        """Re-read the cheap columns; fetch embeddings only for rows this process lacks."""
        where = "user_id IS NULL" if owner == CATALOG_OWNER else "user_id = ?"
        params = () if owner == CATALOG_OWNER else (owner,)
        rows = conn.execute(
            f"SELECT rowid, id, memory_type, superseded_by IS NOT NULL FROM memories "
            f"WHERE {where} ORDER BY rowid",
            params,
        ).fetchall()
        missing = [r[0] for r in rows if r[0] not in old.rowids]
        fresh = self._embeddings(conn, missing)
        matrix = np.empty((len(rows), self._dimensions), dtype=np.float32)
        for position, row in enumerate(rows):
            rowid = row[0]
            matrix[position] = old.matrix[old.rowids[rowid]] if rowid in old.rowids else fresh[rowid]
        return OwnerVectors(
            version=version,
            ids=[r[1] for r in rows],
            types=np.array([r[2] for r in rows], dtype=object),
            superseded=np.array([bool(r[3]) for r in rows], dtype=bool),
            matrix=matrix,
            rowids={r[0]: i for i, r in enumerate(rows)},
            index={r[1]: i for i, r in enumerate(rows)},
        )

    def _embeddings(self, conn: sqlite3.Connection, rowids: list[int]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        for start in range(0, len(rowids), 500):
            chunk = rowids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for rowid, blob in conn.execute(
                f"SELECT rowid, embedding FROM memories WHERE rowid IN ({marks})", chunk
            ):
                out[rowid] = np.frombuffer(blob, dtype=np.float32)
        return out


def top_dense(
    vectors: OwnerVectors, query: np.ndarray, allowed_types: set[str], include_superseded: bool, window: int
) -> list[tuple[str, float]]:
    """The ``window`` most similar allowed rows as (id, cosine), best first."""
    if not vectors.ids:
        return []
    scores = vectors.matrix @ query
    mask = np.isin(vectors.types, list(allowed_types))
    if not include_superseded:
        mask &= ~vectors.superseded
    allowed = np.flatnonzero(mask)
    if allowed.size == 0:
        return []
    negated = -scores[allowed]
    keep = np.argpartition(negated, window)[:window] if allowed.size > window else np.arange(allowed.size)
    picked = allowed[keep[np.argsort(negated[keep], kind="stable")]]
    return [(vectors.ids[i], float(scores[i])) for i in picked]
