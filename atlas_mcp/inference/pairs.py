"""A model session built in the background the first time it is asked for.

MiniLM's pair graph (``minilm_graph.py``) serves recalls that embed a query and a rewording of it;
a store that never rewords a query never builds it (~24 MB resident, ~0.2 s; the first time on
a machine its file is derived too, ~1.5 s). Until it is built, the texts run one by one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..log import get_logger

log = get_logger(__name__)


class LateSession:
    """``ready()``: the session once built, else None (and the build is started)."""

    def __init__(self, build: Callable[[], Any], name: str) -> None:
        self._build = build
        self._name = name
        self._session: Any = None
        self._started = False
        self._lock = threading.Lock()

    def ready(self) -> Any:
        if self._session is None and not self._started:
            with self._lock:
                if not self._started:
                    self._started = True
                    threading.Thread(target=self._building, name=self._name).start()
        return self._session

    def _building(self) -> None:
        try:
            self._session = self._build()
        except Exception as exc:  # noqa: BLE001 - onnxruntime's own types; texts run one by one
            log.warning(
                "could not build a model session; texts run one by one", session=self._name, error=str(exc)
            )
