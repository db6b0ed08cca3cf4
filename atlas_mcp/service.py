"""MemoryService: the one API every surface uses (MCP tools, CLI, eval, consolidation, bench).

It owns the policy: input validation, supersession rules, the rerank stage, final scoring and
usage statistics. Engines only store and fetch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TextIO

from . import portability, upkeep
from .domain import audit, codec, guard, inputs, perspective, profile, ranking
from .domain.audit import OPERATOR, Actor, AuditEntry
from .domain.guard import GuardPolicy
from .domain.limits import Limits
from .domain.model import (
    USER_MEMORY_TYPES,
    Contradiction,
    Memory,
    MemoryType,
    Outcome,
    new_id,
    utcnow,
)
from .domain.multipliers import outcome_changes
from .domain.query import lexical_query
from .domain.ranking import EngineReranked, Explanation, Hit, RecallPlan, RecallQuery, Reranker
from .domain.scoring import ScoringPolicy
from .domain.settling import Related, Settlement, settle
from .domain.supersession import check_targets, penalised_confidence
from .domain.validity import Retention, expired, neighbour_query
from .engines.base import AuditQuery, Candidate, Engine, EngineInfo, ListQuery, StoreStats
from .errors import InvalidInput, NotFound
from .inference.reranker import ContextReranker

__all__ = ["Explanation", "Hit", "MemoryService", "RecallQuery", "WriteResult"]

WRITABLE_TYPES = USER_MEMORY_TYPES  # catalog entries are loaded by an admin, never by a tool
NEIGHBOURS = 20  # BM25 matches a new fact is compared with (duplicates, earlier values)
MAX_KEYED = 50  # live facts with one ``about`` key a write may supersede


@dataclass(frozen=True, slots=True)
class Origin:
    """A memory that already exists elsewhere (another program's store, being imported): it
    keeps an id derived from its source record and the dates the source gave it."""

    id: str
    created_at: datetime
    last_used_at: datetime | None = None  # a fact's last change at the source; default created_at


@dataclass(frozen=True, slots=True)
class PreparedWrite:
    """A checked write, not yet stored (``MemoryService.prepare``)."""

    user_id: str
    memory: Memory
    supersedes: tuple[str, ...] = ()
    playbook: Memory | None = None  # the playbook an episodic outcome reports on
    outcome: str | None = None
    redacted: tuple[str, ...] = ()  # kinds of credential the guard replaced (secrets = "redact")
    actor: Actor = OPERATOR  # who the audit trail names
    contradiction: Contradiction = Contradiction.NATURAL  # for what its ``about`` key supersedes


@dataclass(frozen=True, slots=True)
class WriteResult:
    id: str
    memory_type: MemoryType
    superseded: tuple[str, ...]
    redacted: tuple[str, ...] = ()  # kinds of credential replaced (guard.secrets = "redact")
    duplicate: bool = False  # the fact was already stored: ``id`` is the stored one, refreshed
    related: tuple[Related, ...] = ()  # live facts that look like earlier values of the same thing


class MemoryService:
    def __init__(
        self,
        engine: Engine,
        policy: ScoringPolicy | None = None,
        limits: Limits | None = None,
        reranker: Reranker | None = None,
        clock: Callable[[], datetime] = utcnow,
        guard: GuardPolicy | None = None,
    ) -> None:
        self._engine = engine
        self.policy = policy or ScoringPolicy()
        self.limits = limits or Limits()
        self.reranker = reranker or ContextReranker(self.policy)
        self.clock = clock
        self.guard = guard or GuardPolicy()

    # -- write -------------------------------------------------------------------------

    def write(self, user_id: str, text: str, memory_type: str = "semantic", **options: Any) -> WriteResult:
        """Validate and store one memory (the arguments are ``prepare``'s)."""
        return self.store(self.prepare(user_id, text, memory_type, **options))

    def prepare(
        self,
        user_id: str,
        text: str,
        memory_type: str = "semantic",
        *,
        supersedes_id: str | Sequence[str] | None = None,
        contradiction: str = "natural",
        occurred_at: datetime | str | None = None,
        confidence: float | None = None,
        fact_type: str | None = None,
        steps: list[Any] | None = None,
        metadata: dict[str, Any] | None = None,
        name: str | None = None,
        source_episodes: Iterable[str] = (),
        playbook_id: str | None = None,
        outcome: str | None = None,
        origin: Origin | None = None,
        actor: Actor = OPERATOR,
        about: str | None = None,
        valid_from: datetime | str | None = None,
        valid_to: datetime | str | None = None,
        expires_at: datetime | str | None = None,
    ) -> PreparedWrite:
        """Every check a write makes, with nothing stored: what ``store`` will write.

        Import prepares a whole file before storing any of it, so a bad record writes nothing.
        """
        kind = inputs.memory_type(memory_type, WRITABLE_TYPES)
        timing = {"about": about, "valid_from": valid_from, "valid_to": valid_to, "expires_at": expires_at}
        inputs.applicable(
            kind,
            {"occurred_at": occurred_at, "confidence": confidence, "fact_type": fact_type, "steps": steps}
            | timing,
        )
        playbook = self._outcome_target(user_id, kind, playbook_id, outcome)
        memory = self._build(
            user_id, kind, text, occurred_at, confidence, fact_type, steps, metadata, name, origin
        )
        now = memory.created_at if expires_at is None else self.clock()  # an expiry is checked against now
        memory = memory.evolve(
            **inputs.timing(kind, memory.created_at, now, about, valid_from, valid_to, expires_at)
        )
        targets = inputs.memory_ids(supersedes_id, self.limits)
        mode = _contradiction(contradiction)
        if targets:
            self.check_supersession(user_id, kind, targets)
            penalised = penalised_confidence(
                memory.confidence, mode, self.policy.supersession.harsh_confidence_penalty
            )
            memory = memory.evolve(supersedes=targets, confidence=penalised)
        memory = memory.evolve(source_episodes=tuple(inputs.memory_id(e) for e in source_episodes))
        if playbook is not None:
            memory = memory.evolve(
                metadata=memory.metadata | {"playbook_id": playbook.id, "outcome": Outcome(outcome).value}
            )
        memory, redacted = guard.screen(memory, self.guard)
        return PreparedWrite(user_id, memory, targets, playbook, outcome, redacted, actor, mode)

    def store(self, prepared: PreparedWrite, *, apart_from: Collection[str] = ()) -> WriteResult:
        """Write what ``prepare`` checked (and the playbook outcome it reports). A fact the user
        already has is refreshed instead; facts with its ``about`` key are superseded; what
        looks like an earlier value of it is named (``domain.settling``, against the store as
        it is now). ``apart_from``: memories never taken for this one's copy (an import keeps
        the records its source kept apart)."""
        memory, targets, playbook = prepared.memory, prepared.supersedes, prepared.playbook
        settled = self._settle(prepared.user_id, memory, targets, apart_from)
        if settled.duplicate_of is not None:
            return self._refresh(prepared.user_id, settled.duplicate_of)
        keyed = tuple(i for i in settled.supersede if i not in targets)
        if keyed:
            penalised = memory.confidence if targets else self._penalised(memory, prepared.contradiction)
            targets = (*targets, *keyed)
            memory = memory.evolve(supersedes=targets, confidence=penalised)
        self._engine.write(memory, supersede=targets)
        self._engine.record(audit.written(memory, targets, prepared.actor, memory.created_at))
        if playbook is not None:
            success = prepared.outcome == Outcome.SUCCESS
            self.record_outcome(prepared.user_id, playbook, success, memory.timeline_at)
        return WriteResult(memory.id, memory.memory_type, targets, prepared.redacted, related=settled.related)

    def _penalised(self, memory: Memory, mode: Contradiction) -> float | None:
        return penalised_confidence(
            memory.confidence, mode, self.policy.supersession.harsh_confidence_penalty
        )

    def _settle(
        self, user_id: str, memory: Memory, explicit: Sequence[str], apart_from: Collection[str] = ()
    ) -> Settlement:
        """Refresh, supersede by key, or name related facts (``domain.settling``): facts only."""
        if memory.memory_type is not MemoryType.SEMANTIC:
            return Settlement()
        neighbours = [m for m in self.neighbours(user_id, memory) if m.id not in apart_from]
        return settle(memory, neighbours, explicit)

    def neighbours(self, user_id: str, memory: Memory) -> list[Memory]:
        """The caller's live facts that may be about the same thing as ``memory``: its words'
        best BM25 matches (its concept's words added), and every fact with its ``about`` key."""
        now = self.clock()
        plan = RecallPlan(
            user_id=user_id,
            query=memory.text,
            memory_types=frozenset({memory.memory_type}),
            include_superseded=False,
            window=NEIGHBOURS,
            rank_constant=self.policy.retrieval.rrf_rank_constant,
            lexical_query=lexical_query(neighbour_query(memory.text)),
            k=NEIGHBOURS,
            dense=False,
        )
        found = {c.memory.id: c.memory for c in self._engine.candidates(plan)}
        if memory.about:
            keyed = ListQuery(user_id, frozenset({memory.memory_type}), False, MAX_KEYED, about=memory.about)
            found |= {m.id: m for m in self._engine.list(keyed)}
        return [m for m in found.values() if not m.is_superseded and not expired(m, now)]

    def _refresh(self, user_id: str, stored: Memory) -> WriteResult:
        """The fact is already stored: mark it used now (its decay starts again) instead of a copy."""
        self._engine.touch(user_id, [stored.id], self.clock())
        return WriteResult(stored.id, stored.memory_type, (), duplicate=True)

    def check_supersession(self, user_id: str, kind: MemoryType, targets: Sequence[str]) -> None:
        """Raise unless a new ``kind`` memory of ``user_id`` may supersede every target (the one
        place the rules are checked; engines only make the write conditional on them)."""
        check_targets(kind, targets, self._engine.get(user_id, targets), user_id)

    def _outcome_target(
        self, user_id: str, kind: MemoryType, playbook_id: Any, outcome: Any
    ) -> Memory | None:
        """The playbook an event reports on, checked before anything is written."""
        if playbook_id is None and outcome is None:
            return None
        if playbook_id is None or outcome not in tuple(Outcome):
            outcomes = " or ".join(repr(o.value) for o in Outcome)
            raise InvalidInput(f"to report a playbook outcome pass both playbook_id and outcome ({outcomes})")
        if kind is not MemoryType.EPISODIC:
            raise InvalidInput("a playbook outcome is an event: write it with memory_type='episodic'")
        return self.live_playbook(user_id, playbook_id)

    def live_playbook(self, user_id: str, playbook_id: Any) -> Memory:
        """One of the user's playbooks that nothing replaced: the only kind a run is counted on."""
        found = self._engine.get(user_id, [inputs.memory_id(playbook_id)])
        if not found or found[0].memory_type is not MemoryType.PROCEDURAL:
            raise NotFound(f"playbook {playbook_id!r} not found; recall it first to get its id")
        if found[0].is_superseded:
            raise InvalidInput(
                f"playbook {playbook_id!r} was replaced by {found[0].superseded_by}; report on that one"
            )
        return found[0]

    def record_outcome(self, user_id: str, playbook: Memory, success: bool, at: datetime) -> Memory:
        """Add one run to a playbook's track record (the agent's report, or consolidation's)."""
        updated = playbook.evolve(**outcome_changes(playbook, success, at))
        self._engine.update(user_id, updated)
        return updated

    def _build(
        self,
        user_id: str,
        kind: MemoryType,
        text: str,
        occurred_at: datetime | str | None,
        confidence: float | None,
        fact_type: str | None,
        steps: list[Any] | None,
        metadata: dict[str, Any] | None,
        name: str | None,
        origin: Origin | None = None,
    ) -> Memory:
        now = self.clock() if origin is None else origin.created_at
        body = inputs.clean_text(text, "text", self.limits.max_text_chars)
        memory = Memory(
            id=new_id() if origin is None else inputs.memory_id(origin.id),
            memory_type=kind,
            user_id=user_id,
            text=body,
            created_at=now,
            metadata=inputs.metadata(metadata, self.limits),
        )
        if kind is MemoryType.EPISODIC:
            return memory.evolve(occurred_at=inputs.timestamp(occurred_at, "occurred_at") or now)
        if kind is MemoryType.SEMANTIC:
            return memory.evolve(
                fact_type=inputs.fact_type(fact_type),
                confidence=1.0 if confidence is None else inputs.confidence(confidence),
                last_used_at=now if origin is None else origin.last_used_at or now,
            )
        title = inputs.clean_text(name, "name", 200) if name else body[:60]
        return memory.evolve(
            name=title,
            steps=inputs.steps(steps, self.limits),
            confidence=inputs.confidence(confidence),
        )

    def load_catalog(self, entries: Iterable[dict[str, Any]], actor: Actor = OPERATOR) -> int:
        """Upsert shared catalog entries (admin path: never reachable from a tool).

        Every entry is validated before the first is written, so a bad line loads nothing.
        """
        now = self.clock()
        memories = []
        for number, entry in enumerate(entries, start=1):
            try:
                memories.append(guard.screen(self._catalog_entry(entry, now), self.guard)[0])
            except InvalidInput as exc:
                raise InvalidInput(f"catalog entry {number}: {exc}") from exc
        for memory in memories:
            self._engine.write(memory)
        self._engine.record([audit.changed("write", None, m.id, actor, now, "catalog") for m in memories])
        return len(memories)

    def _catalog_entry(self, entry: dict[str, Any], now: datetime) -> Memory:
        tags = entry.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise InvalidInput("tags must be a list of strings")
        return Memory(
            id=inputs.memory_id(entry["id"]) if entry.get("id") else new_id(),
            memory_type=MemoryType.CATALOG,
            user_id=None,
            text=inputs.clean_text(entry.get("text"), "text", self.limits.max_text_chars),
            created_at=now,
            title=inputs.clean_text(entry.get("title"), "title", 500),
            category=entry.get("category"),
            tags=tuple(tags),
        )

    def update(self, user_id: str, changed: Memory, actor: Actor = OPERATOR) -> Memory:
        """Store new values of one of the caller's memories' mutable fields (consolidation:
        counts, steps, confidence, provenance); identity, type, owner and links stay."""
        stored = self.get(user_id, changed.id, include_catalog=False)
        fixed = [
            n for n in codec.NAMES if n not in codec.MUTABLE and getattr(changed, n) != getattr(stored, n)
        ]
        if fixed:
            raise InvalidInput(f"{', '.join(fixed)} of memory {changed.id!r} cannot change")
        memory = changed.evolve(
            text=inputs.clean_text(changed.text, "text", self.limits.max_text_chars),
            confidence=inputs.confidence(changed.confidence),
            source_episodes=tuple(inputs.memory_id(e) for e in changed.source_episodes),
        )
        memory, _redacted = guard.screen(memory, self.guard)
        self._engine.update(user_id, memory)
        self._engine.record([audit.changed("update", user_id, memory.id, actor, self.clock())])
        return memory

    # -- recall ------------------------------------------------------------------------

    def recall(
        self,
        user_id: str,
        query: str,
        k: int = 10,
        *,
        memory_types: Iterable[str] | None = None,
        include_catalog: bool = True,
        include_superseded: bool = False,
        min_relevance: float | None = None,
        touch: bool = True,
        as_of: datetime | str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> list[Hit]:
        """The ``k`` best memories for ``query`` that clear ``min_relevance`` (default: the policy's).

        ``as_of``: what was true at that instant; ``since``/``until``: what happened or was true
        in that window (``domain.validity``); explicit bounds win over the query's time phrases.
        ``touch`` records a use, but only for what was plausibly used (``ranking.earned_uses``).
        """
        now = self.clock()
        asked = RecallQuery(
            user_id,
            query,
            k,
            memory_types,
            include_catalog,
            include_superseded,
            min_relevance,
            inputs.time_filter(as_of, since, until),
        )
        plan = ranking.plan(self.policy, self.limits, asked, now)
        found = ranking.admitted(plan, self._engine.candidates(plan), now)
        candidates = self._from_their_side(plan, found)
        hits = ranking.rank(self.policy, self._reranker, plan, candidates, now)
        used = ranking.earned_uses(self.policy, hits, user_id) if touch else []
        if not used:
            return hits
        at = self.clock()
        self._engine.touch(user_id, used, at)
        return ranking.after_use(hits, used, at)

    def _from_their_side(self, plan: RecallPlan, candidates: list[Candidate]) -> list[Candidate]:
        """Each candidate's cosine, heard also with the query reworded from its side
        (``domain.perspective``: a speaker's turns, facts that name the user)."""
        weight = self.policy.retrieval.perspective_weight
        if not weight or not candidates:
            return candidates
        out = list(candidates)
        for view in perspective.views(plan.query, [c.memory for c in candidates]):
            seen = self._engine.cosines(plan, view.text, [out[i].memory.id for i in view.members])
            for i in view.members:
                candidate = out[i]
                other = seen.get(candidate.memory.id)
                if candidate.dense_similarity is not None and other is not None:
                    cosine = perspective.blended(candidate.dense_similarity, other, weight)
                    # Relevance asks whether the memory bears on the question at all, so it
                    # reads the better of the two readings (the mean is for ordering).
                    heard = candidate.relevance_similarity
                    if heard is None:
                        heard = max(candidate.dense_similarity, other)
                    out[i] = replace(candidate, dense_similarity=cosine, relevance_similarity=heard)
        return out

    def recall_plan(self, query: RecallQuery) -> RecallPlan:
        """What ``recall`` asks of the engine, now (validated)."""
        return ranking.plan(self.policy, self.limits, query, self.clock())

    @property
    def _reranker(self) -> Reranker:
        return EngineReranked() if self._engine.info.reranks_server_side else self.reranker

    def likely(self, hits: Iterable[Hit]) -> list[Hit]:
        """The hits that clear the relevance floor: those that probably bear on the query."""
        return ranking.likely(self.policy, hits)

    # -- read / forget -----------------------------------------------------------------

    def get(self, user_id: str, memory_id: str, *, include_catalog: bool = True) -> Memory:
        found = self._engine.get(user_id, [inputs.memory_id(memory_id)], include_catalog=include_catalog)
        found = [m for m in found if not expired(m, self.clock())]
        if not found:
            raise NotFound(f"memory {memory_id!r} not found")
        return found[0]

    def forget(self, user_id: str, memory_id: str, actor: Actor = OPERATOR) -> str:
        """Delete one memory; the audit trail keeps its id, never its text."""
        if not self._engine.forget(user_id, inputs.memory_id(memory_id)):
            raise NotFound(f"memory {memory_id!r} not found; recall it first to get a valid id")
        self._engine.record([audit.changed("forget", user_id, memory_id, actor, self.clock())])
        return memory_id

    def audit(
        self, user_id: str | None, since: datetime | None = None, limit: int = 10_000
    ) -> list[AuditEntry]:
        """Who wrote, superseded, forgot or imported which of ``user_id``'s memories, oldest first."""
        return self._engine.audit(AuditQuery(user_id, since, limit))

    def list(
        self,
        user_id: str | None,
        *,
        memory_types: Iterable[str] | None = None,
        include_superseded: bool = True,
        limit: int = 100,
        offset: int = 0,
        since: datetime | None = None,
        oldest_first: bool = False,
    ) -> list[Memory]:
        kinds = None
        if memory_types is not None:
            kinds = frozenset(inputs.memory_type(t, MemoryType) for t in memory_types)
        return self._engine.list(
            ListQuery(user_id, kinds, include_superseded, limit, offset, since, oldest_first)
        )

    def get_many(self, user_id: str, ids: Sequence[str]) -> list[Memory]:
        """The caller's memories among ``ids`` (unknown ids skipped), in the order asked."""
        wanted = [inputs.memory_id(i) for i in ids]
        return self._engine.get(user_id, wanted) if wanted else []

    def profile(self, user_id: str, policy: profile.ProfilePolicy) -> list[Memory]:
        """The user's core profile (``domain.profile``): key current facts, within its budget."""
        newest = ListQuery(
            user_id, frozenset({MemoryType.SEMANTIC}), include_superseded=False, limit=policy.scan
        )
        return profile.select(self._engine.list(newest), policy, user_id)

    # -- operations ---------------------------------------------------------------------

    @property
    def info(self) -> EngineInfo:
        """Which engine and embedding model serve this store."""
        return self._engine.info

    def stats(self) -> StoreStats:
        """Counts per owner and type, store size and embedding model: an operator's view."""
        found = self._engine.stats()
        waiting = upkeep.count_expired(self._engine, found, self.clock())
        return replace(found, embedding_model=self._engine.info.embedding_model, expired=waiting)

    def prune(self, retention: Retention, *, dry_run: bool = False, actor: Actor = OPERATOR) -> list[Memory]:
        """Remove what expired and what aged past its type's retention, every user; what went
        (or, with ``dry_run``, would go). See ``upkeep``. Each removal is a forget in the audit
        trail, saying why ("expired" or "retention")."""
        now = self.clock()
        gone = upkeep.prune(self._engine, retention, now, dry_run=dry_run)
        if not dry_run and gone:
            self._engine.record(
                [
                    audit.changed(
                        "forget", m.user_id, m.id, actor, now, "expired" if expired(m, now) else "retention"
                    )
                    for m in gone
                ]
            )
        return gone

    def get_state(self, user_id: str, key: str) -> str | None:
        """A small per-user bookkeeping value (the consolidation watermark and journal)."""
        return self._engine.get_state(user_id, key)

    def set_state(self, user_id: str, key: str, value: str | None) -> None:
        """Store (or, with None, delete) a per-user bookkeeping value; durable once it returns."""
        self._engine.set_state(user_id, key, value)

    def warm(self, user_id: str) -> None:
        """Pay an engine's start-up costs (model session, vector caches) before the first recall."""
        self._engine.warm(user_id)

    def warm_rows(self, user_id: str) -> None:
        """The part of ``warm`` that is quick and holds the interpreter: a small store's caches."""
        self._engine.warm_rows(user_id)

    def export_memories(
        self, out: TextIO, users: Iterable[str | None], progress: portability.Progress = portability.ignore
    ) -> int:
        """Every memory of ``users`` as export lines (see ``portability``); how many were written."""
        return portability.export_memories(self._engine, out, users, progress)

    def import_memories(
        self,
        records: list[tuple[Memory, str | None]],
        progress: portability.Progress = portability.ignore,
        *,
        trail: Sequence[AuditEntry] = (),
        actor: Actor = OPERATOR,
    ) -> portability.ImportReport:
        """Load records read (and validated) by ``portability.read_records``; ids already
        present are skipped, catalog entries replaced. Every record passes the write guard
        first: under ``secrets = "refuse"`` one credential imports nothing."""
        memories = guard.screen_batch([memory for memory, _model in records], self.guard, "record")
        screened = [(m, model) for m, (_memory, model) in zip(memories, records, strict=True)]
        imported: list[Memory] = []
        report = portability.import_memories(self._engine, screened, progress, imported.append)
        now = self.clock()
        self._engine.record(
            [
                *trail,
                *(
                    audit.changed("import", m.user_id, m.id, actor, now, m.memory_type.value)
                    for m in imported
                ),
            ]
        )
        return report

    def with_policy(self, policy: ScoringPolicy, reranker: Reranker | None = None) -> MemoryService:
        """A service on the same engine, limits and clock that scores with another policy (ablation)."""
        return MemoryService(self._engine, policy, self.limits, reranker, self.clock, self.guard)

    def close(self) -> None:
        self._engine.close()


def _contradiction(value: Any) -> Contradiction:
    try:
        return Contradiction(value or "natural")
    except ValueError:
        raise InvalidInput("contradiction must be 'natural' or 'harsh'") from None
