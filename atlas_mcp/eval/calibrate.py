"""Fitting calibrated relevance: the data, the logistic regression, and the floor it supports.

``atlas-mcp eval calibrate LOCOMO`` runs this. Labelled pairs come from two sources, asked
through the real service with no floor:

- the LoCoMo development split: each answerable question's top ``depth`` candidates, labelled
  1 when the turn is one of the question's evidence turns;
- the mixed suite: each question's top ``depth``, labelled 1 when the memory is one it expects;
  every candidate of a no-answer question is a 0;
- LoCoMo questions asked of another conversation (``locomo_elsewhere``): things never stored
  there, so every candidate is a 0.

The model (``domain.calibration``) is fitted by L2-regularised logistic regression (Newton's
method), each source weighted to count equally, so neither a benchmark's shape nor our own
suite decides alone. Then every candidate floor is swept: the share of no-answer questions
left empty, of answerable ones that keep their answer, on both sources.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..domain import calibration
from ..domain.calibration import FITTED, CalibrationPolicy, Features
from ..domain.ranking import Hit
from ..service import MemoryService
from .harness import ManualClock
from .locomo import ANSWERABLE, Conversation
from .locomo_run import ASKED_AFTER_LAST_SESSION, ingest
from .mixed_suite import MixedResult, ranking_features

DEPTH = 20
FLOORS = (0.0, 0.03, 0.04, 0.045, 0.05, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)
_L2 = 1e-2


@dataclass(frozen=True, slots=True)
class Question:
    """One question's candidates: features, labels, the relevance served, and whether it has an answer."""

    source: str
    features: tuple[Features, ...]
    labels: tuple[int, ...]
    relevance: tuple[float, ...]
    answerable: bool = True


def locomo_questions(
    service: MemoryService, clock: ManualClock, conversations: Sequence[Conversation]
) -> list[Question]:
    ids = {c.sample_id: ingest(service, clock, c) for c in conversations}
    out = []
    for conversation in conversations:
        clock.set(max(t.occurred_at for t in conversation.turns) + ASKED_AFTER_LAST_SESSION)
        for question in conversation.questions:
            if question.category not in ANSWERABLE:
                continue
            hits = service.recall(
                conversation.sample_id, question.text, DEPTH, min_relevance=0.0, touch=False
            )
            gold = set(question.evidence)
            labels = tuple(int(ids[conversation.sample_id].get(h.memory.id) in gold) for h in hits)
            out.append(_question("locomo", hits, labels))
    return out


def locomo_elsewhere(
    service: MemoryService, clock: ManualClock, conversations: Sequence[Conversation], per: int = 30
) -> list[Question]:
    """The first ``per`` answerable questions of each conversation asked of the next one's
    tenant (already ingested): about people and events never stored there, so nothing should
    clear the floor. Source ``locomo-elsewhere``."""
    out = []
    for number, conversation in enumerate(conversations):
        asked_of = conversations[(number + 1) % len(conversations)]
        if asked_of is conversation:
            continue
        clock.set(max(t.occurred_at for t in asked_of.turns) + ASKED_AFTER_LAST_SESSION)
        for question in [q for q in conversation.questions if q.category in ANSWERABLE][:per]:
            hits = service.recall(asked_of.sample_id, question.text, DEPTH, min_relevance=0.0, touch=False)
            out.append(
                Question(
                    "locomo-elsewhere",
                    ranking_features(hits),
                    (0,) * len(hits),
                    tuple(h.relevance for h in hits),
                    answerable=False,
                )
            )
    return out


def mixed_questions(result: MixedResult) -> list[Question]:
    """The suite's questions as calibration data (``result`` carries the features of its ranking)."""
    return [
        Question("mixed", a.features, tuple(int(k in a.expect) for k in a.ranked), a.relevance, a.answerable)
        for a in result.answers
    ]


def _question(source: str, hits: Sequence[Hit], labels: Iterable[int]) -> Question:
    return Question(source, ranking_features(hits), tuple(labels), tuple(h.relevance for h in hits))


def design(found: Sequence[Features]) -> np.ndarray:
    """The fitted inputs: 1, cosine, coverage (topicless rows are not fitted; context is swept)."""
    return np.array([[1.0, f.cosine, f.coverage] for f in found], dtype=np.float64)


