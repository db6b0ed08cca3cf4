"""Reading the cluster's scores back on atlas's scales: what an inference endpoint is, the
reranker's shifted score as a relevance, and the ``semantic`` query's score as a cosine.

``GET _inference/<id>`` says what an endpoint is (task, service, model, vector similarity); the
scores depend on it. A reranker served by the ``elasticsearch`` service returns raw logits, the
others probabilities (elastic/elasticsearch#118483, #120201). A dense ``semantic`` query scores
with the similarity the endpoint declares, each with its own formula (the ``dense_vector``
reference: cosine and dot_product ``(1 + s) / 2``, l2_norm ``1 / (1 + d²)``, max_inner_product
``s + 1`` if ``s >= 0`` else ``1 / (1 - s)``); inverted, each gives back the cosine the embedded
engine reports (for l2_norm and max_inner_product, exactly so for unit vectors, which is what
embedding models return; otherwise an increasing function of it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Services whose rerank models return raw logits; the others return probabilities.
LOGIT_SERVICES = frozenset({"elasticsearch"})
EIS_SERVICE = "elastic"  # the Elastic Inference Service: its endpoints need no inference licence


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What ``GET _inference/<id>`` says about an endpoint, and how atlas reads its scores."""

    task_type: str
    service: str
    model_id: str
    similarity: str = "cosine"  # a text_embedding endpoint's vector similarity

    @property
    def rerank_scale(self) -> str:
        return "logit" if self.service in LOGIT_SERVICES else "probability"

    @property
    def dense(self) -> bool:
        """Dense embeddings: a ``semantic`` query scores by vector similarity; sparse ones a dot product."""
        return self.task_type == "text_embedding"

    def cosine(self) -> Callable[[float], float]:
        """The ``semantic`` query's score as the cosine (a sparse endpoint's score is kept as it is)."""
        if not self.dense:
            return float
        return SIMILARITY_TO_COSINE.get(self.similarity.lower(), _from_half_shifted)


def describe_endpoint(found: dict[str, Any]) -> Endpoint:
    (endpoint, *_) = found.get("endpoints") or [{}]
    settings = endpoint.get("service_settings") or {}
    return Endpoint(
        str(endpoint.get("task_type", "?")),
        str(endpoint.get("service", "?")),
        str(settings.get("model_id") or settings.get("model") or "?"),
        str(settings.get("similarity") or "cosine"),
    )


def _from_half_shifted(score: float) -> float:
    """cosine and dot_product: score = (1 + s) / 2."""
    return 2.0 * score - 1.0


def _from_l2(score: float) -> float:
    """l2_norm: score = 1 / (1 + d²), and d² = 2 - 2·cos for unit vectors."""
    return 1.0 - (1.0 / max(score, 1e-12) - 1.0) / 2.0


def _from_max_inner_product(score: float) -> float:
    """max_inner_product: score = s + 1 for s >= 0, else 1 / (1 - s)."""
    return score - 1.0 if score >= 1.0 else 1.0 - 1.0 / max(score, 1e-12)


SIMILARITY_TO_COSINE: dict[str, Callable[[float], float]] = {
    "cosine": _from_half_shifted,
    "dot_product": _from_half_shifted,
    "l2_norm": _from_l2,
    "max_inner_product": _from_max_inner_product,
}


def rerank_relevance(scores: Sequence[float], scale: str) -> list[float]:
    """The reranker's scores as relevance in [0, 1], in the same order whatever the endpoint returns.

    The retriever reports ``max(s, 0) + min(exp(s), 1)`` of the model's score s (elastic/
    elasticsearch#120930), which is undone first. ``probability`` endpoints return s in [0, 1],
    kept as is; ``logit`` endpoints return raw logits, squashed by a sigmoid like the local
    cross-encoder. A "probability" batch with a score outside [0, 1] is read as logits too: both
    maps are increasing, so the reranker's order always survives (clamping would tie them).
    """
    raw = [score - 1.0 if score >= 1.0 else math.log(max(score, 1e-300)) for score in scores]
    if scale == "probability" and all(0.0 <= r <= 1.0 for r in raw):
        return raw
    return [_sigmoid(r) for r in raw]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
