"""The write half of ``MemoryService`` (``class MemoryService(Writing)``): how a tool's
arguments become a checked memory, and how it is stored, what already stored it settles
(a copy is refreshed, facts with its ``about`` key superseded, earlier values named), and the
playbook outcome it reports. Shared catalog entries are loaded here too.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .domain import audit, guard, inputs
from .domain.audit import OPERATOR, Actor
from .domain.guard import GuardPolicy
from .domain.limits import Limits
from .domain.model import USER_MEMORY_TYPES, Contradiction, Memory, MemoryType, Outcome, new_id
from .domain.multipliers import outcome_changes
from .domain.query import lexical_query
from .domain.ranking import RecallPlan
from .domain.scoring import ScoringPolicy
from .domain.settling import Related, Settlement, settle
from .domain.supersession import check_targets, penalised_confidence
from .domain.validity import expired, neighbour_query
from .engines.base import Engine, ListQuery
from .errors import InvalidInput, NotFound

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


class Writing:
    """Writes: ``MemoryService`` sets these attributes and inherits the methods."""

    _engine: Engine
    policy: ScoringPolicy
    limits: Limits
    guard: GuardPolicy
    clock: Callable[[], datetime]

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
        if playbook is not None and outcome is not None:  # _outcome_target checked the pair
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
        trail = audit.written(memory, targets, prepared.actor, memory.created_at)
        self._engine.write(memory, supersede=targets, trail=trail)
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


def _contradiction(value: Any) -> Contradiction:
    try:
        return Contradiction(value or "natural")
    except ValueError:
        raise InvalidInput("contradiction must be 'natural' or 'harsh'") from None
