"""The SQLite schema: the store's pragmas, and the steps that build and change its tables
(applied once each, by name, by ``migrations.py``).

One file holds every user's memories; ``user_id IS NULL`` marks a shared catalog entry. The
steps are the store's history and stay as they ran: a store written long ago is brought up to
date by running them in order. Steps 1-7 built an FTS5 index that recall read until BM25 moved
to in-memory postings (``postings.py``); ``drop_unread_fts_index`` removes it.
"""

from __future__ import annotations

import sqlite3

from ...domain.lexical import analyse

SYNCHRONOUS = "FULL"  # an acknowledged write survives a crash or power loss
SYNCHRONOUS_MODES = ("FULL", "NORMAL")  # what store.Store.synchronous accepts
PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    f"PRAGMA synchronous={SYNCHRONOUS}",
    "PRAGMA foreign_keys=ON",
    "PRAGMA temp_store=MEMORY",
)

_M001 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE memories (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT,
    memory_type TEXT NOT NULL CHECK (memory_type IN ('episodic','semantic','procedural','catalog')),
    text TEXT NOT NULL,
    search_text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    occurred_at TEXT,
    fact_type TEXT,
    confidence REAL,
    source_episodes TEXT NOT NULL DEFAULT '[]',
    supersedes TEXT NOT NULL DEFAULT '[]',
    superseded_by TEXT,
    superseded_at TEXT,
    last_used_at TEXT,
    use_count INTEGER NOT NULL DEFAULT 0,
    name TEXT,
    steps TEXT NOT NULL DEFAULT '[]',
    success_count INTEGER NOT NULL DEFAULT 0,
    failure_count INTEGER NOT NULL DEFAULT 0,
    last_success_at TEXT,
    title TEXT,
    category TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    metadata TEXT NOT NULL DEFAULT '{}',
    embedding BLOB NOT NULL,
    embedding_model TEXT NOT NULL,
    CHECK ((user_id IS NULL) = (memory_type = 'catalog'))
);
CREATE INDEX memories_by_owner ON memories (user_id, memory_type);
CREATE VIRTUAL TABLE memories_fts USING fts5(
    search_text, content='memories', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, search_text) VALUES (new.rowid, new.search_text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, search_text) VALUES ('delete', old.rowid, old.search_text);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF search_text ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, search_text) VALUES ('delete', old.rowid, old.search_text);
    INSERT INTO memories_fts(rowid, search_text) VALUES (new.rowid, new.search_text);
END;
-- Bumped on every change to an owner's vectors or visibility; '' is the catalog. Lets each
-- process keep its vector matrices cached and still see other processes' writes.
CREATE TABLE owner_versions (owner TEXT PRIMARY KEY, version INTEGER NOT NULL);
"""


def initial(conn: sqlite3.Connection) -> None:
    _run_script(conn, _M001)


def user_state(conn: sqlite3.Connection) -> None:
    # Per-user bookkeeping (the consolidation watermark and its in-flight batch).
    conn.execute(
        "CREATE TABLE user_state (user_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
        "PRIMARY KEY (user_id, key))"
    )


SLOT_BITS = 32  # an owner's rows live in rowids [slot << 32, (slot + 1) << 32)


def owner_rowid_ranges(conn: sqlite3.Connection) -> None:
    """Give each owner ('' = catalog) a contiguous rowid range, so recall's FTS query can
    seek to the caller's rows by rowid instead of scoring every tenant's postings.

    Existing rows are renumbered in their old order (so ties still break the same way) and
    the FTS index, whose entries are keyed by rowid, is rebuilt from the content table.
    """
    conn.execute("CREATE TABLE owner_slots (owner TEXT PRIMARY KEY, slot INTEGER NOT NULL UNIQUE)")
    conn.execute(
        "INSERT INTO owner_slots(owner, slot) SELECT owner, ROW_NUMBER() OVER (ORDER BY first) "
        "FROM (SELECT COALESCE(user_id, '') AS owner, MIN(rowid) AS first FROM memories GROUP BY 1)"
    )
    conn.execute(
        "CREATE TEMP TABLE renumbered AS SELECT m.rowid AS old, "
        f"(s.slot << {SLOT_BITS}) + ROW_NUMBER() OVER (PARTITION BY s.slot ORDER BY m.rowid) AS new "
        "FROM memories m JOIN owner_slots s ON s.owner = COALESCE(m.user_id, '')"
    )
    conn.execute("CREATE UNIQUE INDEX temp.renumbered_old ON renumbered(old)")
    conn.execute("UPDATE memories SET rowid = (SELECT new FROM renumbered WHERE old = memories.rowid)")
    conn.execute("DROP TABLE temp.renumbered")
    conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
    conn.execute("UPDATE owner_versions SET version = version + 1")  # cached rowids are stale


# A row's recall filter, as words FTS5 can match: its type, and "live" unless superseded.
RECALL_FILTER = "memory_type || CASE WHEN superseded_by IS NULL THEN ' live' ELSE '' END"

_M004 = f"""
ALTER TABLE memories ADD COLUMN recall_filter TEXT GENERATED ALWAYS AS ({RECALL_FILTER}) VIRTUAL;
DROP TRIGGER memories_ai;
DROP TRIGGER memories_ad;
DROP TRIGGER memories_au;
DROP TABLE memories_fts;
CREATE VIRTUAL TABLE memories_fts USING fts5(
    search_text, recall_filter, content='memories', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, search_text, recall_filter)
    VALUES (new.rowid, new.search_text, new.recall_filter);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, search_text, recall_filter)
    VALUES ('delete', old.rowid, old.search_text, old.recall_filter);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF search_text, superseded_by ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, search_text, recall_filter)
    VALUES ('delete', old.rowid, old.search_text, old.recall_filter);
    INSERT INTO memories_fts(rowid, search_text, recall_filter)
    VALUES (new.rowid, new.search_text, new.recall_filter);
