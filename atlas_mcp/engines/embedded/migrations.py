"""The store's migrations, by name, each applied once and recorded in the ``migrations`` table.

Every open applies the ones a store has not recorded, in the order of ``MIGRATIONS``, in one
transaction under the write lock, so several processes opening one file at once apply each
exactly once and a crash leaves a store entirely as it was. Schema steps (``schema.py``) and
data steps (which rows to re-embed) are the same kind of thing. To change the store, append a
migration with a new name; an applied one is never edited, renamed or reordered.

Stores written before migrations had names counted them in ``PRAGMA user_version`` (the first
``LEGACY_STEPS`` of ``MIGRATIONS``); the first open here records those as applied (``_bridge``).
``user_version`` stays at ``LEGACY_STEPS`` so that such an older atlas-mcp, opening a store
written here, finds nothing to redo.

The configured embedding models are not a migration: a store records the choice it was
embedded with, and each open compares it with the configuration (``adopt_configured_models``),
which may change in either direction any number of times.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ...errors import ConfigurationError
from ...inference.embedder import BUILT_IN_CHOICES, PER_LANGUAGE_ID, ModelChoice, PerLanguage
from ...log import get_logger
from . import audit_log, cipher, schema

if TYPE_CHECKING:
    from .store import Transaction

log = get_logger(__name__)

_ADOPT_CHUNK = 1_000


@dataclass(frozen=True, slots=True)
class Migration:
    name: str
    apply: Callable[[Transaction], None]


def _schema(step: Callable[[sqlite3.Connection], None]) -> Callable[[Transaction], None]:
    return lambda tx: step(tx.conn)


def _language_from_undated_text(tx: Transaction) -> None:
    """An event's language is read from its own text, not from the English date before it
    (``PerLanguage.model_for``): in a store embedded per language, re-embed in the background
    what that sends to another model; the old vectors serve meanwhile. (A store that moves to
    ``per-language`` later has every row routed by the rule then: ``adopt_choice``.)"""
    recorded = tx.conn.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()
    if recorded is None or recorded[0] != PER_LANGUAGE_ID:
        return
    queued = mark_misrouted(tx.conn, PerLanguage())
    if queued:
        tx.after_commit(
            lambda: log.warning(
                "re-embedding memories whose language was misread, in the background", queued=queued
            )
        )


MIGRATIONS: tuple[Migration, ...] = (
    Migration("initial", _schema(schema.initial)),
    Migration("user-state", _schema(schema.user_state)),
    Migration("owner-rowid-ranges", _schema(schema.owner_rowid_ranges)),
    Migration("filters-in-the-index", _schema(schema.filters_in_the_index)),
    Migration("pending-embeddings", _schema(schema.pending_embeddings)),
    Migration("passages-for-long-texts", _schema(schema.passages_for_long_texts)),
    Migration("analysed-text", _schema(schema.analysed_text)),
    Migration("use-counts-per-owner", _schema(schema.use_counts_per_owner)),
    Migration("language-from-undated-text", _language_from_undated_text),
    Migration("drop-unread-fts-index", _schema(schema.drop_unread_fts_index)),
    Migration("audit-trail", _schema(audit_log.create)),
    Migration("valid-time-and-expiry", _schema(schema.valid_time_and_expiry)),
    Migration("stored-coverage", _schema(schema.stored_coverage)),
)
LEGACY_STEPS = 8  # the migrations stores counted in ``PRAGMA user_version``
# What a store recorded in ``meta`` for the language routing once it was applied.
_ROUTED = ("language_routing", "2", "language-from-undated-text")


def migrate(tx: Transaction) -> None:
    """Apply, inside ``tx`` (a write transaction), every migration the store has not recorded."""
    conn = tx.conn
    applied = _applied(conn)
    if applied is None:
        applied = _bridge(conn)
    unknown = applied - {m.name for m in MIGRATIONS}
    if unknown:
        log.warning("this store was migrated by a newer atlas-mcp", unknown=sorted(unknown))
    for migration in MIGRATIONS:
        if migration.name not in applied:
            migration.apply(tx)
            _record(conn, migration.name)
    conn.execute(f"PRAGMA user_version={LEGACY_STEPS}")


def _applied(conn: sqlite3.Connection) -> set[str] | None:
    """The names recorded, or None if the store has no ``migrations`` table yet."""
    try:
        return {row[0] for row in conn.execute("SELECT name FROM migrations")}
    except cipher.errors("OperationalError"):
        return None


def _bridge(conn: sqlite3.Connection) -> set[str]:
    """Start the ``migrations`` table: a store's ``user_version`` counted the first steps of
    ``MIGRATIONS``, and the language routing was a key in ``meta``."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > LEGACY_STEPS:
        raise ConfigurationError(
            f"the store's schema version ({version}) is newer than this atlas-mcp knows; upgrade atlas-mcp"
        )
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for migration in MIGRATIONS[:version]:
        _record(conn, migration.name)
    bridged = {m.name for m in MIGRATIONS[:version]}
    if version:
        key, done, name = _ROUTED
        routed = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if routed is not None and routed[0] == done:
            _record(conn, name)
            bridged.add(name)
        conn.execute("DELETE FROM meta WHERE key = ?", (key,))
    return bridged


