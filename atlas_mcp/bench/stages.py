"""Where a recall's CPU goes: each stage's CPU time per recall, in process, on a seeded store.

The MCP numbers say what a client feels; this says which stage to work on. Each stage is a
function of the recall path, wrapped for the run so that it adds the CPU time of the thread
running it (``time.thread_time``) to its stage, minus the stages it calls itself: the stages
never count a microsecond twice, and the query embedding, which runs on its own thread beside
BM25, is counted where it runs. What no stage claims (the service's glue, the recall plan,
the Python around the calls) is "other"; the JSON-RPC framing and tool validation around a
recall are the difference between this total and the server CPU the stdio client measured.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import wraps
from pathlib import Path
from typing import Any
from unittest import mock

from .. import views
from ..app import open_service
from ..config import load_settings
from ..domain import calibration, hearing, ranking
from ..engines.embedded import engine, pending, query_vectors, search
from ..inference import reranker

# (stage, owner of the function, its name), in the order a recall meets them.
STAGES: tuple[tuple[str, Any, str], ...] = (
    ("pending rows", pending.DeferredEmbeddings, "settle"),
    ("query embedding", query_vectors, "embed_query"),
    # a query and its foreseen rewording in one model run (``QueryVectors.start``)
    ("query embedding", query_vectors.QueryVectors, "_together"),
    ("BM25", search.Search, "_bm25"),
    ("dense scan", search, "scan"),  # called by its module name: patched there
    ("fusion", search, "fused_keys"),
    ("memory load", search.Search, "_load"),
    ("candidate evidence", search.Search, "_candidates"),
    ("pool columns", ranking, "pool_of"),
    ("perspective", hearing, "from_their_side"),
    ("context rerank", reranker.ContextReranker, "match"),
    ("time fits", ranking, "window_fits"),
    ("time fits", ranking, "time_fits"),
    ("multipliers", ranking, "factors"),
    ("calibration", calibration, "features"),
    ("calibration", calibration, "calibrated"),
    ("attribute asked", ranking, "setting_what_is_asked"),
    ("resolution", ranking, "resolve"),
    ("hits", ranking, "_hits"),
    ("touch", engine.EmbeddedEngine, "touch"),
    ("result view", views, "recalled_view"),
)


class StageClock:
    """CPU time per stage, exclusive of the stages each one calls (per thread)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._local = threading.local()

    def wrap(self, stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack: list[float] = self._local.__dict__.setdefault("stack", [])
            stack.append(0.0)
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                inner = stack.pop()
                self.seconds[stage] += spent - inner
                if stack:
                    stack[-1] += spent

        return timed

    @contextmanager
    def installed(self) -> Iterator[StageClock]:
        with ExitStack() as stack:
            for stage, owner, name in STAGES:
                timed = self.wrap(stage, getattr(owner, name))
                stack.enter_context(mock.patch.object(owner, name, timed))
            yield self


def profile(
    data_dir: Path,
    user: str,
    queries: Sequence[str],
    warmup: Sequence[str],
    encryption_key: str | None = None,
) -> dict[str, Any]:
    """Recall every query as the tool does (default k and floor, uses recorded, each hit made
    into its view), after ``warmup``; CPU milliseconds per recall by stage."""
    settings = load_settings(data_dir=data_dir, encryption_key=encryption_key)
    service = open_service(settings)
    try:
        service.warm(user)  # as ``serve`` does at start (in the background there)
        service.preload(user, after_first_recall=False)
        for query in warmup:
            _recall(service, user, query)
        clock = StageClock()
        with clock.installed():
            started = time.process_time()
            for query in queries:
                _recall(service, user, query)
            total = time.process_time() - started
    finally:
        service.close()
    per_recall = {stage: s * 1000 / len(queries) for stage, s in clock.seconds.items()}
    other = total * 1000 / len(queries) - sum(per_recall.values())
    ordered = {stage: per_recall.get(stage, 0.0) for stage, _, _ in STAGES} | {"other": other}
    return {
        "recall_cpu_ms": round(total * 1000 / len(queries), 3),
        "stages_ms": {stage: round(ms, 3) for stage, ms in ordered.items()},
    }


def _recall(service: Any, user: str, query: str) -> None:
    for hit in service.recall(user, query):
        views.recalled_view(hit.memory, hit.score, None, hit.relevance)
