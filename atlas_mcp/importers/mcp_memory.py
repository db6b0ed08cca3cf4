"""The official MCP memory server (``@modelcontextprotocol/server-memory``): its knowledge graph.

Its file (``memory.jsonl``, formerly ``memory.json``) holds one JSON object a line: an entity
``{"type": "entity", "name", "entityType", "observations": [...]}`` or a relation
``{"type": "relation", "from", "to", "relationType"}``. The output of its ``read_graph`` tool
(``{"entities": [...], "relations": [...]}``) is read too.

Each observation becomes a semantic fact about its entity ("John Smith: speaks Spanish"), each
relation a fact between two ("John Smith works at Anthropic"), and an entity with neither
a fact of its own ("Anthropic is a organization"), so nothing in the graph is lost. The file
has no dates: every memory is dated by the file's last modification, the latest it can be.
Export turns memories back into that graph (see ``export_graph``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain.model import Memory, MemoryType
from . import fact_types
from .drafts import Draft, Source, fail, file_time, provenance, text_field

FORMAT = "mcp-memory"
ID_PREFIX = "mcpm"
USER_ENTITY_NAMES = frozenset({"default_user", "user", "me"})  # the README prompt's name for the user
USER_ENTITY_TYPES = frozenset({"user", "me", "self"})


@dataclass
class _Entity:
    name: str
    entity_type: str
    where: str
    observations: list[tuple[str, str]] = field(default_factory=list)  # (text, where)


def read(path: Path, format_name: str = FORMAT) -> Source:
    entities: dict[str, _Entity] = {}
    relations: list[tuple[dict[str, Any], str]] = []
    for record, where in _records(path):
        kind = record.get("type")
        if kind == "entity":
            _add_entity(entities, record, where)
        elif kind == "relation":
            relations.append(
                ({k: text_field(record, k, where) for k in ("from", "to", "relationType")}, where)
            )
        else:
            raise fail(where, f"'type' must be 'entity' or 'relation', got {kind!r}")
    created = file_time(path)
    drafts = [d for e in entities.values() for d in _entity_drafts(e, path, created)]
    drafts += [_relation_draft(r, where, path, created) for r, where in relations]
    return Source(FORMAT, path, tuple(drafts))


def _records(path: Path) -> Iterator[tuple[dict[str, Any], str]]:
    text = path.read_text(encoding="utf-8")
    graph = _whole_graph(text)
    if graph is not None:
        for section, kind in (("entities", "entity"), ("relations", "relation")):
            items = graph.get(section) or []
            if not isinstance(items, list):
                raise fail(path.name, f"{section!r} must be a list")
            for index, item in enumerate(items):
                where = f"{path.name}: {section}[{index}]"
                if not isinstance(item, dict):
                    raise fail(where, "must be a JSON object")
                yield {"type": kind} | item, where
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise fail(where, f"not valid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise fail(where, "each line must be a JSON object")
        yield record, where


def _whole_graph(text: str) -> dict[str, Any] | None:
    """The file as one ``read_graph`` object, or None when it is the server's JSON lines."""
    stripped = text.strip()
    if not stripped.startswith("{") or "\n" not in stripped:
        return None
    try:
        parsed = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) and ("entities" in parsed or "relations" in parsed) else None


def _add_entity(entities: dict[str, _Entity], record: dict[str, Any], where: str) -> None:
    name = text_field(record, "name", where)
    entity_type = record.get("entityType")
    if not isinstance(entity_type, str):
        raise fail(where, "'entityType' must be a string")
    observations = record.get("observations", [])
    if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
        raise fail(where, "'observations' must be a list of strings")
    # The server never writes one name twice; if a hand-edited file does, its facts merge.
    entity = entities.setdefault(name, _Entity(name, entity_type, where))
    entity.observations += [(o, where) for o in observations if o.strip()]


def display_name(name: str) -> str:
    """``John_Smith`` as people write it, ``default_user`` as "User" (the exact name is kept
    in the metadata)."""
    if name.lower() in USER_ENTITY_NAMES:
        return "User"
    return name.replace("_", " ").strip() or name