def _record(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(
        "INSERT INTO migrations(name, applied_at) VALUES (?, ?)", (name, datetime.now(UTC).isoformat())
    )


# -- the configured models -----------------------------------------------------------------


def adopt_configured_models(tx: Transaction, models: ModelChoice, where: str) -> None:
    """Never mix vector spaces: a store embedded by another model must be reindexed.

    A new store records the configured choice. Between the built-in choices (``per-language``
    and its two models; MiniLM alone, and MiniLM's float run) a store moves on open instead:
    rows keep their vectors, each compared in its own space, and those now due for another
    model are re-embedded in the background (``adopt_choice``)."""
    wanted = models.choice_id
    row = tx.conn.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()
    if row is None:
        record_choice(tx.conn, wanted)
    elif row[0] != wanted and {row[0], wanted} <= set(BUILT_IN_CHOICES):
        queued = adopt_choice(tx.conn, models)
        if queued:  # an English-only store moving to per-language has nothing to redo
            tx.after_commit(
                lambda: log.warning(
                    "the store's embedding model changed; re-embedding what it concerns in the "
                    "background (`atlas-mcp reindex` does it at once)",
                    previous=row[0],
                    configured=wanted,
                    queued=queued,
                )
            )
    elif row[0] != wanted:
        raise ConfigurationError(
            f"{where} holds vectors from {row[0]!r}, but the configured model is "
            f"{wanted!r}; run `atlas-mcp reindex` to re-embed, or configure "
            "the original model"
        )


def adopt_choice(conn: sqlite3.Connection, models: ModelChoice) -> int:
    """In the caller's write transaction: record ``models`` as the store's configuration and
    mark every row whose vector comes from another model than its language now calls for
    (a Chinese memory embedded by MiniLM) for re-embedding; returns how many.

    The marked rows keep their vectors, compared in their own space, until the background
    repair (``pending.py``) replaces vector and model in one UPDATE. Deciding costs one
    language detection (~20 µs) per row of a model the choice still writes, once.
    """
    due = mark_misrouted(conn, models)
    record_choice(conn, models.choice_id)
    return due


def record_choice(conn: sqlite3.Connection, choice_id: str) -> None:
    """Record which models the store's vectors come from (``ModelChoice.choice_id``)."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('embedding_model', ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (choice_id,),
    )


def mark_misrouted(conn: sqlite3.Connection, models: ModelChoice) -> int:
    """Mark for re-embedding every row whose vector comes from another model than its
    language calls for; returns how many.

    A row from a model the choice no longer writes (MiniLM's float run) is due whatever its
    language, so only rows of the choice's own models are read and their language detected
    (a store of 30k rows moving off the float run answered `initialize` at 1.3 s, against
    2.3 s when every row was read)."""
    members = ", ".join("?" * len(models.members))
    stale = conn.execute(
        "INSERT OR IGNORE INTO pending_embeddings(rowid) SELECT rowid FROM memories "
        f"WHERE length(embedding) > 0 AND embedding_model NOT IN ({members})",
        models.members,
    ).rowcount
    due: list[tuple[int]] = []
    cursor = conn.execute(
        "SELECT rowid, search_text, embedding_model FROM memories "
        f"WHERE length(embedding) > 0 AND embedding_model IN ({members})",
        models.members,
    )
    while chunk := cursor.fetchmany(_ADOPT_CHUNK):
        due.extend((rowid,) for rowid, text, model in chunk if models.model_for(text) != model)
    conn.executemany("INSERT OR IGNORE INTO pending_embeddings(rowid) VALUES (?)", due)
    return stale + len(due)
