"""Export and import: every memory as one JSON line, losslessly, between any two engines.

A line holds every field of ``domain.model.Memory`` (ids, owner, supersession links,
provenance such as ``source_episodes``, usage counts, timestamps) plus the ``embedding_model``
that embedded it at the source. Vectors are not carried: the target engine embeds each
imported memory with its own model, so a store never mixes two vector spaces, and a file
exported from the embedded engine imports into Elasticsearch (and back) through ``Engine``.

Import validates the whole file before writing anything (a bad line imports nothing), and
skips ids the target already holds for the same owner, so re-running an interrupted import
finishes it without duplicates.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from . import jsonl
from .domain import audit, codec, inputs
from .domain.audit import AuditEntry
from .domain.codec import Kind
from .domain.model import Memory, MemoryType, Step
from .engines.base import AuditQuery, Engine, ListQuery, StoreStats
from .errors import Conflict, InvalidInput

FORMAT = "atlas-mcp.memory/1"
EVERY_ENTRY = 10**9  # an export carries a user's whole audit trail
MAX_TEXT_CHARS = 1_000_000  # generous: a store may have been written under larger [limits]
_ENVELOPE = ("format", "embedding_model")

Progress = Callable[[int], None]  # called with how many memories were just handled


def ignore(_handled: int) -> None:
    """The default ``Progress``: nobody is watching."""


@dataclass(frozen=True, slots=True)
class ImportReport:
    imported: int
    skipped: int  # already present for the same owner
    source_models: frozenset[str]  # embedding models named by the file
    target_model: str | None

    @property
    def re_embedded(self) -> bool:
        """True when the file came from another model: its memories now use the target's."""
        return bool(self.source_models - {self.target_model})


# -- records -----------------------------------------------------------------------------


def to_record(memory: Memory, embedding_model: str | None) -> dict[str, Any]:
    return {"format": FORMAT, "embedding_model": embedding_model} | codec.encode(memory)


def from_record(record: Any) -> Memory:
    """A validated Memory from one exported line; InvalidInput names what is wrong."""
    if not isinstance(record, dict):
        raise InvalidInput("each line must be a JSON object")
    if record.get("format") != FORMAT:
        raise InvalidInput(f"format must be {FORMAT!r}; got {record.get('format')!r}")
    unknown = record.keys() - set(codec.NAMES) - set(_ENVELOPE)
    if unknown:
        raise InvalidInput(f"unknown fields {sorted(unknown)}")
    kind = inputs.memory_type(record.get("memory_type"), MemoryType)
    owner = record.get("user_id")
    if (owner is None) != (kind is MemoryType.CATALOG) or not (
        owner is None or isinstance(owner, str) and owner
    ):
        raise InvalidInput("user_id must be a non-empty string, and null exactly for catalog entries")
    values: dict[str, Any] = {
        "id": inputs.memory_id(record.get("id")),
        "memory_type": kind,
        "user_id": owner,
        "text": inputs.clean_text(record.get("text"), "text", MAX_TEXT_CHARS),
    }
    for name in codec.NAMES:
        if name not in values and record.get(name) is not None:
            values[name] = _field(name, record[name])
    if "created_at" not in values:
        raise InvalidInput("created_at is required")
    try:
        return Memory(**values)
    except TypeError as exc:
        raise InvalidInput(str(exc)) from exc


