"""Are two facts about the same thing? And if so, the same value, or a newer one?

``relation(older, newer)`` compares two facts' gists (``domain.gist``) and their ``about``
keys:

- **same key**: two facts with the same ``about`` key are about the same thing; different
  keys, different things. Only without a key on either side do the rules below decide.
- **different subjects**: "Nora's sister Claire lives in Dublin" and "Nora lives in Leeds"
  are about different people; so are "my son Leo ..." and "my daughter Ava ...".
- **same attribute**: the same single-valued concept ("lives in Leeds" / "moved to Glasgow"),
  or a shared attribute word ("yoga", "firmware") with the values differing in one place.
  Facts that differ in two places ("aisle seats on flights" / "window seats on trains"), or
  in a word before the concept ("work email" / "personal email"), are about two things.
  Multi-valued concepts (languages, allergies, likes) never replace each other.
- **same value**: nothing value-like differs (numbers, names, dates); the rest is wording.

The answer is ``SAME`` (a restatement; ``adds_nothing`` when the newer says nothing the
older does not), ``UPDATE`` (the newer probably replaces the older) or ``DISTINCT``. When
unsure, distinct: a fact wrongly taken for another's update is hidden behind it, which is
worse than showing both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from .alignment import Opcode, opcodes
from .attributes import WEEKDAYS_AND_MONTHS
from .gist import BY_NAME, Gist, gist, normal_key
from .lexical import detect_language

PREFIX_CHARS = 5  # shortest common prefix that matches a word to its inflection or compound
MIN_SHARED = 0.5  # share of each fact's words (its own values aside) the two must have in common


class Kind(StrEnum):
    SAME = "same"
    UPDATE = "update"
    DISTINCT = "distinct"


@dataclass(frozen=True, slots=True)
class Relation:
    kind: Kind
    why: str
    adds_nothing: bool = False  # SAME, and the newer says nothing the older does not

    @property
    def same_thing(self) -> bool:
        return self.kind is not Kind.DISTINCT


DISTINCT = Relation(Kind.DISTINCT, "")


def related(
    older_text: str, newer_text: str, older_about: str | None = None, newer_about: str | None = None
) -> Relation:
    """How ``newer_text`` relates to ``older_text`` (see the module docstring)."""
    old_key, new_key = normal_key(older_about), normal_key(newer_about)
    old, new = gist(older_text), gist(newer_text)
    if old.language != new.language:
        # Two facts about one thing are written in one language; a short one is easily misread
        # ("Jonas geht dienstags schwimmen" as English), so both are read in the language of the
        # pair, which the two texts together name more reliably than either alone.
        language = detect_language(f"{older_text}\n{newer_text}")
        old, new = gist(older_text, language), gist(newer_text, language)
    if old_key and new_key:
        return _keyed(old, new, new_key) if old_key == new_key else DISTINCT
    if _different_subjects(old, new):
        return DISTINCT
    return _compare(old, new)


def _keyed(old: Gist, new: Gist, key: str) -> Relation:
    """Two facts the agent said are about the same thing: the same value, or the next one."""
    a, b, ops, old_d, new_d = _alignment(old, new)
    if _same_value(old, new, a, b, ops, old_d, new_d):
        return Relation(Kind.SAME, f"both about {key!r}, same value", _adds_nothing(a, b, old_d, new_d))
    return Relation(Kind.UPDATE, f"both about {key!r}, another value")


def _different_subjects(old: Gist, new: Gist) -> bool:
    if old.relations != new.relations:
        if old.relations and new.relations:
            return True
        named, other = (old, new) if old.relations else (new, old)
        return not (named.names and _named(named.names, other.all_words))
    if old.names and new.names and not _named(old.names, new.names):
        # "Julia lives in Berlin" / "Nora lives in Leeds": unless one names the other's subject
        return not (_named(old.names, new.all_words) or _named(new.names, old.all_words))
    return False


def _named(names: frozenset[str], words: frozenset[str]) -> bool:
    """Does ``words`` hold one of ``names``, also as a possessive without apostrophe ("Anjas")?"""
    return not _name_forms(names).isdisjoint(words)


@lru_cache(maxsize=1 << 14)  # a fact's names meet many other facts' words: one set test each
def _name_forms(names: frozenset[str]) -> frozenset[str]:
    """Each of ``names`` as ``_named`` finds it: as it is, with an ``s``, or without its ``s``."""
    return frozenset(form for n in names for form in (n, f"{n}s", *((n[:-1],) if n.endswith("s") else ())))


def _alignment(old: Gist, new: Gist) -> tuple[list[str], list[str], list[Opcode], set[str], set[str]]:
    a, b, old_d, new_d = _aligned_words(old, new)
    return a, b, opcodes(a, b), old_d, new_d


def _aligned_words(old: Gist, new: Gist) -> tuple[list[str], list[str], set[str], set[str]]:
    # Who a fact is about is not what it says: "Nora" opens most of Nora's facts. A word one
    # fact opens with and the other writes in lower case is a noun ("Gym sessions" / "gym").
    subject = (old.name_words - new.plain) | (new.name_words - old.plain)
    if subject:
        a, b = _aligned(
            [w for w in old.words if w not in subject], [w for w in new.words if w not in subject]
        )
    else:
        a, b = _aligned(old.words, new.words)
    old_d, new_d = _aligned_set(old.distinctive, new.distinctive)
    return a, b, old_d, new_d


def _compare(old: Gist, new: Gist) -> Relation:
    # What needs no alignment is asked first, and the word alignment (difflib) only of pairs
    # that share an attribute: most pairs a recall compares end before it.
    single = {g.concept for g in (old, new) if g.concept and not g.multi}
    if len(single) > 1:
        return DISTINCT  # "lives in Glasgow" is not an update of "works as an analyst"
    same_concept = bool(old.concept) and old.concept == new.concept
    if same_concept and old.qualifier and new.qualifier and old.qualifier != new.qualifier:
        return DISTINCT  # "work email" / "personal email"
    a, b, old_d, new_d = _aligned_words(old, new)
    values = old_d | new_d
    if same_concept:
        why = f"both about {old.concept}"
        if _same_value(old, new, a, b, opcodes(a, b), old_d, new_d):
            return Relation(Kind.SAME, f"{why}, same value", _adds_nothing(a, b, old_d, new_d))
        if not old.multi:
            return Relation(Kind.UPDATE, f"{why}, another value")
        # "plays in the team Los Tigres" / "plays in the team Atlético": more than the verb is shared
    shared = set(a) & set(b)
    if not any(map(_attribute_word, shared)) or not _covered(a, b, shared, old_d, new_d):
        return DISTINCT
    ops = opcodes(a, b)
    regions = _replaced_regions(ops, a, b, values)
    if regions > 1:
        return DISTINCT
    attribute = [w for w in dict.fromkeys(a) if w in shared and _attribute_word(w)]
    why = f"both about {' '.join(w.strip('<>') for w in attribute)}"
    if _same_value(old, new, a, b, ops, old_d, new_d):
        return Relation(Kind.SAME, f"{why}, same value", _adds_nothing(a, b, old_d, new_d))
    conflict = bool(old_d - new_d) and bool(new_d - old_d)
    if regions == 0 and not conflict and (old.negated == new.negated or _each_adds(a, b)):
        return DISTINCT  # each only adds its own detail: two facts
    return Relation(Kind.UPDATE, f"{why}, another value")


def _each_adds(a: list[str], b: list[str]) -> bool:
    plain_a = {w for w in a if not _multi_anchor(w)}
    plain_b = {w for w in b if not _multi_anchor(w)}
    return bool(plain_a - plain_b) and bool(plain_b - plain_a)


def _covered(a: list[str], b: list[str], shared: set[str], old_d: set[str], new_d: set[str]) -> bool:
    """The shared words are at least half of what each fact says, its own values aside."""
    for words, own in ((a, old_d - new_d), (b, new_d - old_d)):
        said = {w for w in words if not _multi_anchor(w)} - own
        if said and len(said & shared) / len(said) < MIN_SHARED:
            return False
    return True


def _same_value(
    old: Gist, new: Gist, a: list[str], b: list[str], ops: list[Opcode], old_d: set[str], new_d: set[str]
) -> bool:
    """Nothing value-like differs, and either only one of them adds detail or the only
    differences are wording around equal values."""
    if old.negated != new.negated or (old_d - new_d and new_d - old_d):
        return False
    replaced = [(a[i1:i2], b[j1:j2]) for tag, i1, i2, j1, j2 in ops if tag == "replace"]
    values = old_d | new_d
    if replaced:
        return bool(old_d) and old_d == new_d and not any((set(x) | set(y)) & values for x, y in replaced)
    plain_a = {w for w in a if not _multi_anchor(w)}
    plain_b = {w for w in b if not _multi_anchor(w)}
    return plain_a <= plain_b or plain_b <= plain_a or (bool(old_d) and old_d == new_d)


def _adds_nothing(a: list[str], b: list[str], old_d: set[str], new_d: set[str]) -> bool:
    return {w for w in b if not _multi_anchor(w)} <= set(a) and new_d <= old_d


@lru_cache(maxsize=1 << 14)  # asked of every word of every pair a recall compares
def _multi_anchor(word: str) -> bool:
    return word.startswith("<") and BY_NAME[word[1:-1].split(":")[0]].multi


@lru_cache(maxsize=1 << 14)
def _attribute_word(word: str) -> bool:
    """A shared word that says what the facts are about: not a number or a date, not a
    multi-valued concept ("likes", "speaks"), which many different facts share."""
    if word.startswith("<"):
        return not _multi_anchor(word)
    return not any(c.isdigit() for c in word) and word not in WEEKDAYS_AND_MONTHS


def _replaced_regions(ops: list[Opcode], a: list[str], b: list[str], value_words: set[str]) -> int:
    """Places where both facts say something different; value parts separated only by
    shared value words ("14 Elm Grove, Bristol BS6 5TJ") count once."""
    regions = 0
    joinable = False
    for tag, i1, i2, j1, j2 in ops:
        if tag == "replace":
            is_value = bool(set(a[i1:i2]) & value_words or set(b[j1:j2]) & value_words)
            if not (joinable and is_value):
                regions += 1
            joinable = is_value
        elif tag == "equal":
            joinable = joinable and all(w in value_words for w in a[i1:i2])
    return regions


def _aligned(old: Sequence[str], new: Sequence[str]) -> tuple[list[str], list[str]]:
    """Both word lists with each new word spelt as the old word it matches (inflection,
    compound: "allerg"/"allergi", "handball"/"handballverein")."""
    return list(old), _matched(new, tuple(old))


def _aligned_set(old: frozenset[str], new: frozenset[str]) -> tuple[set[str], set[str]]:
    if new <= old:  # each word is one of the old ones already (most pairs: none on either side)
        return set(old), set(new)
    return set(old), set(_matched(new, tuple(sorted(old))))


def _matched(words: Sequence[str] | frozenset[str], known: Sequence[str]) -> list[str]:
    """``_match`` of each of ``words`` against ``known`` (in order; repeats change nothing); a
    short word (under ``PREFIX_CHARS``, not Chinese or Japanese) can only match a Chinese or
    Japanese word, so without one it stays as it is. Without Chinese or Japanese words on either
    side only a shared prefix can match, so a word is compared with the known words that start
    with its first ``PREFIX_CHARS`` letters alone.

    A fact meets many others in a recall: what each side's words allow is kept per word list
    (``_known_words``, ``_spellable``), so a pair only looks up the words that may match."""
    known = known if isinstance(known, tuple) else tuple(known)
    present, prefixes, cjk_known = _known_words(known)
    if cjk_known:
        ordered = list(dict.fromkeys(known))
        return [w if w in present else _match(w, ordered) for w in words]
    by_prefix, cjk = _spellable(words if isinstance(words, frozenset) else tuple(words))
    spelt = {}
    # only the prefixes both sides have can match (a set intersection in C, usually one or two)
    for prefix in by_prefix.keys() & prefixes.keys():
        for w in by_prefix[prefix]:
            if w not in present:
                spelt[w] = _match(w, prefixes[prefix])
    for w in cjk:
        if w not in present:
            spelt[w] = _match(w, list(dict.fromkeys(known)))
    if not spelt:
        return list(words)
    return [spelt.get(w, w) for w in words]


@lru_cache(maxsize=1 << 13)
def _known_words(known: tuple[str, ...]) -> tuple[frozenset[str], dict[str, list[str]], bool]:
    """``known`` as a set, by prefix (``_by_prefix``), and whether any of it is CJK."""
    ordered = list(dict.fromkeys(known))
    cjk = bool(ordered) and max(ordered)[:1] >= _CJK_FIRST  # the greatest first letter: is any CJK?
    return frozenset(ordered), _by_prefix(ordered), cjk


@lru_cache(maxsize=1 << 13)
def _spellable(words: tuple[str, ...] | frozenset[str]) -> tuple[dict[str, list[str]], tuple[str, ...]]:
    """The words of ``words`` that another spelling may match: not an anchor (which matches only
    itself), and long enough or Chinese or Japanese; the long ones by their first
    ``PREFIX_CHARS`` letters (once each), the Chinese or Japanese ones apart."""
    kept = [w for w in dict.fromkeys(words) if w[:1] != "<" and (len(w) >= PREFIX_CHARS or _cjk(w))]
    by_prefix: dict[str, list[str]] = {}
    for w in kept:
        if not _cjk(w):
            by_prefix.setdefault(w[:PREFIX_CHARS], []).append(w)
    return by_prefix, tuple(w for w in kept if _cjk(w))


def _by_prefix(known: Sequence[str]) -> dict[str, list[str]]:
    """The known words long enough to match by prefix, by their first ``PREFIX_CHARS``
    letters, in their order."""
    out: dict[str, list[str]] = {}
    for word in known:
        if len(word) >= PREFIX_CHARS:
            out.setdefault(word[:PREFIX_CHARS], []).append(word)
    return out


def _match(word: str, known: Sequence[str]) -> str:
    if word in known or word.startswith("<"):
        return word
    for candidate in known:
        if candidate.startswith("<"):
            continue
        short, long = (candidate, word) if len(candidate) <= len(word) else (word, candidate)
        if len(short) >= PREFIX_CHARS and long.startswith(short):
            return candidate
        if _cjk(short) and short in long:
            return candidate
    return word


_CJK_FIRST = "\u3040"  # the first Japanese character; Chinese ones come after


def _cjk(word: str) -> bool:
    return bool(word) and ord(word[0]) >= 0x3040
