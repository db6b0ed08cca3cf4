"""Storage engines. ``open_engine`` is the only place that chooses one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Candidate, Engine, EngineInfo, RecallPlan

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["Candidate", "Engine", "EngineInfo", "RecallPlan", "open_engine"]


def open_engine(settings: Settings) -> Engine:
    if settings.backend == "embedded":
        from ..inference.embedder import open_models
        from .embedded.cipher import configured_key
        from .embedded.engine import EmbeddedEngine

        key = configured_key(settings)  # checked before the models load: a wrong key fails fast
        models = open_models(settings.embedding.model, settings.embedding.threads)
        return EmbeddedEngine(settings.database_path, models, settings.embedding.threads, key)
    if settings.backend == "elasticsearch":
        from .elasticsearch.engine import open_elasticsearch_engine

        return open_elasticsearch_engine(settings)
    from ..errors import ConfigurationError

    raise ConfigurationError(f"backend {settings.backend!r} is not available in this build")