END;
"""


def filters_in_the_index(conn: sqlite3.Connection) -> None:
    """Index each row's type and liveness next to its text, so FTS5 drops superseded rows and
    other types itself. Filtering afterwards meant reading past every superseded match: a
    query whose best matches were an old address history cost 60 ms at 100k memories."""
    _run_script(conn, _M004)
    conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")


# An empty embedding blob marks a row whose vector is still being computed (engines/embedded/
# pending.py); this table lists those rows so nobody has to scan the embeddings to find them.
PENDING_EMBEDDING = b""

_M005 = """
CREATE TABLE pending_embeddings (rowid INTEGER PRIMARY KEY);
CREATE TRIGGER memories_pending_ad AFTER DELETE ON memories BEGIN
    DELETE FROM pending_embeddings WHERE rowid = old.rowid;
END;
"""


def pending_embeddings(conn: sqlite3.Connection) -> None:
    _run_script(conn, _M005)


# A text longer than this many characters may exceed the model's 256-token window (a token
# spans at least one character), so it may need more than one passage vector.
SHORT_TEXT_CHARS = 254


def passages_for_long_texts(conn: sqlite3.Connection) -> None:
    """Long memories get one vector per overlapping passage (``passages.py``): mark every
    text that may be long as pending, and the background repair re-embeds it. Nothing runs
    at open: until its turn, a row keeps its old (first-passage) vector, which is exact for
    the texts that turn out to fit."""
    conn.execute(
        "INSERT OR IGNORE INTO pending_embeddings(rowid) SELECT rowid FROM memories "
        f"WHERE length(search_text) > {SHORT_TEXT_CHARS}"
    )


_LEXICAL_COLUMNS = ("lexical_terms", "lexical_stems")
_M007 = """
DROP TRIGGER memories_ai;
DROP TRIGGER memories_ad;
DROP TRIGGER memories_au;
DROP TABLE memories_fts;
"""
_M007_INDEX = """
CREATE VIRTUAL TABLE memories_fts USING fts5(
    lexical_terms, lexical_stems, recall_filter, content='memories', content_rowid='rowid',
    tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, lexical_terms, lexical_stems, recall_filter)
    VALUES (new.rowid, new.lexical_terms, new.lexical_stems, new.recall_filter);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, lexical_terms, lexical_stems, recall_filter)
    VALUES ('delete', old.rowid, old.lexical_terms, old.lexical_stems, old.recall_filter);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF lexical_terms, lexical_stems, superseded_by ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, lexical_terms, lexical_stems, recall_filter)
    VALUES ('delete', old.rowid, old.lexical_terms, old.lexical_stems, old.recall_filter);
    INSERT INTO memories_fts(rowid, lexical_terms, lexical_stems, recall_filter)
    VALUES (new.rowid, new.lexical_terms, new.lexical_stems, new.recall_filter);
