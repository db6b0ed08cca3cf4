"""mem0: what ``Memory.get_all()`` (and the platform's ``client.get_all()``) returns, saved as JSON.

``{"results": [{"id", "memory", "hash", "metadata", "created_at", "updated_at", "user_id",
"agent_id"?, "run_id"?, "actor_id"?, "role"?, "categories"?}, ...], "relations"?: [...]}``;
a bare list of those items, or ``{"memories": [...]}``, reads the same. With the graph store
on, ``relations`` holds ``{"source", "relationship", "target"}`` triples (older versions say
``destination``).

Every memory is a fact mem0 extracted about the user: a semantic memory, dated as mem0 dated
it. Its ``user_id``/``agent_id``/``run_id`` go into the provenance: the memories belong to
whoever ``--user`` names, never to an id found in the file.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, TypeGuard

from . import fact_types
from .drafts import Draft, Source, fail, file_time, json_object, provenance, timestamp

FORMAT = "mem0"
LISTS = ("results", "memories", "records")
TEXT_FIELDS = ("memory", "text", "content", "data")
SCOPE_FIELDS = ("user_id", "agent_id", "run_id", "actor_id", "role")


def read(path: Path, format_name: str = FORMAT) -> Source:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise fail(f"{path.name}:{exc.lineno}", f"not valid JSON ({exc.msg})") from exc
    items, relations, section = _sections(document, path)
    undated = file_time(path)
    drafts = [_memory(item, f"{path.name}: {section}[{i}]", path, undated) for i, item in enumerate(items)]
    drafts += [_relation(r, f"{path.name}: relations[{i}]", path, undated) for i, r in enumerate(relations)]
    return Source(FORMAT, path, tuple(drafts))


def _sections(document: Any, path: Path) -> tuple[list[Any], list[Any], str]:
    if isinstance(document, list):
        return document, [], "item"
    if isinstance(document, dict):
        for name in LISTS:
            if isinstance(document.get(name), list):
                relations = document.get("relations") or []
                if not isinstance(relations, list):
                    raise fail(path.name, "'relations' must be a list")
                return document[name], relations, name
    raise fail(path.name, "not a mem0 get_all() result: expected {'results': [...]} or a list of memories")


def _memory(item: Any, where: str, path: Path, undated: datetime) -> Draft:
    if not isinstance(item, dict):
        raise fail(where, "must be a JSON object")
    text = next((item[f] for f in TEXT_FIELDS if isinstance(item.get(f), str) and item[f].strip()), None)
    if text is None:
        raise fail(where, "has no memory text ('memory')")
    memory_id = item.get("id")
    if not isinstance(memory_id, str | int) or memory_id == "":
        raise fail(where, "has no 'id'")
    created = timestamp(item.get("created_at"), where, "created_at")
    metadata = json_object(item.get("metadata"), where, "metadata")
    categories = item.get("categories")
    if categories:
        metadata["categories"] = categories
    scope = {f: item[f] for f in SCOPE_FIELDS if item.get(f)}
    return Draft(
        text=text,
        where=where,
        key=str(memory_id),
        created_at=created or undated,
        fact_type=fact_types.guess(text, _label(categories), "preference"),
        updated_at=timestamp(item.get("updated_at"), where, "updated_at"),
        metadata=metadata | provenance(FORMAT, path, id=str(memory_id), **scope),
        revision=item.get("hash") if isinstance(item.get("hash"), str) else None,
    )


def _label(categories: Any) -> str | None:
    if isinstance(categories, list):
        return " ".join(str(c) for c in categories)
    return categories if isinstance(categories, str) else None


def _named(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value.strip())


def _relation(item: Any, where: str, path: Path, undated: datetime) -> Draft:
    if not isinstance(item, dict):
        raise fail(where, "must be a JSON object")
    source, kind = item.get("source"), item.get("relationship")
    target = item.get("target", item.get("destination"))
    if not (_named(source) and _named(kind) and _named(target)):
        raise fail(where, "a relation needs 'source', 'relationship' and 'target' strings")
    text = f"{source.replace('_', ' ')} {kind.replace('_', ' ').lower()} {target.replace('_', ' ')}"
    return Draft(
        text=text,
        where=where,
        key=f"relation\0{source}\0{kind}\0{target}",
        created_at=undated,
        fact_type=fact_types.from_text(text, "world"),
        metadata=provenance(
            FORMAT, path, relation={"source": source, "relationship": kind, "target": target}
        ),
    )