def fit(questions: Sequence[Question], base: CalibrationPolicy) -> CalibrationPolicy:
    rows, labels, weights = [], [], []
    sources = {q.source for q in questions}
    for source in sources:
        pairs = [
            (f, y) for q in questions if q.source == source for f, y in zip(q.features, q.labels, strict=True)
        ]
        pairs = [(f, y) for f, y in pairs if not f.topicless]
        rows += [f for f, _ in pairs]
        labels += [y for _, y in pairs]
        weights += [1.0 / len(pairs)] * len(pairs)
    x, y, w = design(rows), np.array(labels, dtype=np.float64), np.array(weights) * len(rows) / len(sources)
    beta = _newton(x, y, w)
    return base.model_copy(
        update={name: round(weight, 2) for name, weight in zip(FITTED, beta[:3], strict=True)}
    )


def _newton(x: np.ndarray, y: np.ndarray, w: np.ndarray, steps: int = 50) -> list[float]:
    beta = np.zeros(x.shape[1])
    penalty = _L2 * np.eye(x.shape[1])
    penalty[0, 0] = 0.0  # the bias is not shrunk
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-x @ beta))
        gradient = x.T @ (w * (p - y)) + penalty @ beta
        hessian = (x * (w * p * (1 - p))[:, None]).T @ x + penalty
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return [float(b) for b in beta]


def rescored(questions: Sequence[Question], model: CalibrationPolicy) -> list[Question]:
    """The same questions with relevance from ``model`` (time rules left out: they are not fitted)."""
    return [
        Question(
            q.source,
            q.features,
            q.labels,
            tuple(calibration.relevance(f, model) for f in q.features),
            q.answerable,
        )
        for q in questions
    ]


def reliability(questions: Sequence[Question], bins: int = 10) -> list[tuple[str, int, float, float]]:
    """Per relevance bin: pairs, mean predicted relevance, observed share of answers."""
    pairs = [(r, y) for q in questions for r, y in zip(q.relevance, q.labels, strict=True)]
    out = []
    for b in range(bins):
        low, high = b / bins, (b + 1) / bins
        inside = [(r, y) for r, y in pairs if low <= r < high or (b == bins - 1 and r == 1.0)]
        if inside:
            out.append(
                (
                    f"{low:.1f}-{high:.1f}",
                    len(inside),
                    float(np.mean([r for r, _ in inside])),
                    float(np.mean([y for _, y in inside])),
                )
            )
    return out


def floor_sweep(questions: Sequence[Question], floors: Sequence[float] = FLOORS) -> list[dict[str, float]]:
    """For each floor and source: the share of answerable questions whose answer clears it within
    the top 5 (``kept``), the same share among those whose answer is in the top 5 at all
    (``hits kept``: what the floor costs the ranking), and the share of no-answer questions that
    let something through (``leak``)."""
    rows = []
    for floor in floors:
        row: dict[str, float] = {"floor": floor}
        for source in sorted({q.source for q in questions}):
            mine = [q for q in questions if q.source == source]
            answerable = [q for q in mine if q.answerable]
            if answerable:
                hits = [q for q in answerable if any(q.labels[:5])]
                row[f"{source} kept"] = _share([_kept(q, floor) for q in answerable])
                row[f"{source} hits kept"] = _share([_kept(q, floor) for q in hits])
            if len(answerable) < len(mine):
                row[f"{source} leak"] = _share(
                    [max(q.relevance, default=0.0) >= floor for q in mine if not q.answerable]
                )
        rows.append(row)
    return rows


def _kept(question: Question, floor: float) -> bool:
    """An answer among the first 5 that clear ``floor`` (order as served: score, not relevance)."""
    cleared = [y for r, y in zip(question.relevance, question.labels, strict=True) if r >= floor]
    return any(cleared[:5])


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def reliability_table(questions: Sequence[Question]) -> str:
    lines = ["| relevance | pairs | mean predicted | share that are answers |", "|---|---|---|---|"]
    lines += [f"| {b} | {n} | {p:.3f} | {o:.3f} |" for b, n, p, o in reliability(questions)]
    return "\n".join(lines)


def sweep_table(questions: Sequence[Question]) -> str:
    rows = floor_sweep(questions)
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += [
        "| " + " | ".join(f"{row[h]:g}" if h == "floor" else f"{row[h]:.3f}" for h in head) + " |"
        for row in rows
    ]
    return "\n".join(lines)