END;
"""


def analysed_text(conn: sqlite3.Connection) -> None:
    """Index the text as ``domain.lexical`` analyses it, in every language: surface words and
    CJK bigrams, and stems in the text's own language. FTS5's porter tokenizer stemmed every
    language as English and kept a Chinese or Japanese phrase as one token, so BM25 never
    matched it. Existing rows are analysed here, once, and the index rebuilt from them."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
    for column in _LEXICAL_COLUMNS:
        if column not in present:  # a store rolled back to an older version keeps its columns
            conn.execute(f"ALTER TABLE memories ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
    _run_script(conn, _M007)
    analysed = [
        (*lexical_columns(text).values(), rowid)
        for rowid, text in conn.execute("SELECT rowid, search_text FROM memories").fetchall()
    ]
    # Filled before the index and its triggers exist: an update trigger would ask FTS5 to
    # delete entries it never held, which corrupts an external-content index.
    conn.executemany("UPDATE memories SET lexical_terms = ?, lexical_stems = ? WHERE rowid = ?", analysed)
    _run_script(conn, _M007_INDEX)
    conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")


def use_counts_per_owner(conn: sqlite3.Connection) -> None:
    """Count each owner's use updates next to its version: a process that cached the owner's
    decoded rows (``memory_cache.py``) sees from the pair whether anything changed them, and
    use updates still leave the version, and so every process's vector cache, alone."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(owner_versions)")}
    if "uses" not in present:  # a store rolled back to an older version keeps its columns
        conn.execute("ALTER TABLE owner_versions ADD COLUMN uses INTEGER NOT NULL DEFAULT 0")


_TIME_COLUMNS = ("about", "valid_from", "valid_to", "expires_at")


def valid_time_and_expiry(conn: sqlite3.Connection) -> None:
    """What a fact is about (the agent's key), when it was true, and when a memory expires.
    Rows written before keep NULL: a fact without ``valid_from`` is true from its writing."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
    for column in _TIME_COLUMNS:
        if column not in present:  # a store rolled back to an older version keeps its columns
            conn.execute(f"ALTER TABLE memories ADD COLUMN {column} TEXT")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS memories_by_about ON memories (user_id, about) WHERE about IS NOT NULL"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS memories_by_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL"
    )


_COVERAGE = """
CREATE TABLE IF NOT EXISTS row_coverage (rowid INTEGER PRIMARY KEY, words TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS memories_coverage_ad AFTER DELETE ON memories BEGIN
    DELETE FROM row_coverage WHERE rowid = old.rowid;
END;
CREATE TRIGGER IF NOT EXISTS memories_coverage_au AFTER UPDATE OF search_text ON memories
WHEN new.search_text IS NOT old.search_text BEGIN
    DELETE FROM row_coverage WHERE rowid = old.rowid;
END;
"""


def stored_coverage(conn: sqlite3.Connection) -> None:
    """Keep each row's coverage (``domain.pool.coverage``: the words recall ranks it by, whose
    language vote and stems were ~40% of a recall's CPU at 100k memories, where most of the
    candidates are new to the memory cache) in a table beside the rows, written with the row.
    Nothing is worked out here, so a large store opens at once: a row without an entry has its
    words worked out when read, and the server fills the table in the background
    (``coverage.fill``). The triggers keep an entry from outliving its row or its text, even
    when an older atlas-mcp, which knows nothing of the table, deletes or rewrites the row."""
    _run_script(conn, _COVERAGE)


def lexical_columns(search_text: str) -> dict[str, str]:
    """The two analysed columns FTS5 indexes for a row (its tokenizer then only splits on spaces)."""
    analysis = analyse(search_text)
    return {"lexical_terms": " ".join(analysis.terms), "lexical_stems": " ".join(analysis.stems)}


_UNREAD_FTS = """
DROP TRIGGER memories_ai;
DROP TRIGGER memories_ad;
DROP TRIGGER memories_au;
DROP TABLE memories_fts;
"""
_DROP_COLUMN = (3, 35)  # the first SQLite with ALTER TABLE ... DROP COLUMN


def drop_unread_fts_index(conn: sqlite3.Connection) -> None:
    """Recall scores BM25 over in-memory postings and reads no full-text index: keeping FTS5's
    in step cost every write its triggers and the file the index's pages. ``recall_filter``
    (a virtual column, computed for the index only) goes with it where SQLite can drop it."""
    _run_script(conn, _UNREAD_FTS)
    if sqlite3.sqlite_version_info >= _DROP_COLUMN:
        conn.execute("ALTER TABLE memories DROP COLUMN recall_filter")


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    # executescript() would COMMIT our open transaction; run statement by statement instead.
    for statement in _split(script):
        conn.execute(statement)


def _split(script: str) -> list[str]:
    statements, buffer = [], []
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        buffer.append(line)
        joined = "\n".join(buffer).strip()
        if joined.endswith(";") and sqlite3.complete_statement(joined):
            statements.append(joined)
            buffer = []
    return statements
