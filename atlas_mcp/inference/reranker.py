"""Rerank stage: turns fused candidates into a match in [0, 1] (``domain.ranking.Reranker``).

The default needs no model: it fuses the dense cosine and BM25 score the engine already
computed, with the context of events (``domain.context_rerank``). A cross-encoder is ~180 ms for
80 pairs on 2 cores, far over the recall budget, and none ships on a package registry. A user
may point ``[rerank] model_dir`` at a cross-encoder exported to ONNX (``model.onnx`` +
``tokenizer.json``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..domain.context_rerank import context_match
from ..domain.fusion import max_rrf_score
from ..domain.pool import Pool
from ..domain.ranking import Reranker
from ..domain.scoring import ScoringPolicy
from ..errors import ConfigurationError

__all__ = ["ContextReranker", "FusedScoreReranker", "OnnxCrossEncoder", "Reranker", "open_reranker"]


class FusedScoreReranker:
    """match = (1 − w)·RRF/RRF_max + w·max(cosine, 0), with w = ``fused_dense_weight``."""

    name = "fused"

    def __init__(self, policy: ScoringPolicy, branches: int = 2) -> None:
        self._dense_weight = policy.retrieval.fused_dense_weight
        self._rrf_max = max_rrf_score(branches, policy.retrieval.rrf_rank_constant)

    def match(self, query: str, pool: Pool) -> np.ndarray:
        rrf = np.minimum(np.nan_to_num(pool.rrf, nan=0.0) / self._rrf_max, 1.0)
        cosine = np.maximum(np.nan_to_num(pool.cosine, nan=0.0), 0.0)
        matches: np.ndarray = (1 - self._dense_weight) * rrf + self._dense_weight * cosine
        return matches


class ContextReranker:
    """The default: z-score fusion of cosine and BM25 with event context (``domain.context_rerank``)."""

    name = "context"

    def __init__(self, policy: ScoringPolicy) -> None:
        self._policy = policy.context_rerank

    def match(self, query: str, pool: Pool) -> np.ndarray:
        return context_match(query, pool, self._policy)


class OnnxCrossEncoder:
    """A user-supplied cross-encoder; its logit goes through a sigmoid to land in [0, 1].

    Only the top ``limit`` fused candidates are scored (the rest keep their fused score,
    scaled below the scored ones) so latency stays bounded.
    """

    name = "cross-encoder"

    def __init__(self, model_dir: Path, fallback: FusedScoreReranker, limit: int, threads: int = 2):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model, tokenizer = model_dir / "model.onnx", model_dir / "tokenizer.json"
        if not model.is_file() or not tokenizer.is_file():
            raise ConfigurationError(f"{model_dir} must hold model.onnx and tokenizer.json")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(512)
        self._tokenizer.enable_padding()
        self._fallback = fallback
        self._limit = limit

    def match(self, query: str, pool: Pool) -> np.ndarray:
        head = min(self._limit, len(pool))
        scores = self._cross_scores(query, [m.search_text() for m in pool.memories[:head]]) if head else []
        tail = 0.5 * self._fallback.match(query, pool)[head:]
        return np.concatenate([np.asarray(scores, dtype=np.float64), tail])

    def _cross_scores(self, query: str, texts: list[str]) -> list[float]:
        encodings = self._tokenizer.encode_batch([(query, t) for t in texts])
        feeds = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        logits = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        flat = np.asarray(logits, dtype=np.float64).reshape(len(texts), -1)[:, -1]
        return [1.0 / (1.0 + math.exp(-x)) for x in flat]


def open_reranker(policy: ScoringPolicy, model_dir: Path | None, limit: int, threads: int) -> Reranker:
    if model_dir is None:
        return ContextReranker(policy)
    return OnnxCrossEncoder(model_dir, FusedScoreReranker(policy), limit, threads)
