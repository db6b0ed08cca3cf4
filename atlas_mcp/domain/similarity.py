"""Cosines of different embedding models on one scale: MiniLM's, on which relevance was fitted.

Where a model's query-memory cosines of *unrelated* pairs sit is its background, as (mean,
spread): measured on MADial-Bench's English dev pairs, MiniLM 0.105 ± 0.091 (gold pairs 0.234),
e5 0.754 ± 0.027 (gold 0.785). Cosines of two models are put on MiniLM's scale by matching
their backgrounds, so they rank in one list and feed one z-score; relevance calibration
(``calibration.py``, fitted on MiniLM) also reads a crowded model's cosines stretched away
from the query's own background (``for_relevance``). An engine whose cosines come from one
model on MiniLM's scale uses none of this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

Background = tuple[float, float]  # (mean, spread) of a model's cosines of unrelated pairs
REFERENCE_BACKGROUND: Background = (0.105, 0.091)  # MiniLM's: the scale every cosine is put on
# How many rows a model's measured background counts for against the rows of one recall that
# spans two spaces: a space holding few of the rows leans on the measurement (chosen on a
# bilingual MADial store: docs/performance.md, "Constants measured").
BACKGROUND_PRIOR_ROWS = 5


def on_reference_scale(cosines: np.ndarray | float, background: Background) -> np.ndarray:
    """Cosines whose unrelated pairs sit at ``background`` (mean, spread), on MiniLM's scale."""
    mean, spread = background
    reference_mean, reference_spread = REFERENCE_BACKGROUND
    return (reference_mean + reference_spread * (np.asarray(cosines) - mean) / spread).astype(np.float32)


def on_one_scale(
    cosines: Sequence[np.ndarray], spaces: Sequence[np.ndarray], backgrounds: Mapping[int, Background]
) -> list[np.ndarray]:
    """Every row's cosine on MiniLM's scale, per owner.

    ``cosines[i]``: owner ``i``'s rows' cosines with the query; ``spaces[i]``: per row, the
    code of the space its cosine was measured in (-1: not measured); ``backgrounds``: the
    measured background of each space the query was embedded in.

    A recall in one space maps it by the model's measured background (MiniLM: unchanged, so
    English-only recall is exactly what it was). A recall spanning two spaces standardises
    each against this query's own cosines over that space's rows, shrunk towards the measured
    background: e5's unrelated pairs sit near 0.75 for English but 0.85 for Chinese, so one
    fixed mapping would rank every Chinese memory above every English one for a Chinese question.
    """
    if len(backgrounds) == 1:
        ((_, background),) = backgrounds.items()
        if background == REFERENCE_BACKGROUND:
            return list(cosines)
        return [on_reference_scale(c, background) for c in cosines]
    out = [c.copy() for c in cosines]
    for code, (prior_mean, prior_spread) in backgrounds.items():
        rows = [owner_spaces == code for owner_spaces in spaces]
        pooled = np.concatenate([c[mine] for c, mine in zip(cosines, rows, strict=True)]).astype(np.float64)
        weight = len(pooled) + BACKGROUND_PRIOR_ROWS
        mean = (pooled.sum() + BACKGROUND_PRIOR_ROWS * prior_mean) / weight
        spread = np.sqrt((((pooled - mean) ** 2).sum() + BACKGROUND_PRIOR_ROWS * prior_spread**2) / weight)
        for target, c, mine in zip(out, cosines, rows, strict=True):
            target[mine] = on_reference_scale(c[mine], (mean, float(spread)))
    return out


def query_backgrounds(
    scores: Sequence[np.ndarray], spaces: Sequence[np.ndarray], codes: Iterable[int]
) -> dict[int, float]:
    """Per space of ``codes``, the mean on-scale cosine of this query with the rows measured
    in it (``spaces`` as ``on_one_scale`` takes them), shrunk towards the reference background
    (a few rows say little): where its unrelated pairs sit for this query."""
    out = {}
    for code in codes:
        pooled = np.concatenate(
            [s[owner_spaces == code] for s, owner_spaces in zip(scores, spaces, strict=True)]
        ).astype(np.float64)
        prior = REFERENCE_BACKGROUND[0] * BACKGROUND_PRIOR_ROWS
        out[code] = float((pooled.sum() + prior) / (len(pooled) + BACKGROUND_PRIOR_ROWS))
    return out


def for_relevance(similarity: float, stretch: float, background: float) -> float:
    """A cosine on MiniLM's scale as relevance calibration (fitted on MiniLM) reads it: a model
    that crowds related pairs towards the background gets them stretched away from it. The
    background is this query's (its rows' mean cosine): e5's unrelated pairs sit higher in
    Chinese than in English, and a fixed one would have stretched that offset too."""
    return REFERENCE_BACKGROUND[0] + stretch * (similarity - background)


def relevance_cosine(cosine: float | None, stretch: float, background: float | None) -> float | None:
    """``for_relevance`` where it applies; None where relevance reads the cosine as it is (a
    model that does not crowd, ``stretch`` 1: MiniLM's rows)."""
    if cosine is None or stretch == 1.0 or background is None:
        return None
    return for_relevance(cosine, stretch, background)
