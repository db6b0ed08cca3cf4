"""MiniLM with integer matrix products: derived once from the pinned file, cached, and stores
embedded by the float32 run move to it in the background. Real models, real SQLite files."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.passages import from_blob
from atlas_mcp.errors import ConfigurationError
from atlas_mcp.inference import minilm_graph, quantized
from atlas_mcp.inference.embedder import (
    E5_MODEL_ID,
    MINILM_FLOAT_ID,
    MINILM_MODEL_ID,
    MINILM_PREVIOUS_ID,
    MINILM_SHA256,
    PER_LANGUAGE_FLOAT_ID,
    PER_LANGUAGE_ID,
    PER_LANGUAGE_PREVIOUS_ID,
    OnnxMiniLM,
    PerLanguage,
    _float_minilm,
    _minilm_file,
    default_embedder,
)
from atlas_mcp.service import MemoryService

TEXTS = [
    "Met Nora in Nairobi to talk about the customer escalation.",
    "Sarah's boiler is a Vaillant ecoTEC.",
    "[3:07 pm on 14 September, 2023] Caroline went to the LGBTQ support group and felt accepted.",
    "What's my favourite colour?",
]


def test_integer_vectors_stay_within_a_hair_of_the_float_run():
    integer, floating = default_embedder().embed_batch(TEXTS), _float_minilm(2).embed_batch(TEXTS)
    assert default_embedder().model_id == MINILM_MODEL_ID != MINILM_FLOAT_ID == _float_minilm(2).model_id
    assert (integer * floating).sum(axis=1).min() > 0.99
    assert not np.allclose(integer, floating)  # really another run: a space of its own
    alone = np.stack([default_embedder().embed_batch([text])[0] for text in TEXTS])
    assert np.array_equal(alone, integer)  # a text's vector never depends on its batch-mates


def test_the_derived_graph_keeps_the_stored_int8_weights_and_runs_attention_as_one_op(tmp_path: Path):
    first_recipe = tmp_path / f"minilm-l6-{MINILM_SHA256[:16]}-{quantized.PREVIOUS_RECIPE}.onnx"
    first_recipe.write_bytes(b"the first recipe's derived model")
    derived = quantized.derived_model(_minilm_file(), MINILM_SHA256, tmp_path)
    assert not first_recipe.exists()  # replaced: its stores are re-embedded with this model
    graph = onnx.load(str(derived)).graph
    ops = [node.op_type for node in graph.node]
    # 6 layers x (query+key+value as one product, attention output, feed-forward in) scaled per
    # run, 6 feed-forward out in blocks of 128 inputs, 6 attentions: no float product is left.
    assert ops.count("DynamicQuantizeMatMul") == 18 and ops.count("MultiHeadAttention") == 6
    assert ops.count("MatMulNBits") == 6 and "MatMul" not in ops
    for node in graph.node:
        if node.op_type == "MatMulNBits":
            attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            assert attributes == {"K": 1536, "N": 384, "bits": 8, "block_size": 128, "accuracy_level": 4}
    stored = {init.name: onnx.numpy_helper.to_array(init) for init in graph.initializer}
    source = minilm_graph.read_source(_minilm_file())
    last = source.layers[5]
    qkv = np.concatenate([last[role].weight for role in minilm_graph.QKV], axis=1)
    assert np.array_equal(stored["layer5.qkv.w"], qkv)  # the file's int8, not quantized again
    out = last[minilm_graph.FEED_OUT]
    unpacked = stored["layer5.out.w"].reshape(384, 1536).astype(np.int16) - 128
    assert np.array_equal(unpacked.T, out.weight)
    assert np.array_equal(stored["layer5.out.s"].reshape(384, -1)[:, 0], out.scale)
    before = derived.stat().st_mtime_ns
    assert quantized.derived_model(_minilm_file(), MINILM_SHA256, tmp_path) == derived
    assert derived.stat().st_mtime_ns == before  # cached: derived once
    assert [p.name for p in tmp_path.iterdir()] == [derived.name]  # no scratch left behind
    assert quantized.RECIPE in derived.name and quantized.RECIPE in graph.name


def test_a_pair_run_gives_each_text_the_bytes_of_its_own_run(tmp_path: Path, paired_minilm: OnnxMiniLM):
    derived = quantized.derived_model(_minilm_file(), MINILM_SHA256, tmp_path, texts=2)
    assert derived.name.endswith(f"{quantized.RECIPE}-pair.onnx")
    graph = onnx.load(str(derived)).graph
    ops = [node.op_type for node in graph.node]
    # Each node next to its twin (the order the session runs them in), weights stored once.
    assert ops[0::2] == ops[1::2] and ops.count("MultiHeadAttention") == 12
    assert len(graph.initializer) == len(
        onnx.load(str(quantized.derived_model(_minilm_file(), MINILM_SHA256))).graph.initializer
    )
    options = ort.SessionOptions()
    options.enable_profiling, options.profile_file_prefix = True, str(tmp_path / "profile")
    options.execution_order = ort.ExecutionOrder.PRIORITY_BASED  # as the embedder's pair session
    session = ort.InferenceSession(str(derived), options, providers=["CPUExecutionProvider"])
    ids = np.array([[101, 2054, 102]], dtype=np.int64)
    one = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    session.run(None, one | {f"{name}{minilm_graph.SECOND}": value for name, value in one.items()})
    events = json.loads(Path(session.end_profiling()).read_text())
    ran = [
        e["name"].removesuffix("_kernel_time")
        for e in events
        if e.get("cat") == "Node" and "kernel" in e["name"]
    ]
    assert len(ran) > 150 and ran[1::2] == [
        name + minilm_graph.SECOND for name in ran[0::2]
    ]  # less the Identities ORT drops
    embedder = paired_minilm
    for first, second in [(TEXTS[0], TEXTS[3]), (TEXTS[2], TEXTS[1]), ("", TEXTS[0])]:
        both = embedder.embed_pair(first, second)
        alone = np.concatenate([embedder.embed_queries([first]), embedder.embed_queries([second])])
        assert both.tobytes() == alone.tobytes()


def test_a_source_that_is_not_a_model_gets_a_clear_error(tmp_path: Path):
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(ConfigurationError, match="could not derive the embedding model"):
        quantized.derived_model(broken, "0" * 64, tmp_path / "cache")
    assert not any((tmp_path / "cache").glob("*.onnx"))


def test_an_unwritable_cache_falls_back_to_a_private_directory_removed_at_exit(tmp_path: Path):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be")
    script = (
        "from atlas_mcp.inference import quantized\n"
        "from atlas_mcp.log import configure_logging\n"
        "configure_logging()\n"  # to stderr, as every command does
        "first, second = quantized.model_cache_dir(), quantized.model_cache_dir()\n"
        "assert first == second and first.is_dir(), (first, second)\n"
        "(first / 'derived.onnx').write_bytes(b'a derived model')\n"
        "print(first)\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(blocker)}
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    directory = Path(done.stdout.strip())
    assert blocker not in directory.parents
    assert "XDG_CACHE_HOME" in done.stderr  # the warning says how to derive once
    assert not directory.exists()  # a ~24 MB model per start must not pile up in /tmp


class FloatPerLanguage(PerLanguage):
    """per-language as it was before: English by the float32 run of MiniLM."""

    def __init__(self) -> None:
        super().__init__(2)
        self.choice_id = PER_LANGUAGE_FLOAT_ID
        self.members = (MINILM_FLOAT_ID, E5_MODEL_ID)

    def model_for(self, text: str) -> str:
        chosen = super().model_for(text)
        return MINILM_FLOAT_ID if chosen == MINILM_MODEL_ID else chosen


def _rows(path: Path) -> dict[str, tuple[str, np.ndarray]]:
    with sqlite3.connect(path) as conn:
        found = conn.execute("SELECT text, embedding_model, embedding FROM memories").fetchall()
    return {text: (model, from_blob(blob, 384)[0]) for text, model, blob in found}


def test_a_store_of_the_float_run_moves_to_the_integer_model_in_the_background(tmp_path: Path):
    path = tmp_path / "atlas.db"
    old = MemoryService(EmbeddedEngine(path, FloatPerLanguage()))
    boiler = old.write("sarah", TEXTS[1]).id
    old.write("sarah", "王伟不喜欢冰箱的嗡嗡声。")
    old.recall("sarah", "anything")  # waits for the deferred embeddings
    old.close()
    before = _rows(path)
    assert {model for model, _ in before.values()} == {MINILM_FLOAT_ID, E5_MODEL_ID}

    service = MemoryService(EmbeddedEngine(path, PerLanguage(2)))
    try:
        # Until the repair reaches it, the old vector answers, compared in its own space.
        assert service.recall("sarah", "boiler brand", min_relevance=0.0)[0].memory.id == boiler
        deadline = time.monotonic() + 30
        while service.stats().awaiting_embedding and time.monotonic() < deadline:
            time.sleep(0.05)
        after = _rows(path)
        assert after[TEXTS[1]][0] == MINILM_MODEL_ID
        assert np.allclose(after[TEXTS[1]][1], default_embedder().embed_batch([TEXTS[1]])[0], atol=1e-2)
        assert after["王伟不喜欢冰箱的嗡嗡声。"][0] == E5_MODEL_ID  # other spaces are left alone
        assert np.array_equal(after["王伟不喜欢冰箱的嗡嗡声。"][1], before["王伟不喜欢冰箱的嗡嗡声。"][1])
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()[0] == (
                PER_LANGUAGE_ID
            )
        assert service.recall("sarah", "boiler brand", min_relevance=0.0)[0].memory.id == boiler
    finally:
        service.close()


class PreviousPerLanguage(PerLanguage):
    """per-language as the first integer recipe wrote it (its vectors: this model's, so the
    test is about the move, not about how far apart the two recipes are)."""

    def __init__(self) -> None:
        super().__init__(2)
        self.choice_id = PER_LANGUAGE_PREVIOUS_ID
        self.members = (MINILM_PREVIOUS_ID, E5_MODEL_ID)

    def model_for(self, text: str) -> str:
        chosen = super().model_for(text)
        return MINILM_PREVIOUS_ID if chosen == MINILM_MODEL_ID else chosen


def test_a_store_of_the_first_integer_recipe_moves_to_this_one_with_one_model_run_per_query(tmp_path: Path):
    path = tmp_path / "atlas.db"
    old = MemoryService(EmbeddedEngine(path, PreviousPerLanguage()))
    boiler = old.write("sarah", TEXTS[1]).id
    old.write("sarah", TEXTS[0])
    old.recall("sarah", "anything")  # waits for the deferred embeddings
    old.close()
    assert {model for model, _ in _rows(path).values()} == {MINILM_PREVIOUS_ID}

    engine = EmbeddedEngine(path, PerLanguage(2))
    service = MemoryService(engine)
    try:
        assert service.recall("sarah", "boiler brand", min_relevance=0.0)[0].memory.id == boiler
        # The old space is read with the new model's query vector: one run serves both spaces.
        assert engine.search.query_vectors.recent(MINILM_MODEL_ID, "boiler brand") is not None
        assert engine.search.query_vectors.recent(MINILM_PREVIOUS_ID, "boiler brand") is None
        deadline = time.monotonic() + 30
        while service.stats().awaiting_embedding and time.monotonic() < deadline:
            time.sleep(0.05)
        after = _rows(path)
        assert {model for model, _ in after.values()} == {MINILM_MODEL_ID}
        with sqlite3.connect(path) as conn:
            recorded = conn.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()[0]
        assert recorded == PER_LANGUAGE_ID
        assert service.recall("sarah", "boiler brand", min_relevance=0.0)[0].memory.id == boiler
    finally:
        service.close()
