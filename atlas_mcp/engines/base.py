"""The engine protocol: the small surface every storage engine implements.

Engines store and fetch; they hold no policy. Scoring, supersession rules, isolation checks
and input validation live once, in ``atlas_mcp.domain`` and ``atlas_mcp.service``. Every
read takes the caller's ``user_id`` and must return only that user's memories (plus catalog
entries where asked): engines enforce isolation too, as defence in depth.
"""

from __future__ import annotations

import builtins  # Engine.list shadows the type in the annotations after it
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from ..domain.audit import AuditEntry
from ..domain.fusion import Candidate
from ..domain.model import Memory, MemoryType
from ..domain.ranking import RecallPlan

__all__ = [
    "AuditQuery", "Candidate", "Engine", "EngineInfo", "ListQuery", "RecallPlan", "StoreStats", "TypeCount",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class EngineInfo:
    name: str
    reranks_server_side: bool = False  # candidates arrive with ``rerank_score`` set
    embedding_model: str | None = None


@dataclass(frozen=True, slots=True)
class ListQuery:
    """One page of an owner's memories (``user_id`` None: the catalog), newest first."""

    user_id: str | None
    memory_types: frozenset[MemoryType] | None = None  # None: every type the owner holds
    include_superseded: bool = True
    limit: int = 100
    offset: int = 0
    since: datetime | None = None  # only memories *created* strictly after it
    # by ``created_at`` ascending instead (consolidation reads episodes past its watermark)
    oldest_first: bool = False
    about: str | None = None  # only memories with this ``about`` key
    expired_by: datetime | None = None  # only memories whose ``expires_at`` is at or before it


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """One owner's audit entries (``user_id`` None: the catalog's), oldest first."""

    user_id: str | None
    since: datetime | None = None  # only entries strictly after it
    limit: int = 10_000


@dataclass(frozen=True, slots=True)
class TypeCount:
    """How many memories one owner holds of one type (``user_id`` None: the catalog)."""

    user_id: str | None
    memory_type: MemoryType
    count: int
    superseded: int = 0
    expiring: int = 0  # with an ``expires_at`` (not yet removed)


@dataclass(frozen=True, slots=True)
class StoreStats:
    """What an operator sees with ``atlas-mcp stats``: counts per owner and type, and size."""

    counts: tuple[TypeCount, ...]
    size_bytes: int | None  # None when the engine cannot tell
    location: str  # a file path or a cluster address, never credentials
    embedding_model: str | None = None  # whose vector space the store's recall compares in
    # Memories whose vectors are still to be (re)computed in the background; None: not known.
    awaiting_embedding: int | None = None
    expired: int | None = None  # past ``expires_at``: never returned, removed at the next sweep


@runtime_checkable
class Engine(Protocol):
    """What the service asks of a storage engine. An engine subclasses this (its ``warm`` and
    ``warm_rows`` default to doing nothing) and passes ``tests/contract``.

    Beyond each method's own words, every engine keeps these obligations:

    - **Supersession is conditional.** ``write(memory, supersede=ids)`` marks each target only
      if it is still the caller's live memory of the same type, in the same atomic step as the
      insert; if another writer superseded or removed one in between, nothing is written and
      ``domain.supersession.changed_meanwhile`` is raised (a ``Conflict`` the caller can retry).
    - **Memories may arrive already superseded.** ``import`` restores a store's history:
      ``write`` stores ``superseded_by`` as given, and the next recall, in this process too,
      hides such a memory unless ``include_superseded``.
    - **Candidates speak one scale.** ``Candidate.dense_similarity`` is a cosine on MiniLM's
      scale, on which relevance calibration was fitted: an engine whose model or service
      reports another scale converts (``domain.similarity``; Elasticsearch's ``(1 + cos) / 2``
      back to a cosine). ``rrf_score`` is None exactly when ``info.reranks_server_side``, and
      ties break deterministically (the fused order: ``domain.fusion``; within a branch, the
      older memory first).
    """

    info: EngineInfo

    def write(
        self, memory: Memory, *, supersede: Sequence[str] = (), trail: Sequence[AuditEntry] = ()
    ) -> None:
        """Store ``memory``; atomically mark each id in ``supersede`` as superseded by it
        (conditionally: see the class docstring); append ``trail`` to the audit trail (in the
        same commit where the engine has transactions: one wait for the disk, not two)."""

    def get(self, user_id: str, ids: Sequence[str], *, include_catalog: bool = False) -> list[Memory]:
        """The caller's memories among ``ids`` (catalog entries too if asked); unknown ids skipped."""

    def candidates(self, plan: RecallPlan) -> Sequence[Candidate]:
        """Fused hybrid-retrieval candidates for ``plan``, best first, at most ``plan.window``: a
        ``domain.pool.Pool`` where the engine keeps its rows' ranking facts (ranking reads the
        pool as columns), else a list."""

    def cosines(self, plan: RecallPlan, text: str, ids: Sequence[str]) -> dict[str, float]:
        """The dense similarity of ``text`` (``plan.query`` reworded) with each of ``ids``, on
        the scale ``candidates`` reports; an engine that measures no cosine returns {}."""

    def likeness(self, plan: RecallPlan, texts: Sequence[str]) -> builtins.list[float] | None:
        """The cosine of ``plan.query`` with each of ``texts`` (fixed questions, such as
        ``domain.asked``'s), both read as queries by MiniLM, when this recall embedded the query
        with it already; None otherwise (no model run is added for it)."""

    def touch(self, user_id: str, ids: Sequence[str], at: datetime) -> None:
        """Record a recall: set ``last_used_at`` and increment ``use_count``."""

    def update(self, user_id: str, memory: Memory) -> None:
        """Replace the stored fields of one of the caller's memories (counts, steps, confidence)."""

    def forget(self, user_id: str, memory_id: str) -> bool:
        """Hard-delete one of the caller's memories; False if the caller has no such memory."""

    def list(self, query: ListQuery) -> list[Memory]:
        """One page of an owner's memories, as ``query`` asks."""

    def scan(self, query: ListQuery) -> Iterator[Memory]:
        """Every memory ``query`` selects (``limit`` and ``offset`` aside), in ``list``'s order, from
        one consistent view: a write or a forget while it runs neither repeats nor drops a memory,
        and each is read once (what an export reads)."""

    def get_state(self, user_id: str, key: str) -> str | None:
        """A small per-user bookkeeping value (e.g. the consolidation watermark), or None."""

    def set_state(self, user_id: str, key: str, value: str | None) -> None:
        """Store (or, with None, delete) a per-user bookkeeping value; durable once it returns."""

    def record(self, entries: Sequence[AuditEntry]) -> None:
        """Append to the audit trail; durable once it returns."""

    def audit(self, query: AuditQuery) -> builtins.list[AuditEntry]:
        """One owner's audit entries after ``query.since``, oldest first."""

    def stats(self) -> StoreStats:
        """Memory counts per owner and type (superseded ones included) and the store's size."""

    def warm(self, user_id: str) -> None:
        """Pay the start-up costs of ``user_id``'s first recall now (model sessions, caches),
        from a background thread while the server starts."""
        return

    def warm_rows(self, user_id: str) -> bool:
        """The part of ``warm`` that is quick enough to run before the server answers anything
        (a small store's caches); whether it did all of it."""
        return True

    def preload(
        self,
        user_id: str,
        after_first_recall: bool = True,
        first_reads: Callable[[Sequence[Memory]], object] | None = None,
        fact_reads: Callable[[Sequence[Memory]], object] | None = None,
    ) -> None:
        """Work out now what recall reads of each of ``user_id``'s memories, instead of at each
        one's first recall, and hand the memories to ``first_reads`` (what the caller works out
        the first time it shows one); by default once a first recall has been answered (from
        serve's warm-up thread, so a start is not slowed). An engine that cannot keep all of
        them may hand only the live facts to ``fact_reads`` (what resolution and settling read)."""
        return

    def keep_row_facts(self, after_first_recall: bool = True) -> None:
        """Store what recall reads of each row and the engine keeps with it, for rows stored
        before it was kept (an upgraded store), once this process has answered a recall."""
        return

    def close(self) -> None: ...
