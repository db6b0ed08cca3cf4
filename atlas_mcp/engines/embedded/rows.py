"""``memories`` rows: the domain codec (``domain.codec``) with list and object fields as JSON text."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ...domain import codec
from ...domain.model import Memory

_JSON_KINDS = (codec.Kind.STRINGS, codec.Kind.STEPS, codec.Kind.MAPPING)
_JSON_COLUMNS = frozenset(f.name for f in codec.FIELDS if f.kind in _JSON_KINDS)
# Columns a Memory round-trips through (everything but rowid and the embedding); search_text
# is derived from the others, so it is written but never read.
COLUMNS = (*codec.NAMES, "search_text")
READ_COLUMNS = codec.NAMES
SELECT_COLUMNS = ", ".join(READ_COLUMNS)
MUTABLE = ("search_text", *codec.MUTABLE)  # the columns update() may change


def to_row(memory: Memory) -> dict[str, Any]:
    values = codec.encode(memory) | {"search_text": memory.search_text()}
    return {c: _json(values[c]) if c in _JSON_COLUMNS else values[c] for c in COLUMNS}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _parse(text: str) -> Any:
    """Most rows hold empty lists and objects: skip ``json.loads`` for those."""
    return [] if text == "[]" else {} if text == "{}" else json.loads(text)


# A row of ``SELECT_COLUMNS`` as a Memory.
from_row: Callable[[Sequence[Any]], Memory] = codec.decoder(dict.fromkeys(_JSON_COLUMNS, _parse))
