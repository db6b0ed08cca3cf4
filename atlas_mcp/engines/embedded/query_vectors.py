"""Query vectors: the model runs for a recall's query and its rewordings, and the recent ones.

The query is embedded on a small pool beside BM25 (the model and SQLite both release the GIL);
a rewording ranking is expected to ask about (``RecallPlan.foreseen``) is started there too,
after the query, instead of after the pool is ranked. The model gives the same text the same
vector, so a recent text's vector is reused and one already being embedded is waited for.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from ...inference.embedder import ModelChoice, embed_query
from .dense import SpaceQuery

QUERY_THREADS = 2  # query texts embedded at once (a query and its rewording; HTTP sessions)
# Recent queries' vectors, per space: an agent that recalls the user's message, then recalls it
# again (or the perspective step rewords nothing) skips the model, ~4 ms of a recall.
RECENT_QUERIES = 64


class Ready:
    """A vector at hand, read like a finished ``Future`` (whose lock and condition cost more
    than the look-up that found the vector)."""

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
        self._pool = ThreadPoolExecutor(QUERY_THREADS, thread_name_prefix="atlas-query")
        self._recent: OrderedDict[tuple[str, str], SpaceQuery] = OrderedDict()
        self._coming: dict[tuple[str, str], Future[SpaceQuery]] = {}  # started by ``foresee``
        self._lock = threading.Lock()

    def submit(self, text: str, code: int) -> Future[SpaceQuery] | Ready:
        """``get`` on the pool; a recent vector, or the run already started for ``text``
        (``foresee``), without a trip through the pool."""
        key = (self._model_of(code), text)
        with self._lock:
            found = self._recent.get(key)
            if found is not None:
                self._recent.move_to_end(key)
                return Ready(found)
            coming = self._coming.get(key)
        return coming if coming is not None else self._pool.submit(self.get, text, code)

    def foresee(self, texts: Sequence[str], codes: Iterable[int]) -> None:
        """Start embedding ``texts`` in each space of ``codes`` on the pool (after what was
        submitted before): on 2 cores the model runs for a rewording beside BM25 and the scan
        instead of after the pool is ranked. Whichever thread runs it, the vector is the same."""
        for code in codes:
            model = self._model_of(code)
            for text in texts:
                key = (model, text)
                with self._lock:
                    if key not in self._recent and key not in self._coming:
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

    def _foreseen(self, key: tuple[str, str], text: str) -> SpaceQuery:
        try:
            return self._embedded(key, text)
        finally:
            with self._lock:
                self._coming.pop(key, None)

    def _embedded(self, key: tuple[str, str], text: str) -> SpaceQuery:
        embedder = self.models.embedder(key[0])
        vector = embed_query(embedder, text)
        vector.setflags(write=False)  # shared by every recall of the same words
        made = SpaceQuery(vector, embedder.cosine_background)
        with self._lock:
            self._recent[key] = made
            while len(self._recent) > RECENT_QUERIES:
                self._recent.popitem(last=False)
        return made
