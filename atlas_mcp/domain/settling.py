"""What a new fact does to the facts already stored: refresh one, supersede some, name others.

``settle(new, neighbours)`` decides from the new fact and the caller's live facts that look
like it (the service finds them):

- **duplicate**: the newest fact about the same thing says the same value and the new one
  adds nothing: it is refreshed instead of stored again (unless the writer supersedes
  something, then the copy is replaced like the other targets);
- **same key**: every live fact with the new fact's ``about`` key is superseded by it;
- **related**: the other facts about the same thing (earlier values, or restatements with
  less detail), for the writer to supersede if they are no longer true.

Nothing is merged silently: a fact is refreshed only when the new one adds nothing to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .gist import normal_key
from .model import Memory
from .resolution import since
from .sameness import Kind, Relation, related

MAX_RELATED = 5  # earlier values named in a write result


@dataclass(frozen=True, slots=True)
class Related:
    memory: Memory
    why: str


@dataclass(frozen=True, slots=True)
class Settlement:
    duplicate_of: Memory | None = None  # refresh this instead of writing
    supersede: tuple[str, ...] = ()  # superseded by the new fact (same key, or a replaced copy)
    related: tuple[Related, ...] = ()  # probably earlier values: the writer decides


def settle(new: Memory, neighbours: Sequence[Memory], explicit: Sequence[str] = ()) -> Settlement:
    """``neighbours``: the caller's live facts of the new fact's type that may be about the
    same thing (any order); ``explicit``: ids the writer supersedes itself."""
    key = normal_key(new.about)
    same_key = [m for m in neighbours if key and normal_key(m.about) == key]
    relations = {m.id: _relation(m, new) for m in neighbours}
    slot = sorted(
        (m for m in neighbours if relations[m.id].same_thing),
        key=lambda m: (since(m), m.created_at),
        reverse=True,
    )
    newest = slot[0] if slot else None
    if newest is not None and relations[newest.id].kind is Kind.SAME and relations[newest.id].adds_nothing:
        if not explicit:
            return Settlement(duplicate_of=newest)
        return Settlement(supersede=_ids(same_key, newest))  # the copy goes with the targets
    keyed = _ids(same_key)
    named = [Related(m, relations[m.id].why) for m in slot if m.id not in keyed and m.id not in explicit]
    return Settlement(supersede=keyed, related=tuple(named[:MAX_RELATED]))


def _relation(old: Memory, new: Memory) -> Relation:
    return related(old.text, new.text, old.about, new.about)


def _ids(memories: Sequence[Memory], *more: Memory) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.id for m in (*memories, *more)))