def is_the_user(name: str, entity_type: str = "") -> bool:
    """The entity that stands for the user: facts about it are the user's profile material;
    facts about anyone else (a colleague, a company) are world facts."""
    return name.lower() in USER_ENTITY_NAMES or entity_type.lower() in USER_ENTITY_TYPES


def _entity_drafts(entity: _Entity, path: Path, created: Any) -> Iterator[Draft]:
    the_user = is_the_user(entity.name, entity.entity_type)
    if not entity.observations:
        text = f"{display_name(entity.name)} is a {entity.entity_type or 'thing'}"
        yield Draft(
            text=text,
            where=entity.where,
            key=f"entity\0{entity.name}",
            created_at=created,
            fact_type="world",
            metadata=provenance(FORMAT, path, entity=entity.name, entity_type=entity.entity_type),
        )
        return
    for index, (observation, where) in enumerate(entity.observations):
        yield Draft(
            text=f"{display_name(entity.name)}: {observation.strip()}",
            where=where,
            key=f"observation\0{entity.name}\0{observation}",
            created_at=created,
            fact_type=fact_types.from_text(observation, "preference") if the_user else "world",
            metadata=provenance(
                FORMAT, path, entity=entity.name, entity_type=entity.entity_type, index=index
            ),
        )


def _relation_draft(relation: dict[str, str], where: str, path: Path, created: Any) -> Draft:
    source, kind, target = relation["from"], relation["relationType"], relation["to"]
    text = f"{display_name(source)} {kind.replace('_', ' ').strip()} {display_name(target)}"
    return Draft(
        text=text,
        where=where,
        key=f"relation\0{source}\0{kind}\0{target}",
        created_at=created,
        fact_type=fact_types.from_text(text, "world")
        if is_the_user(source) or is_the_user(target)
        else "world",
        metadata=provenance(FORMAT, path, relation={"from": source, "relationType": kind, "to": target}),
    )


# -- export ------------------------------------------------------------------------------


def export_graph(memories: Iterable[Memory], user_id: str) -> list[str]:
    """The user's current memories as the official server's file lines, in its own format.

    Memories imported from that server go back to their entity, observation and relation;
    any other fact becomes an observation of an entity named after the user, an event an
    observation with its date, and a playbook an entity of type "playbook" whose observations
    are its trigger and steps. Superseded memories stay behind: the graph has no history.
    """
    entities: dict[str, dict[str, Any]] = {}
    relations: list[dict[str, str]] = []
    for memory in memories:
        if memory.is_superseded or memory.user_id is None:
            continue
        origin = memory.metadata.get("imported") or {}
        if origin.get("format") == FORMAT:
            _restore(memory, origin, entities, relations)
        elif memory.memory_type is MemoryType.PROCEDURAL:
            steps = [f"Step {s.order}: {s.instruction}" for s in memory.steps]
            _entity(entities, memory.name or memory.text[:60], "playbook")["observations"] += [
                f"Use when: {memory.text}",
                *steps,
            ]
        else:
            text = memory.text
            if memory.memory_type is MemoryType.EPISODIC and memory.occurred_at is not None:
                text = f"On {memory.occurred_at:%Y-%m-%d}: {text}"
            _entity(entities, user_id, "person")["observations"].append(text)
    lines = [json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in entities.values()]
    lines += [
        json.dumps({"type": "relation", **r}, ensure_ascii=False, separators=(",", ":")) for r in relations
    ]
    return lines


def _entity(entities: dict[str, dict[str, Any]], name: str, entity_type: str) -> dict[str, Any]:
    return entities.setdefault(
        name, {"type": "entity", "name": name, "entityType": entity_type, "observations": []}
    )


def _restore(
    memory: Memory,
    origin: dict[str, Any],
    entities: dict[str, dict[str, Any]],
    relations: list[dict[str, str]],
) -> None:
    relation = origin.get("relation")
    if isinstance(relation, dict):
        relations.append({k: str(relation.get(k, "")) for k in ("from", "to", "relationType")})
        return
    name = str(origin.get("entity") or display_name(memory.text))
    entity = _entity(entities, name, str(origin.get("entity_type") or ""))
    if "index" in origin:
        prefix = f"{display_name(name)}: "
        entity["observations"].append(memory.text.removeprefix(prefix))
