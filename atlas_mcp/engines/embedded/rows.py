"""``memories`` rows: the domain codec (``domain.codec``) with list and object fields as JSON text."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ...domain import codec
from ...domain.model import Memory
from .schema import lexical_columns

_JSON_KINDS = (codec.Kind.STRINGS, codec.Kind.STEPS, codec.Kind.MAPPING)
_JSON_COLUMNS = frozenset(f.name for f in codec.FIELDS if f.kind in _JSON_KINDS)
# Columns a Memory round-trips through (everything but rowid and the embedding); search_text
# and its analysed forms (what BM25's postings are built from) are derived from the others:
# written, never read back into a Memory.
_DERIVED = ("search_text", "lexical_terms", "lexical_stems")
COLUMNS = (*codec.NAMES, *_DERIVED)
READ_COLUMNS = codec.NAMES
SELECT_COLUMNS = ", ".join(READ_COLUMNS)
MUTABLE = (*_DERIVED, *codec.MUTABLE)  # the columns update() may change


def to_row(memory: Memory) -> dict[str, Any]:
    search_text = memory.search_text()
    values = codec.encode(memory) | {"search_text": search_text} | lexical_columns(search_text)
    return {c: _json(values[c]) if c in _JSON_COLUMNS else values[c] for c in COLUMNS}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _parse(text: str) -> Any:
    """Most rows hold empty lists and objects: skip ``json.loads`` for those."""
    return [] if text == "[]" else {} if text == "{}" else json.loads(text)


# A row of ``SELECT_COLUMNS`` as a Memory.
from_row: Callable[[Sequence[Any]], Memory] = codec.decoder(dict.fromkeys(_JSON_COLUMNS, _parse))
