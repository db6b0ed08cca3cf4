"""Process-wide thread policy for numpy's BLAS.

Recall's only BLAS work is a matrix-vector product over one owner's vectors, which is
bound by memory bandwidth: a second OpenBLAS thread does not make it faster, but after
every call it busy-waits on the other core, where the ONNX embedder and SQLite need to
run. On the 2-core reference machine one BLAS thread halved recall latency at 10k
memories per user (25 -> 13 ms in process, 33 -> 17 ms through a stdio client).
"""

from __future__ import annotations

from threadpoolctl import threadpool_limits

BLAS_THREADS = 1


def limit_blas_threads(threads: int = BLAS_THREADS) -> None:
    """Cap every BLAS library loaded in this process (numpy's OpenBLAS, MKL, ...)."""
    threadpool_limits(limits=threads, user_api="blas")
