"""The benchmark harness: corpus shape, the bulk loader, and a tiny end-to-end run.

No timing assertions: the smoke run only checks that the report is complete and sane.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from atlas_mcp.bench import corpus, realtext, stages, typescript
from atlas_mcp.bench.seed import memory_vectors
from atlas_mcp.domain.model import MemoryType
from atlas_mcp.engines.base import ListQuery
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.maintenance import write_many
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService

SHARED = Path(__file__).resolve().parents[2].parent / "shared"


def test_stream_is_deterministic_and_prefix_stable():
    assert corpus.specs(7, 300)[:100] == corpus.specs(7, 100)
    assert corpus.specs(7, 100) != corpus.specs(8, 100)


def test_corpus_has_every_type_varied_lengths_and_supersession_chains():
    memories = corpus.tenant_memories(0, corpus.specs(7, 2_000))
    kinds = Counter(m.memory_type for m in memories)
    assert set(kinds) == {MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.PROCEDURAL}
    lengths = sorted(len(m.text) for m in memories)
    assert lengths[-1] > 10 * lengths[len(lengths) // 2]  # a long tail of long notes
    by_id = {m.id: m for m in memories}
    superseded = [m for m in memories if m.superseded_by]
    assert len(superseded) > 20
    for old in superseded:  # every link points at a newer fact of the same tenant that points back
        new = by_id[old.superseded_by]
        assert new.supersedes == (old.id,) and new.created_at >= old.created_at
        assert old.user_id == new.user_id == corpus.tenant_id(0)
    assert all(m.steps for m in memories if m.memory_type is MemoryType.PROCEDURAL)


def test_tenants_share_texts_but_never_ids():
    items = corpus.specs(7, 50)
    first, second = corpus.tenant_memories(0, items), corpus.tenant_memories(1, items)
    assert [m.text for m in first] == [m.text for m in second]
    assert not {m.id for m in first} & {m.id for m in second}


def test_write_many_matches_one_by_one_writes(tmp_path):
    """The bulk path stores exactly what write() stores, and recall ranks both stores alike."""
    memories = corpus.tenant_memories(0, corpus.specs(3, 60))
    embedder = default_embedder()
    bulk = EmbeddedEngine(tmp_path / "bulk.db", embedder)
    single = EmbeddedEngine(tmp_path / "single.db", embedder)
    try:
        write_many(bulk, memories[:30])
        vectors, _ = memory_vectors(embedder, [m.search_text() for m in memories[30:]], None)
        write_many(bulk, memories[30:], vectors)
        for memory in memories:
            single.write(memory)
        user = corpus.tenant_id(0)
        assert bulk.list(ListQuery(user, limit=100)) == single.list(ListQuery(user, limit=100))
        for query in corpus.queries(3, 8):
            hits = [MemoryService(e).recall(user, query, k=10, touch=False) for e in (bulk, single)]
            assert [h.memory.id for h in hits[0]] == [h.memory.id for h in hits[1]]
            assert [h.score for h in hits[0]] == pytest.approx([h.score for h in hits[1]], abs=1e-5)
    finally:
        bulk.close()
        single.close()


@pytest.mark.slow
def test_bench_command_reports_sane_numbers(tmp_path):
    """A tiny real run: seeded store, stdio and HTTP server processes, JSON report (and a plot if possible)."""
    report_file = tmp_path / "bench.json"
    args = [
        "bench", "--memories", "40", "--tenants", "2", "--queries", "10", "--writes", "4",
        "--clients", "2", "--cache-dir", str(tmp_path / "cache"), "--work-dir", str(tmp_path),
        "--json", str(report_file), "--http", "--real-text", "none", "--bursts", "5,20", "--kill-burst", "40",
        "--ts-client",
    ]  # fmt: skip
    try:
        import matplotlib  # noqa: F401

        args += ["--plot", str(tmp_path / "bench.png")]
    except ImportError:
        pass
    result = subprocess.run(
        [sys.executable, "-m", "atlas_mcp", *args], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| memories/tenant |" in result.stdout
    report = json.loads(report_file.read_text())
    assert [s["memories_per_tenant"] for s in report["sizes"]] == [40]
    for size in report["sizes"]:
        assert size["total_memories"] == 2 * size["memories_per_tenant"]
        for key in ("recall_ms", "write_ms", "recall_after_write_ms"):
            stats = size[key]
            assert stats["count"] > 0
            assert 0 < stats["p50"] <= stats["p95"] <= stats["p99"] <= stats["max"]
        assert size["recall_ms"]["count"] == 10 and size["write_ms"]["count"] == 4
        assert size["cold_start_s"] > 0 and size["stdio_recalls_per_s"] > 0 and size["http_recalls_per_s"] > 0
        assert size["http_recall_ms"]["count"] == 10
        assert size["disk_bytes_per_memory"] > 384 * 4  # at least the vector itself
        for mode in ("synchronous_full", "synchronous_normal"):
            assert size["commit_ms"][mode]["p50"] > 0
        assert size.get("recall_server_cpu_ms", 0) >= 0
        assert size.get("recall_server_runqueue_ms", 0) >= 0
        if size["rss_mb"] is not None:  # Linux: read from /proc
            assert 0 < size["rss_mb"] <= size["peak_rss_mb"]
    assert report["conditions"]["cpus"] >= 1
    # the same recalls through the TypeScript client where node and its SDK are installed
    if (reason := typescript.missing(typescript.default_sdk())) is None:
        for size in report["sizes"]:
            ts = size["typescript"]
            assert ts["recall_ms"]["count"] == 10 and 0 < ts["recall_ms"]["p50"] <= ts["recall_ms"]["p95"]
            assert ts["client_cpu_ms"] > 0 and ts.get("recall_server_cpu_ms", 0) >= 0
        assert "TypeScript client, template 40: recall p50" in result.stdout
    else:
        assert f"TypeScript client skipped: {reason}" in result.stderr
        assert all("typescript" not in size for size in report["sizes"])
    assert all(size["recall_client_cpu_ms"] > 0 for size in report["sizes"])
    bursts = report["bursts"]["bursts"]
    assert [b["writes"] for b in bursts] == [5, 20]
    for b in bursts:
        assert b["write_ms"]["count"] == b["writes"] and b["recall_right_after_ms"] > 0
        assert b["acknowledged_per_s"] >= b["writes_per_s_with_embeddings"] > 0
    kill = report["bursts"]["kill"]
    assert kill["burst"] == 40 and kill["pending_at_kill"] >= 0
    assert 0 < kill["initialize_s"] <= kill["start_and_first_recall_s"] <= kill["repair_done_s"]
    assert "kill halfway through 40 writes" in result.stdout
    if "--plot" in args:
        assert (tmp_path / "bench.png").read_bytes().startswith(b"\x89PNG")
    assert not list(tmp_path.glob("atlas-bench-*")), "temporary stores are cleaned up"


def test_real_text_corpus_replicates_locomo_with_renamed_speakers():
    path = SHARED / "eval/data/locomo/locomo10-dev.json"
    if not path.exists():
        pytest.skip("the LoCoMo dev split is read from ../shared, which is absent here")
    text = realtext.read(path)
    items, origin = realtext.specs(text, 2 * len(text.base) + 10)
    assert [i.text for i in items[: len(text.base)]] == [b.text for b in text.base]
    replica = items[len(text.base) :]
    assert sum(r.text != b.text for r, b in zip(replica, text.base, strict=False)) > len(text.base) // 2
    assert origin[len(text.base) + 3] == 3 and len(set(origin)) == len(text.base)
    kinds = Counter(b.kind for b in text.base)
    assert kinds[MemoryType.EPISODIC] and kinds[MemoryType.SEMANTIC]
    assert len(realtext.queries(text, 50, seed=1)) == 50


def test_one_chat_is_locomo_turns_logged_seconds_apart_as_one_episode():
    path = SHARED / "eval/data/locomo/locomo10-dev.json"
    if not path.exists():
        pytest.skip("the LoCoMo dev split is read from ../shared, which is absent here")
    text = realtext.read(path)
    count = len(text.turns) + 50
    items, origin = realtext.one_chat(text, count)
    assert len(items) == count and {i.kind for i in items} == {MemoryType.EPISODIC}
    assert [i.text for i in items[:5]] == [text.base[t].text for t in text.turns[:5]]
    assert all(": " in text.base[t].text for t in text.turns)  # turns, not session summaries
    gaps = [(a.age_days - b.age_days) * 86_400 for a, b in itertools.pairwise(items)]
    assert max(gaps) == pytest.approx(realtext.CHAT_TURN_SECONDS) and min(gaps) > 0  # one episode, in order
    assert origin[len(text.turns)] == text.turns[0] and items[len(text.turns)].text != items[0].text


def test_every_profiled_stage_is_a_function_of_the_recall_path():
    for stage, owner, name in stages.STAGES:
        assert callable(getattr(owner, name, None)), f"{stage}: {owner.__name__}.{name} is gone"


def test_a_stage_counts_its_own_cpu_not_the_stages_it_calls():
    clock = stages.StageClock()

    def spin(seconds: float) -> None:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    inner = clock.wrap("inner", lambda: spin(0.02))
    outer = clock.wrap("outer", lambda: (spin(0.01), inner()))
    outer()
    assert clock.seconds["inner"] == pytest.approx(0.02, abs=0.005)
    assert clock.seconds["outer"] == pytest.approx(0.01, abs=0.005)


def test_the_typescript_client_is_skipped_saying_what_is_missing(tmp_path, monkeypatch):
    assert "install_peers.sh" in (typescript.missing(tmp_path / "sdk") or "")
    monkeypatch.setattr(typescript.shutil, "which", lambda name: None)
    assert typescript.missing(tmp_path / "sdk") == "node is not on PATH"
    assert typescript.default_sdk() == Path(".peers/node/node_modules/@modelcontextprotocol/sdk")


def test_the_wait_for_a_core_is_read_per_thread_from_proc():
    """A process's threads' run-queue wait (``schedstat``), summed: grows, never negative."""
    import os

    from atlas_mcp.bench import measure

    before = measure.runqueue_seconds(os.getpid())
    if before is None:
        pytest.skip("no /proc schedstat here")
    sum(range(2_000_000))
    assert measure.runqueue_seconds(os.getpid()) >= before >= 0
    assert measure.runqueue_seconds(2**31 - 1) is None  # no such process


def test_the_pair_run_of_a_query_and_its_rewording_counts_as_query_embedding(monkeypatch, paired_minilm):
    """The model runs a query with its foreseen rewording in one pair run on the query pool
    (``QueryVectors.start``); the profile counts that run's CPU as the query embedding, not as
    "other": every model run on the query path happens inside a profiled stage."""
    from atlas_mcp.engines.embedded.query_vectors import QueryVectors
    from atlas_mcp.inference.embedder import SingleModel

    embedder = paired_minilm
    clock = stages.StageClock()
    inside: list[bool] = []
    run_pair = embedder.embed_pair

    def watched(first: str, second: str):
        inside.append(bool(clock._local.__dict__.get("stack")))  # a stage is running on this thread
        return run_pair(first, second)

    monkeypatch.setattr(embedder, "embed_pair", watched)
    vectors = QueryVectors(SingleModel(embedder), lambda code: embedder.model_id)
    try:
        with clock.installed():
            vectors.start("When did I go to the support group?", ["When did Caroline go?"], [0])[0].result(30)
    finally:
        vectors.close()
    assert inside == [True]
    assert clock.seconds["query embedding"] > 0
