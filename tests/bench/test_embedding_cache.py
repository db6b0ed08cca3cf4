"""The bench's embedding cache: vectors keyed by their text, surviving a reopen."""

from __future__ import annotations

import numpy as np

from atlas_mcp.bench.seed import EmbeddingCache


def test_cache_round_trips_by_text(tmp_path):
    cache = EmbeddingCache(tmp_path, "model-a")
    cache.add(["alpha", "beta"], np.array([[1, 0], [0, 1]], dtype=np.float32))
    cache.add(["gamma"], np.array([[1, 1]], dtype=np.float32))
    reopened = EmbeddingCache(tmp_path, "model-a")
    assert "beta" in reopened and "delta" not in reopened
    assert reopened.lookup(["gamma", "alpha", "alpha"]).tolist() == [[1, 1], [1, 0], [1, 0]]
    assert "alpha" not in EmbeddingCache(tmp_path, "model-b"), "vectors never cross models"


def test_a_torn_cache_is_ignored(tmp_path):
    cache = EmbeddingCache(tmp_path, "model-a")
    cache.add(["alpha", "beta"], np.ones((2, 3), dtype=np.float32))
    keys = next(tmp_path.glob("*.keys"))
    keys.write_text("only-one-key\n")
    assert "alpha" not in EmbeddingCache(tmp_path, "model-a")
