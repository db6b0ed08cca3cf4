"""Composition root: turns settings into a ready MemoryService (engine, reranker, policy)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from .config import Settings
from .domain.model import utcnow
from .engines import Engine, open_engine
from .inference.reranker import open_reranker
from .inference.runtime import limit_blas_threads
from .service import MemoryService


def open_service(
    settings: Settings, clock: Callable[[], datetime] = utcnow, engine: Engine | None = None
) -> MemoryService:
    """The service the settings describe, over ``engine`` when the caller opened it already."""
    limit_blas_threads()
    engine = engine or open_engine(settings)
    reranker = open_reranker(
        settings.scoring, settings.rerank.model_dir, settings.rerank.candidates, settings.embedding.threads
    )
    return MemoryService(engine, settings.scoring, settings.limits, reranker, clock, settings.guard)
