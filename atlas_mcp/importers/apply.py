"""Turning a read source into memories: check every draft first, then write, all or nothing.

Every draft goes through ``MemoryService.prepare``, the checks a tool's write makes (limits,
types, metadata size) with an ``Origin`` that keeps the source's dates and a source-derived
id. Only when the whole file passed does anything get stored, through ``MemoryService.store``,
the write path the tools use. A failure while storing (a full disk, a lost cluster) removes
what this run had added, so an import either happened or did not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..domain.audit import Actor
from ..domain.model import Memory
from ..errors import AtlasError, InvalidInput
from ..service import MemoryService, Origin, PreparedWrite
from .drafts import Draft, Source, memory_id

LOOKUP_BATCH = 500
MAX_REVISIONS = 100  # a record changed more often than this at its source is taken as current
Progress = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class Planned:
    draft: Draft
    write: PreparedWrite
    present: bool  # a previous import of the same record already wrote it
    replaces: tuple[Memory, ...] = ()  # the current versions this write supersedes, as they were


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    added: int
    present: int  # already imported before: skipped
    merged: int  # the store kept an existing memory instead (the write rules' duplicate handling)


def plan(service: MemoryService, user_id: str, source: Source, id_prefix: str) -> list[Planned]:
    """Every draft checked and turned into a write; raises (naming the record) on the first bad one.

    A record that appears twice in the file (same key) is one memory: the first is kept.
    """
    drafts = list({d.key: d for d in reversed(source.drafts)}.values())[::-1]
    ids = {d.key: memory_id(id_prefix, user_id, source.format, d.key) for d in drafts}
    present = _present(service, user_id, list(ids.values()))
    created = {d.key: d.created_at for d in drafts}
    planned = [_planned(service, user_id, source, id_prefix, d, ids, present) for d in drafts]
    return [
        replace(p, write=_superseded(p.write, p.draft, ids, created)) if p.draft.superseded_by else p
        for p in planned
    ]


def _planned(
    service: MemoryService,
    user_id: str,
    source: Source,
    id_prefix: str,
    draft: Draft,
    ids: dict[str, str],
    present: dict[str, Memory],
) -> Planned:
    first_id = ids[draft.key]
    if draft.revision is None or first_id not in present:
        return Planned(draft, _prepare(service, user_id, draft, first_id), first_id in present)
    head, current = _head(service, user_id, present[first_id])
    if _revision(head) == draft.revision or not current:
        # Unchanged at the source; or changed, but the user has since replaced it themselves
        # (their own write supersedes it): their newer word stands.
        return Planned(draft, _prepare(service, user_id, draft, first_id), True)
    new_id = memory_id(id_prefix, user_id, source.format, f"{draft.key}\0{draft.revision}")
    write = _prepare(service, user_id, draft, new_id)
    write = replace(write, memory=write.memory.evolve(supersedes=(head.id,)), supersedes=(head.id,))
    return Planned(draft, write, False, (head,))


def _head(service: MemoryService, user_id: str, memory: Memory) -> tuple[Memory, bool]:
    """The newest imported version of a record, and whether it is current (not replaced by
    anything but a later import of the same record)."""
    for _hop in range(MAX_REVISIONS):
        if memory.superseded_by is None:
            return memory, True
        newer = service.get_many(user_id, [memory.superseded_by])
        if not newer or _revision(newer[0]) is None:
            return memory, False
        memory = newer[0]
    return memory, memory.superseded_by is None


def _revision(memory: Memory) -> str | None:
    return (memory.metadata.get("imported") or {}).get("revision")


IMPORTING = Actor("atlas-mcp import", "cli")  # how the audit trail names these writes


def _prepare(service: MemoryService, user_id: str, draft: Draft, new_id: str) -> PreparedWrite:
    episodic = draft.memory_type == "episodic"
    try:
        return service.prepare(
            user_id,
            draft.text,
            draft.memory_type,
            occurred_at=(draft.occurred_at or draft.created_at) if episodic else None,
            fact_type=None if episodic else draft.fact_type,
            confidence=None if episodic else draft.confidence,
            metadata=_with_revision(draft),
            origin=Origin(new_id, draft.created_at, draft.updated_at or draft.created_at),
            actor=IMPORTING,
        )
    except InvalidInput as exc:
        raise InvalidInput(f"{draft.where}: {exc}; nothing imported") from exc


def _with_revision(draft: Draft) -> dict[str, Any]:
    if draft.revision is None:
        return draft.metadata
    imported = draft.metadata.get("imported") or {}
    return draft.metadata | {"imported": imported | {"revision": draft.revision}}


def _superseded(
    write: PreparedWrite, draft: Draft, ids: Mapping[str, str], created: Mapping[str, object]
) -> PreparedWrite:
    """A record the source itself replaced arrives already superseded by its replacement."""
    newer = draft.superseded_by
    if newer is None or newer not in ids:
        return write  # its replacement is not in the file (deleted there): keep it current
    when = created[newer]
    memory = write.memory.evolve(superseded_by=ids[newer], superseded_at=when)
    return replace(write, memory=memory)


def _present(service: MemoryService, user_id: str, ids: Sequence[str]) -> dict[str, Memory]:
    found: dict[str, Memory] = {}
    for start in range(0, len(ids), LOOKUP_BATCH):
        found |= {m.id: m for m in service.get_many(user_id, ids[start : start + LOOKUP_BATCH])}
    return found


def write(
    service: MemoryService, user_id: str, planned: Sequence[Planned], progress: Progress = lambda _n: None
) -> ImportOutcome:
    """Store every planned write not already present; on any failure, undo this run's writes.

    Writes that supersede memories already in the store go last, so a failure before them has
    only new memories to remove.
    """
    added: list[str] = []  # ids this run may have written (a failed store may have written it)
    replaced: list[Memory] = []
    merged = 0
    try:
        for item in sorted(planned, key=lambda p: bool(p.replaces)):
            if not item.present:
                added.append(item.write.memory.id)
                replaced += item.replaces
                # Records the source kept apart stay apart; a copy of what was stored before is kept once.
                result = service.store(_with_links(item.write, planned), apart_from=set(added))
                if result.id != item.write.memory.id:  # the store kept an existing copy instead
                    added.pop()
                    merged += 1
            progress(1)
    except BaseException:
        _undo(service, user_id, added, replaced)
        raise
    present = sum(1 for p in planned if p.present)
    return ImportOutcome(len(added), present, merged)


def _with_links(write: PreparedWrite, planned: Sequence[Planned]) -> PreparedWrite:
    """A replacement names what it replaced (``supersedes``), as a tool write would; a replaced
    record a previous import left current is superseded by this write."""
    replaced = [p for p in planned if p.write.memory.superseded_by == write.memory.id]
    if not replaced:
        return write
    memory = write.memory.evolve(
        supersedes=write.memory.supersedes + tuple(p.write.memory.id for p in replaced)
    )
    current = tuple(p.write.memory.id for p in replaced if p.present)
    return replace(write, memory=memory, supersedes=write.supersedes + current)


def _undo(service: MemoryService, user_id: str, added: Sequence[str], replaced: Sequence[Memory]) -> None:
    """Remove this run's memories and put back, as they were, the ones it superseded."""
    for memory_id_ in reversed(added):
        try:
            service.forget(user_id, memory_id_)
        except AtlasError:
            continue  # already gone: nothing to undo
    for memory in replaced:
        try:
            service.forget(user_id, memory.id)
        except AtlasError:
            pass
        service.store(PreparedWrite(user_id, memory))
