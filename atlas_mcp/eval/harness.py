"""What every evaluation shares: a throw-away store behind the real service, and a settable clock."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..app import open_service
from ..config import Settings, load_settings
from ..domain.model import new_id, utcnow
from ..engines import open_engine
from ..service import MemoryService


class ManualClock:
    """The service's clock during an evaluation: set to when things happen, ticking per call.

    Each reading advances one millisecond, so memories written in a burst keep their order in
    ``created_at`` as they would in real use.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or utcnow()

    def set(self, when: datetime) -> None:
        self._now = when

    def __call__(self) -> datetime:
        self._now += timedelta(milliseconds=1)
        return self._now


@contextmanager
def scratch_service(
    settings: Settings | None = None, **overrides: Any
) -> Iterator[tuple[MemoryService, ManualClock]]:
    """A service over a fresh store, so an evaluation never touches real memories.

    ``overrides`` are settings fields (e.g. ``scoring=ScoringPolicy(...)``). The embedded store
    lives in a temporary directory, removed afterwards; on Elasticsearch the indices get a
    fresh ``<prefix>-eval-<hex>`` prefix (left in the cluster for inspection: delete them
    when done).
    """
    with tempfile.TemporaryDirectory(prefix="atlas-eval-") as tmp, ExitStack() as stack:
        base = settings.model_dump() if settings is not None else {}
        scratch: dict[str, Any] = {"data_dir": Path(tmp)}
        if base.get("backend") == "elasticsearch":
            es = base["elasticsearch"]
            scratch["elasticsearch"] = es | {"index_prefix": f"{es['index_prefix']}-eval-{new_id()[:8]}"}
        merged = load_settings(**(base | overrides | scratch))
        clock = ManualClock()
        engine = open_engine(merged)
        service = open_service(merged, clock=clock, engine=engine)
        stack.callback(service.close)
        if merged.backend == "elasticsearch":
            _scratch_cluster(stack, merged, engine)
        yield service, clock


def _scratch_cluster(stack: ExitStack, settings: Settings, engine: Any) -> None:
    """Bootstrap the scratch prefix and mint each evaluated user's key on first use (revoked
    afterwards): the configured keys are scoped to the real prefix and cannot read this one."""
    from ..engines.elasticsearch.admin import scratch_deployment
    from ..engines.elasticsearch.engine import key_store

    keys = engine.keys
    keys.minter = stack.enter_context(scratch_deployment(settings.elasticsearch, key_store(settings)))
    keys.forget_configured()  # [users.<id>] es_api_key is scoped to the real prefix
