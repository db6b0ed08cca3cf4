"""The query pool's hand-offs: a task queue read by a few threads, and a task read like a Future.

A recall hands its query's model run to the pool and waits for the vector; the pool's thread
hands it back. Through ``concurrent.futures`` that was ~0.12 ms of CPU a one-chat 1k recall
over stdio, across the threads, with their caches cold after the model's runs: ``submit`` 30 us
(a Future with its condition and reentrant lock, a work item, the executor's idle-thread
semaphore), ``result`` 62 us (the condition's wait: a lock made per waiter, the reentrant
lock released and taken again) and ``set_result`` 16 us a call, twice a recall (thread CPU
wrappers in a live server). Here a task is one plain lock its waiters block on until the
result is in, and the threads read a ``SimpleQueue``. The same states and answers as a
``concurrent.futures.Future`` where the query pool reads them: a task still queued can be
cancelled (and then is never run), a running one cannot; after ``shutdown`` nothing more is
taken, and what was queued still runs.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import CancelledError
from queue import SimpleQueue
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_PENDING, _RUNNING, _FINISHED, _CANCELLED = range(4)


class Task(Generic[T]):
    """One task's outcome, read as a ``concurrent.futures.Future``'s is."""

    __slots__ = ("_error", "_finished", "_lock", "_state", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the state
        self._finished = threading.Lock()  # held until the task finished or was cancelled
        self._finished.acquire()
        self._state = _PENDING
        self._value: T | None = None
        self._error: BaseException | None = None

    def cancel(self) -> bool:
        """Cancel the task if it has not started; True if it is (now) cancelled."""
        with self._lock:
            if self._state == _PENDING:
                self._state = _CANCELLED
                self._finished.release()
            return self._state == _CANCELLED

    def set_running_or_notify_cancel(self) -> bool:
        """Mark the task running; False if it was cancelled (it is then not to run)."""
        with self._lock:
            if self._state == _CANCELLED:
                return False
            self._state = _RUNNING
            return True

    def set_result(self, value: T) -> None:
        self._finish(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._finish(None, error)

    def _finish(self, value: T | None, error: BaseException | None) -> None:
        with self._lock:
            if self._state in (_FINISHED, _CANCELLED):
                raise RuntimeError("a task finishes once")
            self._value, self._error, self._state = value, error, _FINISHED
            self._finished.release()

    def done(self) -> bool:
        return self._state in (_FINISHED, _CANCELLED)

    def result(self, timeout: float | None = None) -> T:
        if self._state not in (_FINISHED, _CANCELLED):
            if not self._finished.acquire(timeout=-1 if timeout is None else timeout):
                raise TimeoutError
            self._finished.release()  # for the task's other waiters
        if self._state == _CANCELLED:
            raise CancelledError
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set with the state


class Pool:
    """``threads`` threads (started with the first task) running tasks in the order given."""

    def __init__(self, threads: int, name: str) -> None:
        self._size, self._name = threads, name
        self._queue: SimpleQueue[tuple[Task[Any], Callable[..., Any], tuple[Any, ...]] | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, function: Callable[..., T], *args: Any) -> Task[T]:
        task: Task[T] = Task()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new tasks after shutdown")
            if not self._threads:
                _shut_down_at_exit(self)
                for n in range(self._size):
                    thread = threading.Thread(target=self._work, name=f"{self._name}_{n}")
                    thread.start()
                    self._threads.append(thread)
            self._queue.put((task, function, args))
        return task

    def shutdown(self) -> None:
        """Take no more tasks; the queued ones still run, then the threads end (waited for)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            task, function, args = item
            if not task.set_running_or_notify_cancel():
                continue
            try:
                result = function(*args)
            except BaseException as error:  # noqa: BLE001 - handed to the waiter, as a Future's is
                task.set_exception(error)
            else:
                task.set_result(result)
            del item, task, function, args  # nothing of a finished task is kept until the next


def _shut_down_at_exit(pool: Pool) -> None:
    """Shut ``pool`` down when the interpreter exits, before it waits for its threads (as
    ``concurrent.futures`` does): a task under way finishes first. A daemon thread still inside
    onnxruntime's run when the interpreter finalizes is ended as it takes the GIL back, inside
    C++ frames, which aborts the process."""
    kept = weakref.ref(pool)

    def shut_down() -> None:
        if (alive := kept()) is not None:
            alive.shutdown()

    threading._register_atexit(shut_down)  # type: ignore[attr-defined]  # the hook concurrent.futures uses
