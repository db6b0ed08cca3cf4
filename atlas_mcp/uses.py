"""A recall's use of what it returned, recorded after its reply is on the wire.

Recording a use is a write transaction: ~0.25-0.3 ms of a template 1k recall, and about every
250th recall a WAL checkpoint of 7-25 ms inside it. Over stdio (``mcp/beside.py``) a recall hands
it here instead and starts it once its reply is written, on a thread of its own, while the client
reads the reply. Whatever reads or writes memories next settles it first (waits for it, or records
it itself if it has not begun), so every later call sees the use as before.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from .log import get_logger

log = get_logger(__name__)


class Use:
    """One recall's use, recorded once, by whichever thread gets to it first."""

    __slots__ = ("_lock", "_owner", "_record")

    def __init__(self, record: Callable[[], None], owner: Uses) -> None:
        self._record: Callable[[], None] | None = record
        self._owner = owner
        self._lock = threading.Lock()

    def start(self) -> None:
        """Record it on the uses' thread (the recall's reply is written)."""
        self._owner.start(self)

    def record(self) -> None:
        with self._lock:
            record, self._record = self._record, None
            if record is None:
                return
            try:
                record()
            except Exception:  # the reply is out: a use not recorded is logged, as statistics are
                log.exception("use_not_recorded")
            finally:
                self._owner.done(self)


class Uses:
    """The uses recalls handed over and not yet recorded."""

    def __init__(self) -> None:
        self._pending: list[Use] = []
        self._lock = threading.Lock()
        # One thread takes the started uses from a queue: the event loop's part of a start is
        # ~30 us, against ~47 for a pool's submit with its future; None asks it to stop.
        self._started: queue.SimpleQueue[Use | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False

    def later(self, record: Callable[[], None]) -> Use:
        """``record`` as a use to start after the reply (``Use.start``); settled before anything
        reads or writes memories if it has not run by then."""
        use = Use(record, self)
        with self._lock:
            self._pending.append(use)
        return use

    def start(self, use: Use) -> None:
        with self._lock:
            if self._closed:
                thread = None
            elif self._thread is None:
                thread = self._thread = threading.Thread(target=self._record, name="atlas-uses", daemon=True)
                thread.start()
            else:
                thread = self._thread
        if thread is None:  # closed: recorded here
            use.record()
        else:
            self._started.put(use)

    def _record(self) -> None:
        while (use := self._started.get()) is not None:
            use.record()

    def settle(self) -> None:
        """Every use handed over is recorded when this returns (most calls: none is pending)."""
        if not self._pending:
            return
        with self._lock:
            pending = list(self._pending)
        for use in pending:
            use.record()

    def done(self, use: Use) -> None:
        with self._lock:
            self._pending.remove(use)

    def close(self) -> None:
        with self._lock:
            thread, self._thread, self._closed = self._thread, None, True
        if thread is not None:
            self._started.put(None)
            thread.join()
        self.settle()
