"""The cosine scan over many rows, split between the caller and helper threads: the same scores
as one thread, summed in float32 on every CPU, and no thread left burning a core once the scan is
done."""

from __future__ import annotations

import time

import numpy as np
import pytest
import simsimd

from atlas_mcp.domain.similarity import REFERENCE_BACKGROUND
from atlas_mcp.engines.embedded import dense
from atlas_mcp.engines.embedded.dense import SpaceQuery, similarities
from atlas_mcp.engines.embedded.vectors import RowVectors


@pytest.mark.parametrize(
    ("rows", "chunk", "threads"), [(1_000, 7, 2), (1_000, 1_000, 2), (999, 100, 3), (64, 64, 2)]
)
def test_a_scan_on_several_threads_gives_the_scores_of_one(monkeypatch, rows, chunk, threads):
    """Every row's score is the one a single-threaded scan gives it, whatever the chunks (one,
    many, a short last one) and however many threads take them; long memories' extra passages
    are scanned the same way."""
    monkeypatch.setattr(dense, "PARALLEL_SCAN_ROWS", 10)
    monkeypatch.setattr(dense, "SCAN_CHUNK_ROWS", chunk)
    rng = np.random.default_rng(rows + chunk)
    vectors = RowVectors(16)

    def unit(n: int) -> np.ndarray:
        v = rng.normal(size=(n, 16)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    for row in range(rows):
        vectors.append_pending()
        if row % 97 != 5:  # a few rows pending
            vectors.put_passages(row, unit(1 + (row % 40 == 0) * 2), 0)
    query = {0: SpaceQuery(unit(1)[0], REFERENCE_BACKGROUND)}
    one = similarities(vectors, query, 1)
    many = similarities(vectors, query, threads)
    assert many.dtype == one.dtype and many.tolist() == one.tolist()
    matrix = vectors.matrix
    q16 = np.asarray(query[0].vector, dtype=np.float16)[None, :]
    assert dense._dot(q16, matrix, threads).tolist() == dense._dot(q16, matrix, 1).tolist()


def test_no_thread_spins_once_a_parallel_scan_is_done(monkeypatch):
    """The helpers sleep between scans: a thread pool that busy-waits for its next task (as
    SimSIMD's OpenMP threads did, ~8 ms of a core after each 100k-row scan) would take the
    core the rest of a recall and the client need."""
    monkeypatch.setattr(dense, "PARALLEL_SCAN_ROWS", 1_000)
    matrix = np.random.default_rng(5).standard_normal((20_000, 384)).astype(np.float16)
    q16 = matrix[:1].copy()
    for _ in range(3):
        dense._dot(q16, matrix, 2)
    idle = []
    for _ in range(3):
        dense._dot(q16, matrix, 2)
        before = time.process_time()
        time.sleep(0.1)
        idle.append(time.process_time() - before)
    assert min(idle) < 0.002, idle  # the process's CPU while it sleeps, every thread counted


def test_the_scan_sums_in_float32_on_every_cpu():
    """Each cosine is the float32 sum of its float16 products, whichever kernel the CPU gets:
    SimSIMD's AVX512-FP16 kernel (Sapphire Rapids) sums in float16, which moved cosines by up to
    5e-4 and turned a user's memory and a catalog entry with the same words into a tie the
    catalog won. The same floats as the float64 sum to float32's precision."""
    rng = np.random.default_rng(11)
    matrix = rng.standard_normal((500, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix16 = matrix.astype(np.float16)
    query16 = (0.8 * matrix[0] + 0.6 * matrix[1]).astype(np.float16)[None, :]
    exact = matrix16.astype(np.float64) @ query16[0].astype(np.float64)
    scores = dense._dot(query16, matrix16, 1)
    assert np.max(np.abs(scores - exact)) < 2e-6
    assert not any(simsimd.get_capabilities().get(kernel) for kernel in dense.HALF_SUMMING_KERNELS)
