"""A recall's candidates as integer keys, from the search to the pool.

BM25 and the cosine scan find rows of the visible owners' indexes; a row is carried as one
int64 key (the owner's place among the visible ones, then its row), fused as such
(``domain.fusion.fused_keys``), and only the fused ones become memory ids. The fusion breaks
ties by id, so each owner's index keeps its ids' order (``OwnerIndex.id_order``) and a tie
costs no string comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .index import OwnerIndex

ROW_BITS = 32
ROW_MASK = (1 << ROW_BITS) - 1


def row_keys(place: int, rows: np.ndarray) -> np.ndarray:
    """One key per row of the ``place``-th visible owner."""
    return (place << ROW_BITS) | rows.astype(np.int64)


def ids_of(owners: Sequence[OwnerIndex], keys: np.ndarray) -> list[str]:
    """The memory ids of ``keys`` (``owners``: the visible owners' indexes, in place order)."""
    if not (keys >> ROW_BITS).any():  # all the first owner's (the user's): a key is its row
        return list(map(owners[0].ids.__getitem__, keys.tolist()))
    places, rows = (keys >> ROW_BITS).tolist(), (keys & ROW_MASK).tolist()
    return [owners[place].ids[row] for place, row in zip(places, rows, strict=True)]


def id_order(owners: Sequence[OwnerIndex]) -> Callable[[np.ndarray], np.ndarray]:
    """For ``fused_keys``: distinct keys' numbers in the order of their ids, from the owner's
    ``id_order`` when all are one owner's (every recall but those matching the catalog too),
    else from their ids compared."""

    def order(keys: np.ndarray) -> np.ndarray:
        if len(owners) == 1:  # one owner (most recalls): every key is its row
            kept: np.ndarray = owners[0].id_order()[keys]
            return kept
        places = keys >> ROW_BITS
        if len(keys) and bool((places == places[0]).all()):
            found: np.ndarray = owners[int(places[0])].id_order()[keys & ROW_MASK]
            return found
        ids = ids_of(owners, keys)
        by_id = sorted(range(len(ids)), key=ids.__getitem__)
        out = np.empty(len(ids), dtype=np.int64)
        out[by_id] = np.arange(len(ids))
        return out

    return order
