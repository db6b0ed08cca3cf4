"""The gist of a fact: who it is about, which attribute it sets, and the words of its value.

``gist(text)`` reads one fact with the vocabulary of ``domain.attributes``:

- **subject**: the relatives, friends and pets it is about ("Nora's sister Claire" → sister,
  claire), and the names that open it ("Biscuit's vet", "Arjun started at ..."); a fact with
  neither is about the user;
- **concept**: the attribute its first clause sets (residence, job, car ...), if the
  vocabulary knows it;
- **words**: its content words, stemmed, in order, without the subject, the change words
  ("now", "switched to") and light words ("has", "class"); a concept's cue is one anchor word
  (``<residence>``), so "lives in" and "moved to" align;
- **distinctive**: numbers, proper names, weekdays and months, katakana words: the kind of
  token a value is made of.

A trailing denial ("..., not 12 March", "instead of tea") names the value being replaced and
is left out. Pure and cached: recall reads the gist of the same facts again and again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .attributes import (
    CHANGE_WORDS,
    CONCEPTS,
    LIGHT_WORDS,
    NEGATIONS,
    POSSESSIVES,
    TITLES,
    USER_WORDS,
    WEEKDAYS_AND_MONTHS,
    Concept,
)
from .lexical import SNOWBALL, _stem, cjk_words, detect_language, has_cjk
from .stopwords import CJK_STOP_CHARACTERS, STOP_WORDS
from .subjects import naming, subject_of
from .wording import Token, has_digit, tokens_of
from .wording import is_name as _is_name

BY_NAME: dict[str, Concept] = {c.name: c for c in CONCEPTS}
_DENIAL = re.compile(
    r"[,;(]\s*(?:(?:and|but)\s+)?(?:not|nicht|pas|no|non|instead of|statt|anstatt|en lugar de|en vez de|au lieu de)\b[^,;.)]*",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"[;:—–]|\.\s|,\s(?:and|but|aber|pero|mais)\s")
_CJK_UNIT = re.compile(r"[\u30a0-\u30ff\u31f0-\u31ffー]{2,}|[\u4e00-\u9fff]|[A-Za-z0-9]+")
_KATAKANA = re.compile(r"[\u30a0-\u30ff\u31f0-\u31ffー]{2,}")


@dataclass(frozen=True, slots=True)
class Gist:
    language: str
    relations: frozenset[str]  # canonical relations the fact is about (sister, dog ...)
    names: frozenset[str]  # the names of those relatives, or the names that open the fact
    concept: str | None  # the attribute the first clause sets
    qualifier: str | None  # the plain word right before the concept ("work" email, "family" doctor)
    words: tuple[str, ...]  # content words in order, concept cues as one anchor
    distinctive: frozenset[str]  # value-like tokens
    negated: bool
    all_words: frozenset[str]  # every lower-cased word and CJK bigram, for name look-ups
    name_words: frozenset[str] = frozenset()  # ``words`` entries that are the names of ``names``
    plain: frozenset[str] = frozenset()  # ``words`` entries written in lower case

    @property
    def multi(self) -> bool:
        return self.concept is not None and BY_NAME[self.concept].multi


@lru_cache(maxsize=1 << 15)
def gist(text: str, language: str | None = None) -> Gist:
    """``text`` read in ``language`` (default: the one detected from the text alone)."""
    language = language or detect_language(text)
    stem_language = language if language in SNOWBALL else "en"
    stop = STOP_WORDS.get(stem_language, frozenset())
    kept = _DENIAL.sub("", text)
    tokens = tokens_of(kept, language)
    concept, cue_spans = _concept_and_cues(tokens, kept)
    cue_tokens = {i for start, end, _ in cue_spans for i in range(start, end)}
    relations, names, skipped = subject_of(tokens, kept, cue_tokens)
    words, distinctive, negated = _content(tokens, kept, stop, stem_language, skipped, cue_spans, names)
    all_words = frozenset(t.word for t in tokens) | frozenset(cjk_words(kept))
    qualifier = _qualifier(tokens, cue_spans, concept, stop)
    normal = {t.word: _normal(stem_language, t.word) for t in tokens}
    name_words = frozenset(normal[n] for n in names if n in normal)
    plain = frozenset(normal[t.word] for t in tokens if not t.text[:1].isupper())
    return Gist(
        language, relations, names, concept, qualifier, tuple(words), distinctive, negated, all_words,
        name_words, plain,
    )  # fmt: skip


def _concept_and_cues(tokens: list[Token], kept: str) -> tuple[str | None, list[tuple[int, int, str]]]:
    """The concept ``tokens`` name (a naming, "is called X", if no other), and where its cues are."""
    concept, cue_spans = _concept(tokens, kept)
    if concept is None and (naming_at := naming(tokens)) is not None:
        concept, cue_spans = "name", [*cue_spans, (naming_at, naming_at + 1, "name")]
    return concept, cue_spans


def concept_of(text: str) -> str | None:
    """``gist(text).concept`` without the rest of the gist (its subject, its content words and
    their stems): every query is asked what it names (``asked_cue``), and ~70% name nothing, so
    their full gist (~0.1-0.3 ms a new query) is not read."""
    kept = _DENIAL.sub("", text)
    return _concept_and_cues(list(question_tokens(kept, detect_language(text))), kept)[0]


@lru_cache(maxsize=1 << 8)
def question_subject(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """``gist(text)``'s relations and names without the rest of the gist (its content words
    and their stems, ~0.1 ms a new question): what a question naming an attribute is asked of
    whom (``asked.asked``)."""
    kept = _DENIAL.sub("", text)
    tokens = list(question_tokens(kept, detect_language(text)))
    _, cue_spans = _concept_and_cues(tokens, kept)
    cue_tokens = {i for start, end, _ in cue_spans for i in range(start, end)}
    relations, names, _ = subject_of(tokens, kept, cue_tokens)
    return relations, names


@lru_cache(maxsize=1 << 8)
def question_tokens(question: str, language: str) -> tuple[Token, ...]:
    """``tokens_of`` a question, kept: one recall reads its question's tokens up to three times
    (``concept_of``, ``asked_cue``, ``asked.asked``' names), ~20 us each."""
    return tuple(tokens_of(question, language))


@lru_cache(maxsize=1 << 16)  # a fact's words recur across facts (stemming is cached too)
def _normal(language: str, word: str) -> str:
    """A word as ``words`` holds it: numbers as written, other words stemmed."""
    return word if has_digit(word) else _stem(language, word)


def _qualifier(
    tokens: list[Token], cue_spans: list[tuple[int, int, str]], concept: str | None, stop: frozenset[str]
) -> str | None:
    start = next((start for start, _, name in cue_spans if name == concept), None)
    if start is None:
        return None
    for token in reversed(tokens[:start]):
        if token.word in CHANGE_WORDS:
            continue
        plain = not token.name and token.word not in stop and token.word not in POSSESSIVES
        return token.word if plain and not has_digit(token.word) else None
    return None


def _concept(tokens: list[Token], text: str) -> tuple[str | None, list[tuple[int, int, str]]]:
    """The first clause's concept, and every concept cue's token span [start, end) with its name."""
    spans: list[tuple[int, int, str]] = []
    if has_cjk(text):
        for concept in CONCEPTS:
            for cue in concept.cjk:
                at = text.find(cue)
                if at >= 0:
                    spans.append((at, at + len(cue), concept.name))
        spans.sort()
        return (spans[0][2] if spans else None), []
    taken: set[int] = set()
    for _, start, end, concept in sorted(_cue_hits(tokens)):
        if not taken.intersection(range(start, end)):
            spans.append((start, end, concept.name))
            taken.update(range(start, end))
    spans.sort()
    first_clause_end = _first_clause_end(tokens, text)
    primary = next((name for start, _, name in spans if start < first_clause_end), None)
    return primary, spans


def _first_clause_end(tokens: list[Token], text: str) -> int:
    """Token index where the first clause that says something ends ("Correction: ..." skips on)."""
    for match in _CLAUSE.finditer(text):
        before = [t for t in tokens if t.start < match.start()]
        if any(t.word not in CHANGE_WORDS and not _is_name(t) for t in before):
            return len(before)
    return len(tokens)


@dataclass(frozen=True, slots=True)
class _Cue:
    order: tuple[int, int]  # the concept's place in CONCEPTS, the cue's in the concept
    concept: Concept
    slots: tuple[tuple[frozenset[str], tuple[str, ...]], ...]  # per slot: words, prefixes


PREFIX_KEY = 4  # cue prefixes ("zahnarzt*") are found by their first four letters


def _compiled() -> tuple[dict[str, list[_Cue]], dict[str, list[tuple[str, _Cue]]]]:
    """Every cue, found by its first word (or the prefix of it): a fact's words are looked up,
    not matched against every cue of every concept."""
    exact: dict[str, list[_Cue]] = {}
    prefixed: dict[str, list[tuple[str, _Cue]]] = {}
    for c, concept in enumerate(CONCEPTS):
        for k, cue in enumerate(concept.cues):
            slots = tuple(
                (frozenset(a for a in slot.split("|") if not a.endswith("*")),
                 tuple(a[:-1] for a in slot.split("|") if a.endswith("*")))
                for slot in cue.split()
            )  # fmt: skip
            compiled = _Cue((c, k), concept, slots)
            for word in slots[0][0]:
                exact.setdefault(word, []).append(compiled)
            for prefix in slots[0][1]:
                prefixed.setdefault(prefix[:PREFIX_KEY], []).append((prefix, compiled))
    return exact, prefixed


_BY_FIRST_WORD, _BY_FIRST_PREFIX = _compiled()


def _cues_at(word: str) -> list[_Cue]:
    """The cues whose first word this is: by the whole word, or by a prefix it starts with."""
    cues = _BY_FIRST_WORD.get(word, [])
    near = _BY_FIRST_PREFIX.get(word[:PREFIX_KEY])
    if near:
        cues = cues + [cue for prefix, cue in near if word.startswith(prefix)]
    return cues


def _cue_hits(tokens: list[Token]) -> list[tuple[tuple[int, int], int, int, Concept]]:
    """Every cue match as (precedence, start, end, concept); change words may come between a
    cue's words ("works now at")."""
    hits = []
    for i, token in enumerate(tokens):
        for cue in _cues_at(token.word):
            end = _rest_matches(tokens, i + 1, cue.slots[1:])
            concept = cue.concept
            if end is None:
                continue
            if (not concept.place or _place_follows(tokens, i, end)) and (
                not concept.person or _person_follows(tokens, i, end)
            ):
                hits.append((cue.order, i, end, concept))
    return hits


def _rest_matches(
    tokens: list[Token], end: int, slots: tuple[tuple[frozenset[str], tuple[str, ...]], ...]
) -> int | None:
    for words, prefixes in slots:
        while end < len(tokens) and tokens[end].word in CHANGE_WORDS:
            end += 1
        if end >= len(tokens):
            return None
        word = tokens[end].word
        if word not in words and not any(word.startswith(p) for p in prefixes):
            return None
        end += 1
    return end


def _place_follows(tokens: list[Token], start: int, end: int) -> bool:
    """A place comes within four words after a residence cue ("moved to Glasgow", "mudou-se
    para o Porto"; "ist nach Hamburg gezogen" names it before), never a weekday or a month."""
    window = tokens[max(0, start - 3) : start] + tokens[end : end + 4]
    return any(_is_name(t) and t.word not in WEEKDAYS_AND_MONTHS and not t.initial for t in window)


def _person_follows(tokens: list[Token], start: int, end: int) -> bool:
    """Someone is named within six words of a role ("the vet is Dr. Osei", "bei Dr. Weber,
    meinem Hausarzt"); the role itself ("GP") is not a name."""
    window = tokens[max(0, start - 6) : start] + tokens[end : end + 6]
    return any(
        t.word in TITLES or (_is_name(t) and t.word not in WEEKDAYS_AND_MONTHS and not t.initial)
        for t in window
    )


def _content(
    tokens: list[Token],
    text: str,
    stop: frozenset[str],
    language: str,
    skipped: set[int],
    cue_spans: list[tuple[int, int, str]],
    names: frozenset[str],
) -> tuple[list[str], frozenset[str], bool]:
    if has_cjk(text):
        return _cjk_content(text, names)
    anchors = {
        start: f"{name}:{'-'.join(tokens[i].word for i in range(start, end))}"
        if BY_NAME[name].value_cue
        else name
        for start, end, name in cue_spans
    }
    inside = {i for start, end, _ in cue_spans for i in range(start, end)}
    words: list[str] = []
    distinctive: set[str] = set()
    negated = False
    for i, token in enumerate(tokens):
        if i in anchors:
            words.append(f"<{anchors[i]}>")
        if i in inside or i in skipped:
            continue
        word = token.word
        if word in NEGATIONS or word.endswith("n't"):
            negated = True
            continue
        if word in TITLES or word in USER_WORDS or word in CHANGE_WORDS:
            continue
        value_like = has_digit(word) or word in WEEKDAYS_AND_MONTHS or (_is_name(token) and not token.initial)
        if word in stop and not value_like or word in LIGHT_WORDS and not value_like:
            continue
        normal = _normal(language, word)
        words.append(normal)
        if value_like:
            distinctive.add(normal)
    return words, frozenset(distinctive), negated


def _cjk_content(text: str, names: frozenset[str]) -> tuple[list[str], frozenset[str], bool]:
    """Han characters one by one (a restatement that adds 喜欢 keeps every other character),
    katakana runs whole; the subject's name left out."""
    skip = "".join(names)
    words = [w for w in _CJK_UNIT.findall(text) if w not in skip and w not in CJK_STOP_CHARACTERS]
    distinctive = frozenset(_KATAKANA.findall(text))
    negated = bool(re.search(r"ない|ません|不|没", text))
    return words, distinctive, negated


def normal_key(about: str | None) -> str | None:
    """An ``about`` key as compared: case, spacing and punctuation do not matter."""
    if about is None:
        return None
    key = " ".join(re.sub(r"[^\w\s]", " ", about.casefold()).split())
    return key or None


# Function words of every language recall analyses, and prepositions their lists lack: what may
# follow a cue's first word in a question without naming a value ("travaille *comme*").
QUESTION_GLUE = frozenset().union(*STOP_WORDS.values()) | {"comme", "chez", "presso", "near"}


def asked_concept(question: str) -> str | None:
    """The attribute a question asks about (``asked_cue``'s)."""
    return asked_cue(question)[0]


@lru_cache(maxsize=1 << 12)
def asked_cue(question: str) -> tuple[str | None, bool]:
    """The attribute a question asks about. A question names the attribute but not its value
    ("Where do I live now?", "Wo arbeite ich?", "Who is my therapist?"), so a cue counts here
    without the value it must name, and without the function words a statement puts after it
    ("lives *in*"; not "current *account*"): a whole cue first, else such a cue's first word.
    Chinese and Japanese read as in a fact. The flag says whether a whole cue named it (a
    cue's first word alone is weaker: "for a *living*")."""
    read = concept_of(question)
    if read is not None or has_cjk(question):
        return read, read is not None
    language = detect_language(question)
    glue = QUESTION_GLUE  # a short question's language is often misread ("Wo wohne ich?": en)
    tokens = list(question_tokens(question, language))
    whole, first = [], []
    for i, token in enumerate(tokens):
        for cue in _cues_at(token.word):
            if _rest_matches(tokens, i + 1, cue.slots[1:]) is not None:
                whole.append((cue.order, cue.concept.name))
            elif all(words and words <= glue and not prefixes for words, prefixes in cue.slots[1:]):
                first.append((cue.order, cue.concept.name))
    found = min(whole or first, default=None)
    return (found[1], bool(whole)) if found else (None, False)
