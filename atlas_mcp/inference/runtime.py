"""Process-wide runtime policy for the numeric libraries: BLAS threads and heap trimming.

Recall's only BLAS work is small (pooling an embedding), and a second OpenBLAS thread
busy-waits on the other core after every call, where the ONNX embedder and SQLite need to
run: on the 2-core reference machine one BLAS thread halved recall latency at 10k memories
per user (25 -> 13 ms in process, 33 -> 17 ms through a stdio client).

glibc keeps heap that was freed in the middle of it. Creating the ONNX session frees ~60 MB
that way (the parsed model, and the int8 weights it folds into float32), and a vector-cache
load frees the blocks it read through; without a trim they stay resident for good.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable
from functools import cache

from threadpoolctl import threadpool_limits

BLAS_THREADS = 1


def limit_blas_threads(threads: int = BLAS_THREADS) -> None:
    """Cap every BLAS library loaded in this process (numpy's OpenBLAS, MKL, ...)."""
    threadpool_limits(limits=threads, user_api="blas")


def release_free_heap() -> None:
    """Return freed heap to the operating system (glibc's ``malloc_trim``; elsewhere a no-op)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return getattr(libc, "malloc_trim", None)  # musl has none
