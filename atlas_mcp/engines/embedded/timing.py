"""``domain.validity``'s time filter as SQL over the ``memories`` rows: which rows a recall
with ``as_of`` or ``since``/``until`` may return.

ISO-8601 UTC text (``domain.model.iso``) orders as the instants do, so the comparisons run on
the stored text. A row's span: an event is its instant; a fact runs from ``valid_from`` (else
its writing) until ``valid_to`` (else when it was superseded, else open); a playbook from its
writing until it was superseded.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from ...domain.model import iso
from ...domain.validity import TimeFilter

_EVENT = "memory_type = 'episodic'"
_START = (
    "CASE memory_type WHEN 'episodic' THEN COALESCE(occurred_at, created_at) "
    "WHEN 'semantic' THEN COALESCE(valid_from, created_at) ELSE created_at END"
)
_END = "CASE memory_type WHEN 'semantic' THEN COALESCE(valid_to, superseded_at) ELSE superseded_at END"


def time_clause(window: TimeFilter) -> tuple[str, list[str | None]]:
    """A WHERE clause (and its parameters) keeping the rows ``window`` keeps."""
    clauses, params = [], []
    if window.as_of is not None:
        at = iso(window.as_of)
        clauses.append(
            f"(({_EVENT} AND {_START} <= ?) OR (NOT {_EVENT} AND {_START} <= ? AND ({_END} IS NULL OR {_END} > ?)))"
        )
        params += [at, at, at]
    if window.since is not None or window.until is not None:
        since, until = iso(window.since), iso(window.until)
        clauses.append(
            f"(({_EVENT} AND (? IS NULL OR {_START} >= ?) AND (? IS NULL OR {_START} <= ?)) OR "
            f"(NOT {_EVENT} AND (? IS NULL OR {_START} <= ?) AND (? IS NULL OR {_END} IS NULL OR {_END} > ?)))"
        )
        params += [since, since, until, until, until, until, since, since]
    return " AND ".join(clauses) or "1", params


def rows_in_time(
    conn: sqlite3.Connection, owner: str, rowids: dict[int, int], size: int, window: TimeFilter
) -> np.ndarray:
    """Per cached row of ``owner``: does ``window`` keep it?"""
    clause, params = time_clause(window)
    mask = np.zeros(size, dtype=bool)
    found = conn.execute(f"SELECT rowid FROM memories WHERE user_id = ? AND {clause}", (owner, *params))
    rows = [rowids[r] for (r,) in found if r in rowids]
    mask[rows] = True
    return mask
