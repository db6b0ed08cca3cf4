"""The embedded store on disk: durability settings, persistence, and the embedding-model guard."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.errors import ConfigurationError
from atlas_mcp.files import sha256_of
from atlas_mcp.inference.embedder import MINILM_MODEL_ID, Embedder, OnnxMiniLM, default_embedder
from atlas_mcp.service import MemoryService


class OtherModel(Embedder):
    model_id = "some-other-model"
    dimensions = 384

    def embed_batch(self, texts):
        return np.ones((len(texts), 384), dtype=np.float32) / np.sqrt(384)


def test_store_is_wal_and_survives_reopen(tmp_path: Path):
    path = tmp_path / "atlas.db"
    service = MemoryService(EmbeddedEngine(path, default_embedder()))
    written = service.write("sarah", "Sarah's boiler is a Vaillant")
    service.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT embedding_model FROM memories").fetchone()[0] == MINILM_MODEL_ID
    conn.close()
    reopened = MemoryService(EmbeddedEngine(path, default_embedder()))
    assert reopened.recall("sarah", "boiler brand")[0].memory.id == written.id
    reopened.close()


def test_a_store_from_another_model_is_refused(tmp_path: Path):
    path = tmp_path / "atlas.db"
    EmbeddedEngine(path, default_embedder()).close()
    with pytest.raises(ConfigurationError, match="reindex"):
        EmbeddedEngine(path, OtherModel())


def test_model_file_is_verified_by_sha256(tmp_path: Path):
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")
    assert sha256_of(fake) != ""
    with pytest.raises(ConfigurationError, match="sha256"):
        OnnxMiniLM(fake)


def test_embeddings_are_normalised_and_semantic():
    vectors = default_embedder().embed_batch(
        ["I moved to Berlin", "The user lives in Berlin", "Quarterly tax report"]
    )
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > 0.5 > vectors[0] @ vectors[2]


def test_reindex_moves_a_store_to_the_configured_model(tmp_path: Path):
    from atlas_mcp.engines.embedded.reindex import reindex

    path = tmp_path / "atlas.db"
    old = MemoryService(EmbeddedEngine(path, OtherModel()))
    written = old.write("sarah", "Sarah's heat pump is a Daikin Altherma")
    old.close()
    seen = []
    assert reindex(path, default_embedder(), lambda done, total: seen.append((done, total))) == 1
    assert seen == [(1, 1)]
    service = MemoryService(EmbeddedEngine(path, default_embedder()))
    assert service.recall("sarah", "which heat pump")[0].memory.id == written.id
    service.close()
    with pytest.raises(ConfigurationError, match="reindex"):
        EmbeddedEngine(path, OtherModel())
