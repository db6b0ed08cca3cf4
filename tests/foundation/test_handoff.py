"""The query pool's tasks (``engines/embedded/handoff.py``) answer as ``concurrent.futures`` does
where the query pool reads them: order, cancellation, errors, shutdown."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import CancelledError

import pytest

from atlas_mcp.engines.embedded.handoff import Pool, Task


def test_tasks_run_in_order_and_hand_back_results_and_errors() -> None:
    pool = Pool(1, "test-handoff")
    try:
        seen: list[int] = []
        tasks = [pool.submit(seen.append, n) for n in range(5)]
        failed = pool.submit(int, "not a number")
        assert [t.result(timeout=10) for t in tasks] == [None] * 5 and seen == [0, 1, 2, 3, 4]
        with pytest.raises(ValueError):
            failed.result(timeout=10)
        assert failed.done() and all(t.done() for t in tasks)
    finally:
        pool.shutdown()


def test_a_queued_task_cancelled_never_runs_and_a_running_one_cannot_be_cancelled() -> None:
    pool = Pool(1, "test-handoff")
    gate, started, ran = threading.Event(), threading.Event(), []
    try:
        running = pool.submit(lambda: (started.set(), gate.wait(10)))
        queued = pool.submit(ran.append, "queued")
        started.wait(10)
        assert not running.cancel() and queued.cancel() and queued.cancel()
        gate.set()
        running.result(timeout=10)
        with pytest.raises(CancelledError):
            queued.result(timeout=10)
        pool.submit(ran.append, "after").result(timeout=10)
        assert ran == ["after"]
    finally:
        gate.set()
        pool.shutdown()


def test_a_task_times_out_waiting_and_many_threads_may_wait() -> None:
    task: Task[int] = Task()
    with pytest.raises(TimeoutError):
        task.result(timeout=0.01)
    got: list[int] = []
    waiters = [threading.Thread(target=lambda: got.append(task.result(timeout=10))) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    assert task.set_running_or_notify_cancel()
    task.set_result(7)
    for waiter in waiters:
        waiter.join(10)
    assert got == [7, 7, 7] and task.result() == 7
    with pytest.raises(RuntimeError):
        task.set_result(8)


def test_shutdown_runs_what_was_queued_and_takes_nothing_more() -> None:
    pool = Pool(2, "test-handoff")
    gate = threading.Event()
    blocked = [pool.submit(gate.wait, 10) for _ in range(2)]
    queued = pool.submit(lambda: "ran")
    closing = threading.Thread(target=pool.shutdown)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # waiting for the queued tasks
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)
    gate.set()
    closing.join(10)
    assert not closing.is_alive() and queued.result(timeout=1) == "ran" and all(b.result() for b in blocked)


def test_a_task_under_way_at_exit_finishes_before_the_interpreter_does(tmp_path) -> None:
    """A process that exits without shutting its pool down still lets a running task finish
    (a model run cut off at finalization aborts the process), and does not hang."""

    script = tmp_path / "exit.py"
    script.write_text(
        "import threading, time\n"
        "from atlas_mcp.engines.embedded.handoff import Pool\n"
        "started = threading.Event()\n"
        "def run():\n"
        "    started.set(); time.sleep(0.5); print('finished', flush=True)\n"
        "pool = Pool(1, 'test-exit')\n"
        "pool.submit(run)\n"
        "started.wait()\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "finished"
