"""Query vectors: the model runs for a recall's query and its rewordings, and the recent ones.

The query is embedded on a small pool beside BM25 (the model and SQLite both release the GIL);
a rewording ranking is expected to ask about (``RecallPlan.foreseen``) is started there too,
with the query, instead of after the pool is ranked. The model gives the same text the same
vector, so a recent text's vector is reused and one already being embedded is waited for.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ...inference.base import Embedder
from ...inference.embedder import ModelChoice, embed_query
from .dense import SpaceQuery
from .handoff import Pool, Task

QUERY_THREADS = 2  # query texts embedded at once (a query and its rewording; HTTP sessions)
# Recent queries' vectors, per space: an agent that recalls the user's message, then recalls it
# again (or the perspective step rewords nothing) skips the model, ~4 ms of a recall.
RECENT_QUERIES = 64


class Ready:
    """A vector at hand, read like a finished ``Task`` (whose locks cost more than the look-up
    that found the vector)."""

    __slots__ = ("_value",)

    def __init__(self, value: SpaceQuery) -> None:
        self._value = value

    def done(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> SpaceQuery:
        return self._value


class QueryVectors:
    """Texts embedded as queries in a vector space (a code of ``spaces``), recent ones kept."""

    def __init__(self, models: ModelChoice, model_of: Callable[[int], str]) -> None:
        self.models = models
        self._model_of = model_of  # a space's code -> the model id whose vectors live there
        self._pool = Pool(QUERY_THREADS, "atlas-query")  # ``handoff.py``
        self._recent: OrderedDict[tuple[str, str], SpaceQuery] = OrderedDict()
        self._coming: dict[tuple[str, str], Task[SpaceQuery]] = {}  # started by ``foresee``
        self._lock = threading.Lock()

    def submit(self, text: str, code: int) -> Task[SpaceQuery] | Ready:
        """``get`` on the pool; a recent vector, or the run already started for ``text``
        (``foresee``), without a trip through the pool."""
        with self._lock:
            at_hand = self._at_hand((self._model_of(code), text))
        return at_hand if at_hand is not None else self._pool.submit(self.get, text, code)

    def start(
        self, text: str, foreseen: Sequence[str], codes: Iterable[int]
    ) -> dict[int, Task[SpaceQuery] | Ready]:
        """``submit`` ``text`` and ``foresee`` ``foreseen`` in each space of ``codes``. The query
        and the first foreseen text that is not at hand are one task on the pool, which a model
        that runs pairs (``Embedder.embed_pair``) embeds in one run: at 1k one-chat memories
        that took 3.6-3.7 instead of 3.9-4.1 ms of CPU per recall, and no longer recall."""
        codes = tuple(codes)
        out: dict[int, Task[SpaceQuery] | Ready] = {}
        for code in codes:
            model = self._model_of(code)
            query, view = (model, text), None
            with self._lock:
                at_hand = self._at_hand(query)
                if at_hand is None:
                    view = next((t for t in foreseen if t != text and self._unknown((model, t))), None)
                if view is not None:
                    together: tuple[Task[SpaceQuery], Task[SpaceQuery]] = (Task(), Task())
                    self._coming[(model, view)] = together[1]
            if at_hand is not None:
                out[code] = at_hand
            elif view is None:
                out[code] = self._pool.submit(self.get, text, code)
            else:
                out[code] = together[0]
                self._pool.submit(self._together, (query, (model, view)), together)
        self.foresee(foreseen, codes)  # the rest (the paired text is coming already)
        return out

    def foresee(self, texts: Sequence[str], codes: Iterable[int]) -> None:
        """Start embedding ``texts`` in each space of ``codes`` on the pool (after what was
        submitted before): on 2 cores the model runs for a rewording beside BM25 and the scan
        instead of after the pool is ranked. Whichever thread runs it, the vector is the same."""
        for code in codes:
            model = self._model_of(code)
            for text in texts:
                key = (model, text)
                with self._lock:
                    if self._unknown(key):
                        self._coming[key] = self._pool.submit(self._foreseen, key, text)

    def get(self, text: str, code: int) -> SpaceQuery:
        """``text`` embedded in the space ``code``: a recent vector, one being embedded (waited
        for), or the model's now (also for one still queued behind other recalls' texts: it is
        taken off the queue rather than waited for)."""
        key = (self._model_of(code), text)
        with self._lock:
            if (found := self._recent.get(key)) is not None:
                self._recent.move_to_end(key)
                return found
            coming = self._coming.get(key)
            if coming is not None and coming.cancel():
                del self._coming[key]
                coming = None
        return coming.result() if coming is not None else self._embedded(key, text)

    def recent(self, model: str, text: str) -> SpaceQuery | None:
        """``text``'s vector in ``model``'s space if it was embedded lately (no model run)."""
        with self._lock:
            return self._recent.get((model, text))

    def close(self) -> None:
        self._pool.shutdown()

    def _at_hand(self, key: tuple[str, str]) -> Ready | Task[SpaceQuery] | None:
        """A recent vector, or the run already started for it (under the lock)."""
        found = self._recent.get(key)
        if found is not None:
            self._recent.move_to_end(key)
            return Ready(found)
        return self._coming.get(key)

    def _unknown(self, key: tuple[str, str]) -> bool:
        return key not in self._recent and key not in self._coming

    def _together(self, keys: tuple[tuple[str, str], ...], futures: tuple[Task[SpaceQuery], ...]) -> None:
        """``start``'s task: both texts in one run if the model runs pairs and neither was taken
        (``get`` takes a foreseen text off the queue by cancelling it); else each as before,
        the second beside the first on the pool."""
        live = [future.set_running_or_notify_cancel() for future in futures]
        try:
            embedder = self.models.embedder(keys[0][0])
            paired = all(live) and embedder.pairs_ready()
            vectors = embedder.embed_pair(keys[0][1], keys[1][1]) if paired else None
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting recalls, as a pool task's is
            for future, running in zip(futures, live, strict=True):
                if running:
                    future.set_exception(exc)
            self._forget(keys[1], futures[1])
            return
        if vectors is not None:
            for key, future, vector in zip(keys, futures, vectors, strict=True):
                future.set_result(self._kept(key, vector, embedder))
            self._forget(keys[1], futures[1])
            return
        if live[1]:
            try:
                self._pool.submit(self._settle, keys[1], futures[1])
            except RuntimeError:  # the pool is shutting down: no recall may wait on it forever
                self._settle(keys[1], futures[1])
        if live[0]:
            self._settle(keys[0], futures[0])

    def _settle(self, key: tuple[str, str], future: Task[SpaceQuery]) -> None:
        try:
            future.set_result(self._embedded(key, key[1]))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting recalls, as a pool task's is
            future.set_exception(exc)
        finally:
            self._forget(key, future)

    def _forget(self, key: tuple[str, str], future: Task[SpaceQuery]) -> None:
        with self._lock:
            if self._coming.get(key) is future:
                del self._coming[key]

    def _foreseen(self, key: tuple[str, str], text: str) -> SpaceQuery:
        try:
            return self._embedded(key, text)
        finally:
            with self._lock:
                self._coming.pop(key, None)

    def _embedded(self, key: tuple[str, str], text: str) -> SpaceQuery:
        embedder = self.models.embedder(key[0])
        return self._kept(key, embed_query(embedder, text), embedder)

    def _kept(self, key: tuple[str, str], vector: np.ndarray, embedder: Embedder) -> SpaceQuery:
        vector.setflags(write=False)  # shared by every recall of the same words
        made = SpaceQuery(vector, embedder.cosine_background)
        with self._lock:
            self._recent[key] = made
            while len(self._recent) > RECENT_QUERIES:
                self._recent.popitem(last=False)
        return made
