"""Index mappings: the memory text is copied into a ``semantic_text`` field for the dense branch.

``content`` is what both retrieval branches and the reranker read (``Memory.search_text()``);
``text`` is the memory as written, stored but not indexed. Catalog documents have no
``user_id`` field at all: that absence is what makes them visible to every user's DLS key.
``dynamic: strict`` turns a stray field into an error instead of a silent mapping change.
"""

from __future__ import annotations

from typing import Any

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
_DATE = {"type": "date"}
_NANOS = {"type": "date_nanos"}
_STORED_ONLY = {"type": "object", "enabled": False}

_COMMON: dict[str, Any] = {
    "text": {"type": "text", "index": False},
    # Microseconds matter: consolidation reads episodes created strictly after a watermark.
    "created_at": _NANOS,
    # occurred_at for events, else created_at: the one field listings sort on
    "timeline_at": _NANOS,
    "metadata": _STORED_ONLY,
}
_OWNED: dict[str, Any] = {
    "user_id": _KEYWORD,
    "occurred_at": _DATE,
    "fact_type": _KEYWORD,
    "confidence": {"type": "float"},
    "source_episodes": _KEYWORD,
    "supersedes": _KEYWORD,
    "superseded_by": _KEYWORD,
    "superseded_at": _DATE,
    "last_used_at": _DATE,
    "use_count": {"type": "integer"},
    "name": {"type": "text"},
    "steps": _STORED_ONLY,
    "success_count": {"type": "integer"},
    "failure_count": {"type": "integer"},
    "last_success_at": _DATE,
}
_CATALOG: dict[str, Any] = {
    "title": {"type": "text"},
    "category": _KEYWORD,
    "tags": _KEYWORD,
}


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
