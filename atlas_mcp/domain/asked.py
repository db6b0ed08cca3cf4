"""Does a fact set what the question asks about? A question and its answer often share no word
and only a weak cosine ("What's my husband called?" / "My husband is Daniel; he teaches
chemistry", MiniLM 0.26, against 0.41 for "Prefers to be called by first name at work"), but
both name the same attribute of the same person: ``domain.gist`` reads it from either (where
someone lives, their job, partner, car, dentist ...; the vocabulary of ``domain.attributes``,
in the languages recall analyses; a question by ``gist.asked_concept``, since it names the
attribute but not its value) and who it is about (the user, or a relative, friend or pet).

Only facts are read: an event or a transcript turn is not written to set an attribute. Only the
best ``DEPTH`` candidates are read, so a recall reads the gist of at most that many facts (each
gist is cached; a fact read for the first time costs ~0.3 ms).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .gist import asked_concept, gist
from .model import Memory, MemoryType

DEPTH = 30  # candidates (best first) whose facts are read


def setting_what_is_asked(query: str, memories: Sequence[Memory], best_first: Iterable[int]) -> list[int]:
    """Indices, among the first ``DEPTH`` of ``best_first``, of the facts that set the attribute
    ``query`` asks about, for the same person."""
    concept = asked_concept(query)
    if concept is None:
        return []
    relations = gist(query).relations
    out = []
    for position, i in enumerate(best_first):
        if position >= DEPTH:
            break
        memory = memories[i]
        if memory.memory_type is MemoryType.SEMANTIC:
            fact = gist(memory.text)
            if fact.concept == concept and fact.relations == relations:
                out.append(i)
    return out
