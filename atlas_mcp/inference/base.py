"""What every text embedder is: ``embed_batch``, and what a model may declare beyond it.

A model overrides only what differs from a symmetric model that reads any text whole and
whose cosines sit where MiniLM's do (the pattern of llm's ``EmbeddingModel``): e5 embeds
queries differently from stored texts and has its own background; MiniLM cuts long texts
into passages.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from ..domain.similarity import REFERENCE_BACKGROUND, Background


class Embedder(ABC):
    model_id: str
    dimensions: int
    # Where the model's cosines of unrelated query-memory pairs sit (``domain.similarity``).
    cosine_background: Background = REFERENCE_BACKGROUND
    # How far relevance stretches the model's cosines from the query's background, for a model
    # that crowds related pairs towards it (``domain.similarity.for_relevance``); 1: not at all.
    relatedness_stretch: float = 1.0

    @abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dimensions), rows L2-normalised: stored texts."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Search queries' vectors; a symmetric model embeds a query like any text."""
        return self.embed_batch(texts)

    def pairs_ready(self) -> bool:
        """Does ``embed_pair`` run the two texts together (cheaper than one by one)?"""
        return False

    def embed_pair(self, first: str, second: str) -> np.ndarray:
        """Two queries' vectors, each the same as ``embed_queries`` gives it alone."""
        return np.concatenate([self.embed_queries([first]), self.embed_queries([second])])

    def passages(self, text: str) -> list[str]:
        """The pieces of ``text`` the model reads whole, each given its own vector
        (``engines/embedded/passages.py``); a model without a window reads all of it."""
        return [text]
