"""What every evaluation shares: a throw-away store behind the real service, and a settable clock."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..app import open_service
from ..config import Settings, load_settings
from ..domain.model import utcnow
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
def scratch_service(settings: Settings | None = None, **overrides: Any) -> Iterator[tuple[MemoryService, ManualClock]]:
    """A service over a fresh store in a temporary directory, removed afterwards.

    ``overrides`` are settings fields (e.g. ``scoring=ScoringPolicy(...)``); the data
    directory is always the temporary one, so an evaluation never touches real memories.
    """
    with tempfile.TemporaryDirectory(prefix="atlas-eval-") as tmp:
        base = settings.model_dump() if settings is not None else {}
        merged = load_settings(**(base | overrides | {"data_dir": Path(tmp)}))
        clock = ManualClock()
        service = open_service(merged, clock=clock)
        try:
            yield service, clock
        finally:
            service.close()
