"""Recall resolves what the agent left unresolved: facts about the same thing, newest first.

An agent that never passes ``supersedes_id`` leaves "lives in Leeds" and "moved to Glasgow"
both live. ``resolve`` looks at the facts a recall is about to show and at the newer facts
in its candidate pool: facts that ``domain.sameness`` finds are about the same thing form a
group. In a group, restatements of one value are copies (the best-ranked one is shown, the
others are not repeated), and the newest value is the current one: it is shown at least as
high as any older value of the group ranked, and each older value comes after it, marked as
probably outdated by it. Facts about different things are never grouped.

Pure: memories and their scores in, an order and marks out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

import numpy as np

from .gist import gist, normal_key
from .model import Memory, MemoryType
from .sameness import Kind, related
from .stopwords import STOP_WORDS
from .wording import has_digit

PAIRING_DEPTH = 2  # hops from a shown fact along "about the same thing" within the pool
POOL_DEPTH = 50  # candidates past what a recall shows that may hold a newer value
MAX_PARTNERS = 12  # the best-ranked facts sharing a word with a fact that it is compared with
MAX_CHECKS = 240  # comparisons one recall may make (~20 µs each)
KEPT_FACTS = 1 << 15  # facts whose keys are kept: more than the embedded engine keeps memories
_EVERY_STOP_WORD = frozenset().union(*STOP_WORDS.values())


@dataclass(frozen=True, slots=True)
class Resolution:
    order: list[int]  # indices into the candidates, best first (hidden copies left out)
    outdated_by: dict[int, int] = field(default_factory=dict)  # older value → current value
    why: dict[int, str] = field(default_factory=dict)  # why an index is marked outdated
    copies: dict[int, tuple[int, ...]] = field(default_factory=dict)  # shown copy → hidden copies
    lifted: dict[int, int] = field(default_factory=dict)  # current value → the older value it outranks


def resolve(
    memories: Sequence[Memory], ranked: Sequence[int], shown: int, semantic: np.ndarray | None = None
) -> Resolution:
    """``ranked``: candidate indices, best first; ``shown``: how many the recall may return;
    ``semantic``: per candidate, is its memory a fact (a pool's column of it), if known.

    The first ``shown`` facts (and the facts among the next ``POOL_DEPTH`` candidates they are
    grouped with) are resolved; the rest of the order is kept as it is.
    """
    # Replacements rank near what they replace (they are about the same thing): the facts among
    # the pool's best are compared, not all ~300 candidates.
    head = ranked[: shown + POOL_DEPTH]
    reach = len(head)  # every fact grouped is within the first ``reach`` candidates
    if semantic is not None:  # only the facts' memories are read (a chat's pool may hold none)
        head = [i for i, fact in zip(head, semantic[head].tolist(), strict=True) if fact]
    facts = [i for i in head if _resolvable(memories[i])]
    if len(facts) < 2:
        return Resolution(list(ranked))
    index = _Index(memories, facts)
    groups = _groups(ranked[:shown], index)
    if not groups:
        return Resolution(list(ranked))
    return _ordered(memories, ranked, groups, reach, index)


def _resolvable(memory: Memory) -> bool:
    return memory.memory_type is MemoryType.SEMANTIC and not memory.is_superseded


def since(memory: Memory) -> datetime:
    """When a fact became true: its validity start, else when it was written."""
    return memory.valid_from or memory.created_at


class _Index:
    """The pool's facts and the words that could make two of them about the same thing."""

    def __init__(self, memories: Sequence[Memory], facts: list[int]) -> None:
        self.facts = facts  # best-ranked first
        self.keys: dict[int, frozenset[str]] = {}
        # what a pair's verdict reads of each fact, once per fact rather than per pair: which of
        # the two is older (its ``since``, then when it was written), its text and its ``about``
        self.reads: dict[int, tuple[tuple[datetime, datetime], str, str | None]] = {}
        for i in facts:
            memory = memories[i]
            self.keys[i] = _keys_of(memory.text, memory.about)
            self.reads[i] = ((since(memory), memory.created_at), memory.text, memory.about)

    def partners(self, i: int) -> list[int]:
        """Facts sharing a word or a concept with ``i``, best-ranked first, at most MAX_PARTNERS.
        A recall asks this of a few facts among ~60: each asks every fact (a set test in C)
        rather than every fact's words being indexed for it."""
        mine = self.keys.get(i, frozenset())
        out = []
        for j in self.facts:
            if j != i and not mine.isdisjoint(self.keys[j]):
                out.append(j)
                if len(out) == MAX_PARTNERS:
                    break
        return out


def _keys(memory: Memory) -> frozenset[str]:
    return _keys_of(memory.text, memory.about)


def grouping_keys(memory: Memory) -> frozenset[str] | None:
    """The words and concepts that may make a fact about the same thing as another (None for
    a memory resolution does not group); kept per (text, about) for ``KEPT_FACTS`` facts."""
    return _keys(memory) if _resolvable(memory) else None


@lru_cache(maxsize=KEPT_FACTS)  # the same facts come back recall after recall
def _keys_of(text: str, about: str | None) -> frozenset[str]:
    g = gist(text)
    # Not the names a fact opens with: "Nora ..." would pair each of Nora's facts with all others.
    keys = {
        _anchor(w) if w.startswith("<") else w for w in g.words if w not in g.name_words and not has_digit(w)
    }
    # And the words as written: a short fact is easily read in the wrong language, and then
    # stemmed unlike its replacement ("schwimmen" / "schwimm"); ``related`` reads the pair in one.
    keys |= {f"={w}" for w in g.all_words if len(w) > 3 and w not in g.names and w not in _EVERY_STOP_WORD}
    if g.concept:
        keys.add(f"<{g.concept}>")
    key = normal_key(about)
    if key:
        keys.add(f"about:{key}")
    return frozenset(keys)


def _anchor(word: str) -> str:
    """A concept anchor without the value it carries ("<diet:vegan>" → "<diet>")."""
    return f"<{word[1:-1].split(':')[0]}>"


def _groups(head: Sequence[int], index: _Index) -> list[_Group]:
    """Connected facts, starting from the shown ones, through same-thing relations."""
    seen: set[int] = set()
    groups = []
    budget = MAX_CHECKS
    reads = index.reads
    for start in head:
        if start in seen or start not in reads:
            continue
        group = _Group()
        members, checked, edges = group.members, group.checked, group.edges
        frontier = [start]
        members.add(start)
        for _ in range(PAIRING_DEPTH):
            following = []
            for i in frontier:
                for j in index.partners(i):
                    pair = (i, j) if i < j else (j, i)
                    if j in members and pair in checked:
                        continue
                    if budget <= 0:
                        break
                    budget -= 1
                    checked.add(pair)
                    # the older first; on equal dates the pair's order (a stable sort of the two)
                    a, b = reads[i], reads[j]
                    older, newer = (b, a) if b[0] < a[0] else (a, b)
                    kind = _kind(older[1], newer[1], older[2], newer[2])
                    if kind is Kind.DISTINCT:
                        continue
                    edges.append((i, j, kind))
                    if j not in members:
                        members.add(j)
                        following.append(j)
            frontier = following
        if len(members) > 1:
            seen |= members
            groups.append(group)
    return groups


@dataclass(slots=True)
class _Group:
    members: set[int] = field(default_factory=set)
    edges: list[tuple[int, int, Kind]] = field(default_factory=list)
    checked: set[tuple[int, int]] = field(default_factory=set)


@lru_cache(maxsize=1 << 16)  # the same pairs come back recall after recall
def _kind(older: str, newer: str, older_about: str | None, newer_about: str | None) -> Kind:
    return related(older, newer, older_about, newer_about).kind


def _ordered(
    memories: Sequence[Memory], ranked: Sequence[int], groups: list[_Group], reach: int, index: _Index
) -> Resolution:
    # the groups' members are all among the first ``reach`` candidates: only those are looked up
    position = {i: p for p, i in enumerate(ranked[:reach])}
    placement: dict[int, float] = {}  # higher first; the candidates not moved stay at -position

    def place(i: int) -> float:
        return placement.get(i, float(-position[i]))

    outdated_by: dict[int, int] = {}
    why: dict[int, str] = {}
    copies: dict[int, tuple[int, ...]] = {}
    lifted: dict[int, int] = {}
    hidden: set[int] = set()
    for group in groups:
        classes = _value_classes(group)
        newest = max(group.members, key=lambda i: index.reads[i][0])
        best = {c: min(members, key=position.__getitem__) for c, members in classes.items()}
        for c, members in classes.items():
            rest = tuple(sorted(members - {best[c]}, key=position.__getitem__))
            if rest:
                copies[best[c]] = rest
                hidden.update(rest)
        current_class = next(c for c, members in classes.items() if newest in members)
        current = best[current_class]
        top = max(place(i) for i in group.members)
        if top > place(current):
            lifted[current] = max(group.members, key=place)
            placement[current] = top + 0.5  # takes the place of the best-ranked older value
        for c, rep in best.items():
            if c == current_class:
                continue
            outdated_by[rep] = current
            why[rep] = f"a newer fact about the same thing: {memories[current].text[:80]}"
            placement[rep] = min(place(rep), place(current) - 0.25)
    return Resolution(_by_placement(ranked, position, placement, hidden), outdated_by, why, copies, lifted)


def _by_placement(
    ranked: Sequence[int], position: dict[int, int], placement: dict[int, float], hidden: set[int]
) -> list[int]:
    """``ranked`` without ``hidden``, by placement (higher first), then position.

    Only a prefix is sorted: past the last moved or hidden candidate, and past where the lowest
    placement would fall, every candidate keeps its place (-position is lower than any
    placement and falls with position), so the ~250 candidates below a recall's groups are
    appended as they are rather than sorted again."""
    moved = placement.keys() | hidden
    if not moved:
        return list(ranked)
    end = max(position[i] for i in moved) + 1
    lowest = min(placement.values(), default=0.0)
    if lowest < 0:
        end = max(end, math.floor(-lowest) + 1)  # -position < lowest from here on
    keyed = sorted(
        (-placement.get(i, float(-p)), p, i) for p, i in enumerate(ranked[:end]) if i not in hidden
    )
    return [i for _, _, i in keyed] + list(ranked[end:])


def _value_classes(group: _Group) -> dict[int, set[int]]:
    """Members joined by SAME edges (restatements of one value), keyed by a representative."""
    parent = {i: i for i in group.members}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j, kind in group.edges:
        if kind is Kind.SAME:
            parent[root(i)] = root(j)
    classes: dict[int, set[int]] = {}
    for i in group.members:
        classes.setdefault(root(i), set()).add(i)
    return classes
