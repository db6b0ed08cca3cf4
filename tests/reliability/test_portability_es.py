"""export from the embedded engine → import into Elasticsearch (the loopback fake cluster) →
export again → import into a fresh embedded store: nothing lost on the way, through ``Engine``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

pytest.importorskip("elasticsearch", reason="the elasticsearch extra is not installed")

from elasticsearch_engine.fake_es import FakeElasticsearch
from elasticsearch_engine.harness import bootstrapped_engine

from atlas_mcp import portability

from .test_portability import _open, build_rich_store, everything


def _export(engine) -> str:
    out = io.StringIO()
    portability.export_memories(engine, out, portability.owners(engine.stats()))
    return out.getvalue()


def _records(path: Path) -> list:
    return portability.read_records(path)


@pytest.fixture
def fake_es():
    fake = FakeElasticsearch().start()
    yield fake
    fake.stop()


def test_embedded_to_elasticsearch_and_back(tmp_path: Path, fake_es: FakeElasticsearch) -> None:
    source = build_rich_store(tmp_path / "source")
    original = everything(source)
    service = _open(source)
    try:
        out = io.StringIO()
        service.export_memories(out, portability.owners(service.stats()))
        (tmp_path / "embedded.jsonl").write_text(out.getvalue())
    finally:
        service.close()

    es = bootstrapped_engine(fake_es, tmp_path / "es-keys.json", users=("sarah", "omar"))
    try:
        report = portability.import_memories(es, _records(tmp_path / "embedded.jsonl"))
        assert report.imported == len(original) and report.re_embedded
        assert {
            m.id: m for o in portability.owners(es.stats()) for m in portability.iter_memories(es, o)
        } == original
        again = portability.import_memories(es, _records(tmp_path / "embedded.jsonl"))
        assert again.skipped == len(original) - 1  # all but the catalog entry, which is upserted
        (tmp_path / "es.jsonl").write_text(_export(es))
    finally:
        es.close()

    lines = [json.loads(line) for line in (tmp_path / "es.jsonl").read_text().splitlines()]
    assert {line["embedding_model"] for line in lines} != {None}
    target = _open(tmp_path / "target")
    try:
        target.import_memories(_records(tmp_path / "es.jsonl"))
    finally:
        target.close()
    assert everything(tmp_path / "target") == original
