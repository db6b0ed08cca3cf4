"""Index mappings: the memory text is copied into a ``semantic_text`` field for the dense branch.

``content`` is what both retrieval branches and the reranker read (``Memory.search_text()``);
``text`` is the memory as written, stored but not indexed. Catalog documents have no
``user_id`` field at all: that absence is what makes them visible to every user's DLS key.
``dynamic: strict`` turns a stray field into an error instead of a silent mapping change.
"""

from __future__ import annotations

from typing import Any

from ...domain import codec
from ...domain.codec import Index, Kind, Scope
from ...domain.model import MemoryType
from .layout import ALL_TYPES, IndexLayout

CONTENT = "content"
SEMANTIC = "content_semantic"
# ``content`` analysed once more per language family, with analyzers every distribution ships:
# ``cjk`` cuts Chinese/Japanese/Korean into bigrams (``standard`` makes each character a
# token), and the Snowball-based language analyzers stem and drop stop words. BM25 asks all
# of them and keeps the best field, so each text matches through the analyzer fitting it.
LANGUAGE_ANALYZERS = ("cjk", "english", "german", "spanish", "french")
CONTENT_FIELDS = (CONTENT, *(f"{CONTENT}.{a}" for a in LANGUAGE_ANALYZERS))

_KEYWORD = {"type": "keyword"}
# ``date``, never ``date_nanos``: a memory may be about any year (``date_nanos`` holds only
# 1970..2262, and the cluster refuses the document otherwise). A ``date`` keeps milliseconds, so
# what must order by the microsecond is also kept as whole microseconds since the epoch.
_DATE = {"type": "date"}
_MICROS = {"type": "long"}
_STORED_ONLY = {"type": "object", "enabled": False}
_BY_INDEX: dict[Index, dict[str, Any]] = {
    Index.EXACT: _KEYWORD,
    Index.WORDS: {"type": "text"},
    Index.TIME: _DATE,
    Index.INTEGER: {"type": "integer"},
    Index.FLOAT: {"type": "float"},
    Index.STORED: _STORED_ONLY,
}
# The document's _id holds the id, and each type has its own index (``memory_type`` below).
_NOT_PROPERTIES = frozenset({"id", "memory_type"})


def _property(field: codec.Field) -> dict[str, Any]:
    if field.index is Index.STORED and field.kind is Kind.PLAIN:
        return {"type": "text", "index": False}  # stored text: kept, returned, never searched
    assert field.index is not None  # the codec stores only indexed fields
    return _BY_INDEX[field.index]


def _properties(scope: Scope) -> dict[str, Any]:
    return {f.name: _property(f) for f in codec.FIELDS if f.scope is scope and f.name not in _NOT_PROPERTIES}


_COMMON: dict[str, Any] = {
    **_properties(Scope.ALL),
    # created_at in microseconds: consolidation reads episodes created strictly after a watermark
    "created_us": _MICROS,
    # occurred_at for events, else created_at, in microseconds: the key listings sort on
    "timeline_us": _MICROS,
}
_OWNED: dict[str, Any] = _properties(Scope.OWNED)
_CATALOG: dict[str, Any] = _properties(Scope.CATALOG)


def mapping(kind: MemoryType, inference_id: str) -> dict[str, Any]:
    """The mapping of ``kind``'s index; every index uses the same ``inference_id``."""
    own = _CATALOG if kind is MemoryType.CATALOG else _OWNED
    return {
        "dynamic": "strict",
        "properties": {
            "memory_type": {"type": "constant_keyword", "value": kind.value},
            CONTENT: {
                "type": "text",
                "copy_to": SEMANTIC,
                "fields": {a: {"type": "text", "analyzer": a} for a in LANGUAGE_ANALYZERS},
            },
            SEMANTIC: {"type": "semantic_text", "inference_id": inference_id},
            **_COMMON,
            **own,
        },
    }


def create_index_body(layout: IndexLayout, kind: MemoryType, inference_id: str) -> dict[str, Any]:
    """``PUT /<concrete>``: mapping plus the alias every other request uses."""
    return {
        "aliases": {layout.alias(kind): {"is_write_index": True}},
        "mappings": mapping(kind, inference_id),
    }


def state_mapping() -> dict[str, Any]:
    """Per-user bookkeeping values; no ``semantic_text``, so any update style works here."""
    return {
        "dynamic": "strict",
        "properties": {
            "user_id": _KEYWORD,
            "key": _KEYWORD,
            "value": {"type": "text", "index": False},
            "updated_at": _DATE,
        },
    }


def all_index_bodies(layout: IndexLayout, inference_id: str) -> dict[str, dict[str, Any]]:
    """Concrete index name → creation body, for every memory type and the state index."""
    bodies = {layout.concrete(k): create_index_body(layout, k, inference_id) for k in ALL_TYPES}
    bodies[layout.state_concrete] = {
        "aliases": {layout.state_alias: {"is_write_index": True}},
        "mappings": state_mapping(),
    }
    return bodies