def _field(name: str, value: Any) -> Any:
    kind = codec.BY_NAME[name].kind
    if kind is Kind.TIME:
        return inputs.timestamp(value, name)
    if kind is Kind.STEPS:
        if not isinstance(value, list) or not all(isinstance(s, dict) for s in value):
            raise InvalidInput("steps must be a list of {order, instruction, tool?} objects")
        try:
            return tuple(Step(**s) for s in value)
        except TypeError as exc:
            raise InvalidInput(f"bad step: {exc}") from exc
    if name in ("supersedes", "source_episodes"):
        if not isinstance(value, list):
            raise InvalidInput(f"{name} must be a list of ids")
        return tuple(inputs.memory_id(v) for v in value)
    if kind is Kind.STRINGS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidInput(f"{name} must be a list of strings")
        return tuple(value)
    if name == "superseded_by":
        return inputs.memory_id(value)
    if name == "about":
        return inputs.about_key(value)
    if kind is Kind.MAPPING:
        if not isinstance(value, dict):
            raise InvalidInput("metadata must be a JSON object")
        return json.loads(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace").decode("utf-8"))
    if name == "confidence":
        return inputs.confidence(value)
    expected = codec.HINTS[name]
    allowed = tuple(t for t in (*typing.get_args(expected), expected) if isinstance(t, type))
    if isinstance(value, bool) and bool not in allowed or not isinstance(value, allowed):
        raise InvalidInput(f"{name} has the wrong type ({type(value).__name__})")
    return value


# -- export ------------------------------------------------------------------------------


def owners(stats: StoreStats) -> list[str | None]:
    """Every owner with memories (None, the catalog, last)."""
    found = {c.user_id for c in stats.counts}
    return sorted(o for o in found if o is not None) + ([None] if None in found else [])


def count(stats: StoreStats, user_id: str | None) -> int:
    return sum(c.count for c in stats.counts if c.user_id == user_id)


def iter_memories(engine: Engine, user_id: str | None) -> Iterator[Memory]:
    """Every memory of ``user_id`` (None: the catalog), superseded ones included, from one
    consistent view of the store (``Engine.scan``)."""
    return engine.scan(ListQuery(user_id, include_superseded=True))


def export_memories(
    engine: Engine, out: TextIO, users: Iterable[str | None], progress: Progress = ignore
) -> int:
    """Each user's memories, then that user's audit trail (``audit.FORMAT`` lines)."""
    written = 0
    for user_id in users:
        for memory in iter_memories(engine, user_id):
            out.write(json.dumps(to_record(memory, engine.info.embedding_model), ensure_ascii=False) + "\n")
            written += 1
            progress(1)
        out.writelines(
            json.dumps(entry.to_record(), ensure_ascii=False) + "\n"
            for entry in engine.audit(AuditQuery(user_id, limit=EVERY_ENTRY))
        )
    return written


# -- import ------------------------------------------------------------------------------


def read_records(path: Path) -> list[tuple[Memory, str | None]]:
    """Every line of ``path`` validated, with the model that embedded it at the source."""
    try:
        return [
            _record(where, value)
            for where, value in jsonl.objects(path, errors="replace")
            if value.get("format") != audit.FORMAT  # the audit trail: read by read_trail
        ]
    except InvalidInput as exc:
        raise InvalidInput(f"{exc}; nothing imported") from exc


def _record(where: str, value: dict[str, Any]) -> tuple[Memory, str | None]:
    try:
        return from_record(value), value.get("embedding_model")
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from exc


def import_memories(
    engine: Engine,
    records: list[tuple[Memory, str | None]],
    progress: Progress = ignore,
    written: Callable[[Memory], None] = lambda _memory: None,
) -> ImportReport:
    imported = skipped = 0
    for memory, _model in records:
        if _present(engine, memory):
            skipped += 1
        else:
            engine.write(memory)
            written(memory)
            imported += 1
        progress(1)
    models = frozenset(m for _memory, m in records if m)
    return ImportReport(imported, skipped, models, engine.info.embedding_model)


def _present(engine: Engine, memory: Memory) -> bool:
    if memory.user_id is None:
        return False  # catalog entries are upserted: importing one again replaces it
    found = engine.get(memory.user_id, [memory.id])
    if not found:
        return False
    if found[0].memory_type is not memory.memory_type:
        raise Conflict(f"memory {memory.id!r} exists with another type; nothing more imported")
    return True


def read_trail(path: Path) -> list[AuditEntry]:
    """The audit entries an export carries (after ``read_records`` accepted the file)."""
    out = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if '"' + audit.FORMAT + '"' not in line:
                continue
            record = json.loads(line)
            if isinstance(record, dict) and record.get("format") == audit.FORMAT:
                try:
                    out.append(audit.from_record(record))
                except InvalidInput as exc:
                    raise InvalidInput(f"{path}:{number}: {exc}; nothing imported") from exc
    return out
