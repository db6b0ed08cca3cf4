"""Texts a recall compares its query with that never change (``domain.asked``'s plain questions
per attribute): embedded once per model on first use and kept for the life of the process."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from ...inference.embedder import MINILM_FLOAT_ID, MINILM_MODEL_ID, ModelChoice

MINILM_MODELS = (MINILM_MODEL_ID, MINILM_FLOAT_ID)  # the spaces ``Search.likeness`` reads (English texts)


class FixedTexts:
    def __init__(self, models: ModelChoice) -> None:
        self._models = models
        self._vectors: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
        self._lock = threading.Lock()

    def vectors(self, model: str, texts: Sequence[str]) -> np.ndarray:
        """``texts`` embedded as queries by ``model``, one row each."""
        key = (model, tuple(texts))
        with self._lock:
            found = self._vectors.get(key)
        if found is None:  # two first recalls may both embed them; either result is kept
            found = self._models.embedder(model).embed_queries(list(texts))
            with self._lock:
                self._vectors[key] = found
        return found
