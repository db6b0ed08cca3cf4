"""``memories`` rows: the domain codec (``domain.codec``) with list and object fields as JSON text."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ...domain import codec
from ...domain.model import Memory
from ...domain.pool import COVERAGE_RULES, coverage
from .schema import lexical_columns

_JSON_KINDS = (codec.Kind.STRINGS, codec.Kind.STEPS, codec.Kind.MAPPING)
_JSON_COLUMNS = frozenset(f.name for f in codec.FIELDS if f.kind in _JSON_KINDS)
# Columns a Memory round-trips through (everything but rowid and the embedding); search_text
# and its analysed forms (what BM25's postings are built from) are derived from the others:
# written, never read back into a Memory. So is a row's coverage (the words recall ranks it
# by, ``domain.pool.coverage``), kept in a table of its own (``schema.stored_coverage``).
_DERIVED = ("search_text", "lexical_terms", "lexical_stems")
COLUMNS = (*codec.NAMES, *_DERIVED)
READ_COLUMNS = codec.NAMES
SELECT_COLUMNS = ", ".join(READ_COLUMNS)
MUTABLE = (*_DERIVED, *codec.MUTABLE)  # the columns update() may change


def to_row(memory: Memory) -> dict[str, Any]:
    search_text = memory.search_text()
    values = codec.encode(memory) | {"search_text": search_text} | lexical_columns(search_text)
    return {c: _json(values[c]) if c in _JSON_COLUMNS else values[c] for c in COLUMNS}


def stored_coverage(search_text: str) -> str | None:
    """A row's coverage as ``row_coverage`` keeps it: the rules' name, then each word after a
    space (a word never holds one; None, not kept, for a text where one would)."""
    words = sorted(coverage(search_text))
    if any(" " in word for word in words):
        return None
    return "".join([COVERAGE_RULES, *(" " + word for word in words)])


def read_coverage(stored: str | None) -> frozenset[str] | None:
    """The words of a kept coverage, or None where they are to be worked out (a row not yet
    given them, or given them under other rules)."""
    if stored is None:
        return None
    rules, *words = stored.split(" ")
    return frozenset(words) if rules == COVERAGE_RULES else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _parse(text: str) -> Any:
    """Most rows hold empty lists and objects: skip ``json.loads`` for those."""
    return [] if text == "[]" else {} if text == "{}" else json.loads(text)


# A row of ``SELECT_COLUMNS`` as a Memory.
from_row: Callable[[Sequence[Any]], Memory] = codec.decoder(dict.fromkeys(_JSON_COLUMNS, _parse))
