"""Time as a filter: when a memory was true, what a window or an instant keeps, expiry, retention.

- **Valid time** (facts): true from ``valid_from`` (default: when written) until ``valid_to``
  (default: open). Superseding closes the old fact where the new one starts (the engines set
  ``valid_to``); a fact superseded before valid time existed ends at ``superseded_at``.
- **Span** of any memory: an event is its instant (``occurred_at``); a fact its validity; a
  playbook from its writing until it was replaced; a catalog entry always.
- **as_of**: what was true at an instant: spans that contain it (replaced facts included).
- **since / until**: spans that fall in or overlap the window; explicit bounds win over the
  time phrases of the query.
- **Expiry**: a memory is never returned once ``expires_at`` has passed; stores remove it.
- **Retention**: per memory type, memories older than the type's retention leave the store
  (age from the same date decay reads); an episode still cited as a fact's source stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .attributes import CONCEPTS
from .gist import gist
from .model import Memory, MemoryType


@dataclass(frozen=True, slots=True)
class TimeFilter:
    """What a recall keeps by time (all None: every live memory, the default)."""

    as_of: datetime | None = None
    since: datetime | None = None
    until: datetime | None = None

    @property
    def active(self) -> bool:
        return self.as_of is not None or self.since is not None or self.until is not None

    @property
    def historical(self) -> bool:
        """Replaced facts can answer: what was true then is asked, not what is true now."""
        return self.active


ANY_TIME = TimeFilter()  # no bound: every live memory


def span(memory: Memory) -> tuple[datetime | None, datetime | None]:
    """When the memory was true, as [start, end); None: unbounded on that side."""
    if memory.memory_type is MemoryType.EPISODIC:
        at = memory.occurred_at or memory.created_at
        return at, at
    if memory.memory_type is MemoryType.CATALOG:
        return None, None
    start = memory.valid_from or memory.created_at
    end = memory.valid_to if memory.valid_to is not None else memory.superseded_at
    return start, end


def true_at(memory: Memory, instant: datetime) -> bool:
    start, end = span(memory)
    if memory.memory_type is MemoryType.EPISODIC:
        return start is not None and start <= instant  # it had happened by then
    return (start is None or start <= instant) and (end is None or instant < end)


def overlaps(memory: Memory, since: datetime | None, until: datetime | None) -> bool:
    start, end = span(memory)
    if memory.memory_type is MemoryType.EPISODIC:
        return start is not None and (since is None or start >= since) and (until is None or start <= until)
    return (until is None or start is None or start <= until) and (
        since is None or end is None or end > since
    )


def kept(memory: Memory, window: TimeFilter, now: datetime) -> bool:
    """Does a recall with ``window`` return this memory (expiry aside)?"""
    if expired(memory, now):
        return False
    if window.as_of is not None and not true_at(memory, window.as_of):
        return False
    if window.since is not None or window.until is not None:
        return overlaps(memory, window.since, window.until)
    return True


def expired(memory: Memory, now: datetime) -> bool:
    return memory.expires_at is not None and memory.expires_at <= now


@dataclass(frozen=True, slots=True)
class Retention:
    """How long memories of each type stay (None: forever)."""

    days: dict[MemoryType, int | None]
    keep_cited_episodes: bool = True

    @property
    def active(self) -> bool:
        """Does any type age out (else only expired memories leave)?"""
        return any(days is not None for days in self.days.values())

    def limit(self, kind: MemoryType) -> timedelta | None:
        days = self.days.get(kind)
        return None if days is None else timedelta(days=days)


def age_reference(memory: Memory) -> datetime:
    """What a memory's age is counted from: when an event happened, when a fact or playbook
    was last used (else written), as decay counts it."""
    if memory.memory_type is MemoryType.EPISODIC:
        return memory.occurred_at or memory.created_at
    return memory.last_used_at or memory.created_at


def due(memories: Iterable[Memory], retention: Retention, now: datetime, cited: set[str]) -> list[Memory]:
    """The memories that leave the store now: expired ones, and those past their type's
    retention (an episode a fact cites as its source stays unless configured otherwise)."""
    out = []
    for memory in memories:
        if memory.is_catalog:
            continue
        if expired(memory, now):
            out.append(memory)
            continue
        limit = retention.limit(memory.memory_type)
        if limit is None or now - age_reference(memory) <= limit:
            continue
        if memory.memory_type is MemoryType.EPISODIC and retention.keep_cited_episodes and memory.id in cited:
            continue
        out.append(memory)
    return out


def cited_episodes(facts: Sequence[Memory]) -> set[str]:
    return {episode for fact in facts for episode in fact.source_episodes}


def neighbour_query(text: str) -> str:
    """A fact's text and its concept's cue words: what finds earlier values worded otherwise
    ("moved to Glasgow" finds "lives in Leeds")."""
    found = gist(text)
    if found.concept is None:
        return text
    concept = next(c for c in CONCEPTS if c.name == found.concept)
    words = {w.rstrip("*") for cue in concept.cues for slot in cue.split()[:1] for w in slot.split("|")}
    words |= set(concept.cjk)
    return f"{text} {' '.join(sorted(words))}"
