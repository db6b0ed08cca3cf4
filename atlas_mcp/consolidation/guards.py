"""Guards between the model's answer and the store: provenance and duplicates.

Duplicate check: the service's hybrid recall finds the user's nearest facts; a candidate is
a duplicate of a neighbour when their embedding cosine reaches a threshold calibrated for the
embedding model *and* nothing distinctive differs. The second condition exists because cosine
alone cannot tell a restatement from a contradiction: with MiniLM, "User prefers tea over
coffee" and "User prefers coffee over tea" score 0.996, "firmware 4.2.1" vs "5.0.2" 0.947.
So a neighbour is never a duplicate when the numbers/versions or names differ, or when the
words the two share appear in another order.

Calibration (``python -m atlas_mcp.consolidation.calibrate PAIRS.jsonl``): 30 paraphrase
pairs and 30 contradicting or related-but-distinct pairs (``tests/consolidation/data/
duplicate_pairs.jsonl``); the threshold is the lowest at which no distinct pair is taken
for a duplicate. For all-MiniLM-L6-v2 run with integer products that is 0.92.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..domain.lexical import analyse
from ..domain.stopwords import STOP_WORDS
from ..inference.e5 import MODEL_ID as E5_MODEL_ID
from ..inference.embedder import MINILM_MODEL_ID, PER_LANGUAGE_ID

# Lowest cosine at which, with the veto below, no distinct pair of the calibration set
# counted as a duplicate. Keyed by EngineInfo.embedding_model.
CALIBRATED_DUPLICATE_SIMILARITY: dict[str, float] = {
    # MiniLM with float products had 0.91 (5 of 30 duplicates caught); the integer-product
    # run moves one distinct pair to 0.91-0.92, so 0.92 (3 caught).
    MINILM_MODEL_ID: 0.92,
    # Engines report e5's cosines on MiniLM's scale (domain.similarity), where
    # the same calibration gives 0.84 (10 of 30 duplicates caught, against MiniLM's 5).
    E5_MODEL_ID: 0.84,
    # The calibration pairs are English, so embedded by MiniLM under per-language.
    PER_LANGUAGE_ID: 0.92,
}
# Without a calibration for the model, only near-verbatim restatements count.
UNCALIBRATED_DUPLICATE_SIMILARITY = 0.97

_WORD = re.compile(r"\d+(?:[.,:/-]\d+)*[a-z]*|[^\W\d_]+(?:['’][^\W\d_]+)?", re.UNICODE)
# Capitalised but never a name: function words, and the subject facts are written about
# ("User prefers...", "I'm vegetarian").
_NOT_NAMES = STOP_WORDS["en"] | {"user", "users", "i'm"}


def duplicate_similarity(embedding_model: str | None, configured: float | None) -> float:
    if configured is not None:
        return configured
    return CALIBRATED_DUPLICATE_SIMILARITY.get(embedding_model or "", UNCALIBRATED_DUPLICATE_SIMILARITY)


def is_duplicate(new_text: str, old_text: str, cosine: float | None, threshold: float) -> bool:
    """A repeat of ``old_text``: close enough in meaning, and nothing distinctive differs.

    An engine that reports no cosine for its candidates still catches verbatim repeats.
    """
    if cosine is None:
        return _words(new_text) == _words(old_text)
    if cosine < threshold:
        return False
    return distinctive_tokens(new_text) == distinctive_tokens(old_text) and _same_order(new_text, old_text)


def distinctive_tokens(text: str) -> frozenset[str]:
    """Numbers, versions, amounts and mid-sentence capitalised names: what a fact pins down."""
    out = set()
    for match in _WORD.finditer(text):
        word = match.group()
        if any(c.isdigit() for c in word):
            out.add(word.lower())
        elif word[0].isupper() and not _sentence_start(text, match.start()):
            name = word.lower().removesuffix("'s").removesuffix("’s")
            if name not in _NOT_NAMES:
                out.add(name)
    return frozenset(out)


def _sentence_start(text: str, position: int) -> bool:
    before = text[:position].rstrip()
    return not before or before[-1] in ".!?:;"


def _words(text: str) -> list[str]:
    return [m.group().lower() for m in _WORD.finditer(text)]


def _content_stems(text: str) -> tuple[str, ...]:
    """The stems of ``text``'s content words, in order, as the keyword index reads them."""
    return analyse(text, drop_stop_words=True).stems


def _same_order(a: str, b: str) -> bool:
    """The words both texts share appear in the same relative order ("tea over coffee")."""
    words_a, words_b = _content_stems(a), _content_stems(b)
    shared = set(words_a) & set(words_b)
    return _ordered(words_a, shared) == _ordered(words_b, shared)


def _ordered(words: Iterable[str], keep: set[str]) -> list[str]:
    return list(dict.fromkeys(w for w in words if w in keep))
