"""Does a fact set what the question asks about? A question and its answer often share no word
and only a weak cosine ("What's my husband called?" / "My husband is Daniel; he teaches
chemistry", MiniLM 0.26, against 0.41 for "Prefers to be called by first name at work"), but
both name the same attribute of the same person: ``domain.gist`` reads it from either (where
someone lives, their job, partner, car, dentist ...; the vocabulary of ``domain.attributes``,
in the languages recall analyses; a question by ``gist.asked_concept``, since it names the
attribute but not its value) and who it is about (the user, or a relative, friend or pet).

A question's words do not always name the attribute ("What do I do for a living?", "Where do I
live now?"): its *meaning* is read too, as the sentence embedding of the question against a few
plain questions per attribute (``PROTOTYPES``, embedded once by the same model). The nearest
attribute counts when its cosine reaches ``meaning_threshold`` and leads the next by
``meaning_margin`` (``meaning_of``). When the meaning agrees with the words, or says what the
words did not, the reading is sure: the facts that set the attribute are lifted to the top of
the pool (``Asked.sure``), not only given a bonus. Only English questions are read this way (the
prototypes are English and MiniLM's); attributes that are identifiers (a phone number, an
address) are asked for with their own words and are never read from meaning alone ("What's my
passport number?" is near "What is my telephone number?" and asks for something else). A
question in another language has only its words to go by, and for a fact in another language
than its own they are as sure (``Asked.across``): "¿Dónde vivo ahora?" finds "I live in Leeds",
which neither MiniLM nor BM25 relates to it.

Only facts are read: an event or a transcript turn is not written to set an attribute. Only the
best ``DEPTH`` candidates are read (``SURE_DEPTH`` for a fact across languages), so a recall reads the gist
of at most that many facts (each gist is cached; a fact read for the first time costs ~0.3 ms).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .gist import Gist, asked_cue, gist, question_subject, question_tokens
from .lexical import detect_language
from .model import Memory, MemoryType

DEPTH = 30  # candidates (best first) whose facts are read
# A question in another language reads deeper for facts in another language than its own: an
# English fact sits anywhere in a Spanish question's pool.
SURE_DEPTH = 200

# Plain questions per attribute, in the user's voice: what the meaning of a question is compared
# with. Written for the vocabulary's concepts, not taken from any evaluation suite.
PROTOTYPES: dict[str, tuple[str, ...]] = {
    "residence": ("In which town or city is my home?", "Where am I living at the moment?", "Where is my place of residence?"),
    "address": ("What is my street address?", "What is my postal address?"),
    "job": ("What is my job?", "What is my occupation?", "What work do I do?", "Which company am I employed by?"),
    "partner": ("Who is my significant other?", "Who am I married to?", "Who is my boyfriend or girlfriend?"),
    "manager": ("Who is my line manager?", "Who is my boss at work?"),
    "dentist": ("Which dentist do I see?",),
    "doctor": ("Which doctor do I see?", "Who is my family doctor?"),
    "therapist": ("Which therapist do I see?",),
    "physio": ("Which physiotherapist do I see?",),
    "vet": ("Which veterinarian treats our animals?",),
    "hairdresser": ("Which hairdresser or barber do I go to?",),
    "landlord": ("Who do I rent my home from?",),
    "school": ("Which school does my child attend?",),
    "birthday": ("What is my date of birth?", "On which day is my birthday?"),
    "diet": ("What diet do I follow?", "Am I vegetarian or vegan?"),
    "bank": ("Which bank do I use?",),
    "car": ("What is my car?", "Which car do I own?"),
    "phone": ("Which smartphone do I use?", "What model is my mobile phone?"),
    "laptop": ("Which laptop do I use?",),
    "commute": ("How do I travel to the office?", "What is my commute?"),
    "phone number": ("What is my telephone number?",),
    "email": ("What is my email address?",),
    "mobile plan": ("Which mobile network is my contract with?",),
    "allergy": ("What am I allergic to?", "Do I have any allergies?"),
    "language": ("Which languages do I speak?",),
}  # fmt: skip
PROTOTYPE_TEXTS: tuple[str, ...] = tuple(text for texts in PROTOTYPES.values() for text in texts)
_CONCEPTS = tuple(PROTOTYPES)
# Where each attribute's prototypes start in PROTOTYPE_TEXTS (each has one or more, in a run)
_FIRST_PROTOTYPES = np.cumsum([0] + [len(texts) for texts in PROTOTYPES.values()][:-1])
# Identifiers and accounts: a question asks for them by name; from meaning alone, "my passport
# number" reads as "my telephone number".
NAMED_ONLY = frozenset({"phone number", "email", "address", "mobile plan", "bank"})


@dataclass(frozen=True, slots=True)
class Asked:
    """What a question asks about: an attribute of someone (the user unless ``relations``)."""

    concept: str
    relations: frozenset[str]
    names: frozenset[str]  # the people the question names ("What is Rohan's job?")
    sure: bool  # its meaning reads the same attribute, or reads what its words did not
    by_words: bool  # its words name the attribute
    language: str = "en"

    def across(self, fact: Gist) -> bool:
        """Is ``fact`` in another language than this question, read by its words alone? Then
        words are all that relate the two (MiniLM and BM25 do not), and the reading is as sure
        as one its meaning confirms."""
        return not self.sure and self.language != "en" and fact.language != self.language


def meaning_of(likeness: Sequence[float] | np.ndarray | None, threshold: float, margin: float) -> str | None:
    """The attribute nearest in meaning, from the question's cosine with each of
    ``PROTOTYPE_TEXTS`` (in order): the best prototype of each attribute counts, and the
    nearest attribute must reach ``threshold`` and lead the next by ``margin``."""
    if likeness is None or len(likeness) != len(PROTOTYPE_TEXTS):
        return None
    cosines = np.asarray(likeness, dtype=np.float64)
    best = np.maximum.reduceat(cosines, _FIRST_PROTOTYPES)  # per attribute, its best prototype
    first, second = np.argsort(-best)[:2]
    if best[first] < threshold or best[first] - best[second] < margin:
        return None
    return _CONCEPTS[int(first)]


def reads_meaning(query: str) -> bool:
    """Is ``query`` one whose meaning ``meaning_of`` can read (an English question)?"""
    return detect_language(query) == "en"


@lru_cache(maxsize=1 << 12)
def asked(query: str, meaning: str | None = None) -> Asked | None:
    """What ``query`` asks about, from its words and (``meaning``: ``meaning_of``) its meaning."""
    by_words, whole = asked_cue(query)
    if by_words is None and meaning in NAMED_ONLY:
        meaning = None
    if not whole and meaning not in (None, by_words) and meaning not in NAMED_ONLY:
        by_words = None  # a cue's first word alone yields to a clear meaning ("for a living")
    concept = by_words or meaning
    if concept is None:
        return None
    language = detect_language(query)
    # The people it names: capitalised words inside it, but in German (where every noun is
    # capitalised) only the names the fact reader finds ("In welche Schule geht Lenas Sohn?").
    relations, named = question_subject(query)
    names = (
        named
        if language == "de"
        else frozenset(
            t.word for t in question_tokens(query, language) if t.name and not t.initial and t.word != "i"
        )
    )
    sure = meaning is not None and meaning == concept
    return Asked(concept, relations, names, sure, by_words is not None, language)


def setting_what_is_asked(
    query: str, memories: Sequence[Memory], best_first: Iterable[int], meaning: str | None = None
) -> list[int]:
    """Indices, among the first ``DEPTH`` of ``best_first``, of the facts that set the attribute
    ``query`` asks about, for the same person."""
    question = asked(query, meaning)
    return [] if question is None else setting(question, memories, best_first)


def setting(question: Asked, memories: Sequence[Memory], best_first: Iterable[int]) -> list[int]:
    """``setting_what_is_asked`` for a question already read; a sure reading also asks that a
    fact names everyone the question names ("What is Rohan's job?" is not the user's job)."""
    out = []
    depth = DEPTH if question.language == "en" else SURE_DEPTH
    for position, i in enumerate(best_first):
        if position >= depth:
            break
        memory = memories[i]
        if memory.memory_type is MemoryType.SEMANTIC:
            fact = gist(memory.text)
            if fact.concept == question.concept and fact.relations == question.relations:
                across = question.across(fact)
                if position >= DEPTH and not across:
                    continue
                if (question.sure or across) and not question.names <= fact.all_words:
                    continue
                out.append(i)
    return out
