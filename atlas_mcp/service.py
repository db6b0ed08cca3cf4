"""MemoryService: the one API every surface uses (MCP tools, CLI, eval, consolidation, bench).

It owns the policy: input validation, supersession rules, the rerank stage, final scoring and
usage statistics. Engines only store and fetch. The write half (new memories, what they settle,
the catalog) is ``writing.Writing``; recall runs the pipeline of ``domain.ranking``.
"""

from __future__ import annotations

import builtins  # MemoryService.list shadows the type in the annotations after it
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import TextIO

from . import portability, upkeep
from .domain import asked as asked_about
from .domain import audit, codec, first_reads, guard, hearing, inputs, perspective, profile, ranking
from .domain.audit import OPERATOR, Actor, AuditEntry
from .domain.guard import GuardPolicy
from .domain.limits import Limits
from .domain.model import (
    Memory,
    MemoryType,
    utcnow,
)
from .domain.ranking import EngineReranked, Explanation, Hit, RecallPlan, RecallQuery, Reranker
from .domain.scoring import ScoringPolicy
from .domain.validity import Retention, expired
from .engines.base import AuditQuery, Engine, EngineInfo, ListQuery, StoreStats
from .errors import InvalidInput, NotFound
from .inference.reranker import ContextReranker
from .uses import Use, Uses
from .writing import WRITABLE_TYPES, Origin, PreparedWrite, WriteResult, Writing

__all__ = [
    "WRITABLE_TYPES",
    "Explanation",
    "Hit",
    "MemoryService",
    "Origin",
    "PreparedWrite",
    "RecallQuery",
    "WriteResult",
]


class MemoryService(Writing):
    def __init__(
        self,
        engine: Engine,
        policy: ScoringPolicy | None = None,
        limits: Limits | None = None,
        reranker: Reranker | None = None,
        clock: Callable[[], datetime] = utcnow,
        guard: GuardPolicy | None = None,
    ) -> None:
        self._uses = Uses()  # recalls' uses recorded after their replies (``uses.py``)
        self._stored = engine
        self.policy = policy or ScoringPolicy()
        self.limits = limits or Limits()
        self.reranker = reranker or ContextReranker(self.policy)
        self.clock = clock
        self.guard = guard or GuardPolicy()
        # Whom each user's recent views were about: the next recall's rewordings are embedded
        # beside its first stages (``perspective.foreseen``).
        self._acquaintances = perspective.Acquaintances()

    @property
    def _engine(self) -> Engine:
        """The engine, once every use a recall handed over is recorded: whatever reads or writes
        memories through it (recall, write, get, list, prune, export, ...) sees them as before."""
        self._uses.settle()
        return self._stored

    @_engine.setter
    def _engine(self, engine: Engine) -> None:  # ``Writing`` declares the attribute writable
        self._stored = engine

    # -- changes to stored memories ---------------------------------------------------

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
        uses_after: builtins.list[Use] | None = None,
    ) -> list[Hit]:
        """The ``k`` best memories for ``query`` that clear ``min_relevance`` (default: the policy's).

        ``as_of``: what was true at that instant; ``since``/``until``: what happened or was true
        in that window (``domain.validity``); explicit bounds win over the query's time phrases.
        ``touch`` records a use, but only for what was plausibly used (``ranking.earned_uses``);
        with ``uses_after`` the use is not recorded here but appended to it, for the caller to
        start once the reply is written (``Use.start``; the hits are the same).
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
        if plan.dense and self.policy.retrieval.perspective_weight:
            # of the query as the views read it (cleaned: a verbatim message's trailing newline
            # would foresee rewordings no view asks for, and run the model for them in vain)
            foreseen = tuple(self._acquaintances.foreseen(user_id, plan.query))
            plan = replace(plan, foreseen=foreseen) if foreseen else plan  # the plan's is ()
        pool = ranking.admitted(plan, ranking.pool_of(self._engine.candidates(plan)), now)
        learn = partial(self._acquaintances.learn, user_id)
        pool = hearing.from_their_side(self.policy, plan, pool, self._engine.cosines, learn)
        meaning = self._meaning(plan)
        if meaning != pool.meaning:  # mostly None, as the pool's already is: no copy of it
            pool = replace(pool, meaning=meaning)
        hits = ranking.rank(self.policy, self._reranker, plan, pool, now)
        used = ranking.earned_uses(self.policy, hits, user_id) if touch else []
        if not used:
            return hits
        at = self.clock()
        if uses_after is None:
            self._engine.touch(user_id, used, at)
        else:
            uses_after.append(self._uses.later(partial(self._stored.touch, user_id, used, at)))
        return ranking.after_use(hits, used, at)

    def _meaning(self, plan: RecallPlan) -> str | None:
        """The attribute the query's meaning asks about (``domain.asked``), read from the query
        vector the engine already has; not for a question about when something happened (it
        asks about an event, even when it names an attribute: "my last trip to the dentist")."""
        rerank = self.policy.context_rerank
        if not (rerank.read_meaning and rerank.attribute_weight) or plan.intent.found:
            return None
        if not asked_about.reads_meaning(plan.query):
            return None
        likeness = self._engine.likeness(plan, asked_about.PROTOTYPE_TEXTS)
        return asked_about.meaning_of(likeness, rerank.meaning_threshold, rerank.meaning_margin)

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

    def get_many(self, user_id: str, ids: Sequence[str]) -> builtins.list[Memory]:
        """The caller's memories among ``ids`` (unknown ids skipped), in the order asked."""
        wanted = [inputs.memory_id(i) for i in ids]
        return self._engine.get(user_id, wanted) if wanted else []

    def profile(self, user_id: str, policy: profile.ProfilePolicy) -> builtins.list[Memory]:
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

    def prune(
        self, retention: Retention, *, dry_run: bool = False, actor: Actor = OPERATOR
    ) -> builtins.list[Memory]:
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

    def keep_row_facts(self, after_first_recall: bool = True) -> None:
        """What recall reads of each row, kept with the rows stored before it was (``Engine``)."""
        self._engine.keep_row_facts(after_first_recall)

    def warm_rows(self, user_id: str) -> None:
        """The part of ``warm`` that is quick and holds the interpreter: a small store's caches."""
        self._engine.warm_rows(user_id)

    def preload(self, user_id: str, after_first_recall: bool = True) -> None:
        """What recall reads of each memory, worked out at load (``Engine.preload``), with
        what it works out the first time it shows one (``domain.first_reads``)."""
        self._engine.preload(
            user_id, after_first_recall, first_reads.read_ahead, first_reads.read_ahead_facts
        )

    def export_memories(
        self, out: TextIO, users: Iterable[str | None], progress: portability.Progress = portability.ignore
    ) -> int:
        """Every memory of ``users`` as export lines (see ``portability``); how many were written."""
        return portability.export_memories(self._engine, out, users, progress)

    def import_memories(
        self,
        records: builtins.list[tuple[Memory, str | None]],
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
        self._uses.close()
        self._stored.close()
