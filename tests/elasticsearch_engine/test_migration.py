"""Indices of an older atlas-mcp (v1 mapped dates as ``date_nanos``) are named, refused with the
fix, and moved to this version's mappings by ``bootstrap --migrate`` (issue 33 N1)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from atlas_mcp.cli import cli
from atlas_mcp.domain.model import Memory, MemoryType, iso, new_id
from atlas_mcp.engines.base import ListQuery
from atlas_mcp.engines.elasticsearch import admin, migration
from atlas_mcp.engines.elasticsearch import documents as docs
from atlas_mcp.engines.elasticsearch.engine import ElasticsearchEngine
from atlas_mcp.engines.elasticsearch.keys import KeyStore
from atlas_mcp.engines.elasticsearch.layout import ALL_TYPES, IndexLayout
from atlas_mcp.engines.elasticsearch.mappings import mapping, state_mapping
from atlas_mcp.engines.elasticsearch.transport import Cluster, connect
from atlas_mcp.errors import BackendUnavailable, ConfigurationError
from atlas_mcp.service import MemoryService

from .harness import es_config, fresh_prefix
from .test_cli import es_env

INFERENCE = ".jina-embeddings-v5-text-small"


def legacy_mapping(kind: MemoryType | None, inference_id: str = INFERENCE) -> dict:
    """What atlas-mcp's v1 indices mapped: created_at and timeline_at as date_nanos."""
    body = mapping(kind, inference_id) if kind is not None else state_mapping()
    properties = dict(body["properties"])
    if kind is not None:
        for derived in ("created_us", "timeline_us"):
            del properties[derived]
        properties |= {"created_at": {"type": "date_nanos"}, "timeline_at": {"type": "date_nanos"}}
    return {**body, "properties": properties}


def legacy_source(memory: Memory) -> dict:
    source = docs.to_source(memory)
    del source["created_us"], source["timeline_us"]
    return source | {"timeline_at": iso(memory.occurred_at or memory.created_at)}


@pytest.fixture
def legacy(fake_es, tmp_path):
    """A v1 deployment with memories in it, and the user keys it had."""
    config = es_config(fake_es.url, index_prefix=fresh_prefix())
    old = IndexLayout(config.index_prefix, version=1)
    admin_cluster = Cluster(connect(config, admin=True), config)
    for kind in ALL_TYPES:
        admin_cluster.client.indices.create(
            index=old.concrete(kind),
            mappings=legacy_mapping(kind),
            aliases={old.alias(kind): {"is_write_index": True}},
        )
    admin_cluster.client.indices.create(
        index=old.state_concrete,
        mappings=legacy_mapping(None),
        aliases={old.state_alias: {"is_write_index": True}},
    )
    at = datetime(2024, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    memories = [
        Memory(
            new_id(),
            MemoryType.EPISODIC,
            "u1",
            "Ran the Lisbon half marathon",
            at,
            datetime(1999, 6, 1, tzinfo=UTC),
        ),
        Memory(new_id(), MemoryType.SEMANTIC, "u1", "The hub runs firmware 2.1", at),
        Memory("cat-zigbee", MemoryType.CATALOG, None, "Zigbee channel 25 avoids wifi", at, title="Zigbee"),
    ]
    operations = []
    for memory in memories:
        operations += [
            {"index": {"_index": old.alias(memory.memory_type), "_id": memory.id}},
            legacy_source(memory),
        ]
    operations += [
        {"index": {"_index": old.state_alias, "_id": "u1\u001fwatermark"}},
        {"user_id": "u1", "key": "watermark", "value": "x", "updated_at": iso(at)},
    ]
    writer = Cluster(connect(config), config)
    assert not writer.client.bulk(operations=operations, refresh="true")["errors"]
    keys = KeyStore(tmp_path / "keys.json")
    admin.add_user(admin_cluster, keys, IndexLayout(config.index_prefix), "u1", None)
    engine = ElasticsearchEngine(writer, keys)
    yield engine, admin_cluster, memories
    admin_cluster.close()
    engine.close()


def test_old_indices_are_named_with_the_fix_and_migrated(legacy, fake_es):
    engine, admin_cluster, memories = legacy
    layout = engine.layout
    service = MemoryService(engine)
    with pytest.raises(ConfigurationError, match="bootstrap --migrate"):
        service.write("u1", "Parents married", "episodic", occurred_at=datetime(1965, 5, 1, tzinfo=UTC))
    with pytest.raises(ConfigurationError, match="bootstrap --migrate"):
        engine.list(ListQuery("u1"))
    report = admin.bootstrap(admin_cluster, layout, INFERENCE)
    assert len(report) == 5 and all(line.startswith("outdated") and "--migrate" in line for line in report)

    migrated = migration.migrate(admin_cluster, layout, INFERENCE)
    assert len(migrated) == 5 and all("migrated" in line for line in migrated)
    assert fake_es.aliases[layout.alias(MemoryType.SEMANTIC)] == layout.concrete(MemoryType.SEMANTIC)
    assert f"{layout.prefix}-semantic-v1" in fake_es.indices, "the old index is kept for the operator"
    listed = engine.list(ListQuery("u1"))
    assert {m.id for m in listed} == {memories[0].id, memories[1].id}
    assert listed[0].created_at == memories[0].created_at, "microseconds survive the copy"
    assert engine.get_state("u1", "watermark") == "x"
    sixties = service.write("u1", "Parents married", "episodic", occurred_at=datetime(1965, 5, 1, tzinfo=UTC))
    assert [m.id for m in engine.list(ListQuery("u1"))][-1] == sixties.id
    hits = service.recall("u1", "hub firmware", touch=False)
    assert hits[0].memory.id == memories[1].id
    assert migration.migrate(admin_cluster, layout, INFERENCE) == []
    assert all(line.startswith("exists") for line in admin.bootstrap(admin_cluster, layout, INFERENCE))


def test_a_write_during_the_copy_stops_the_swap(legacy, fake_es):
    engine, admin_cluster, _ = legacy
    layout = engine.layout
    real = fake_es._bulk

    def write_behind(who, lines):
        target = next(iter(lines[0].values()))["_index"]
        if target == layout.concrete(MemoryType.SEMANTIC):  # copying: a server writes to the old index
            fake_es._bulk = real
            late = Memory(new_id(), MemoryType.SEMANTIC, "u1", "written while copying", datetime.now(UTC))
            real(
                fake_es.writer,
                [
                    {"index": {"_index": layout.alias(MemoryType.SEMANTIC), "_id": late.id}},
                    legacy_source(late),
                ],
            )
        return real(who, lines)

    fake_es._bulk = write_behind
    with pytest.raises(BackendUnavailable, match="nothing was swapped"):
        migration.migrate(admin_cluster, layout, INFERENCE)
    assert fake_es.aliases[layout.alias(MemoryType.SEMANTIC)] == f"{layout.prefix}-semantic-v1"
    migration.migrate(admin_cluster, layout, INFERENCE)  # again, with the servers stopped
    assert len(engine.list(ListQuery("u1"))) == 3


def test_the_cli_migrates_and_its_dry_run_sends_nothing(legacy, fake_es, tmp_path, monkeypatch):
    engine, _, _ = legacy
    for key, value in es_env(fake_es.url, tmp_path / "data", prefix=engine.layout.prefix).items():
        monkeypatch.setenv(key, value)
    fake_es.requests.clear()
    planned = CliRunner().invoke(cli, ["bootstrap", "--migrate", "--dry-run"])
    assert planned.exit_code == 0 and "_aliases" in planned.output and fake_es.requests == []
    assert "date_nanos" not in planned.output
    done = CliRunner().invoke(cli, ["bootstrap", "--migrate"])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert sum(line.startswith("migrated ") for line in lines) == 5 and "outdated" not in done.output
    again = CliRunner().invoke(cli, ["bootstrap", "--migrate"]).output.splitlines()
    assert sum(line.startswith("exists ") for line in again) == 5 and "nothing to migrate" in again


TIME_FIELDS = ("about", "valid_from", "valid_to", "expires_at")  # what v3 adds to v2


@pytest.fixture
def v2_deployment(fake_es, tmp_path):
    """A v2 deployment (strict mappings without the fields of valid time and expiry) with a fact."""
    config = es_config(fake_es.url, index_prefix=fresh_prefix())
    old = IndexLayout(config.index_prefix, version=2)
    admin_cluster = Cluster(connect(config, admin=True), config)
    for kind in ALL_TYPES:
        body = mapping(kind, INFERENCE)
        properties = {k: v for k, v in body["properties"].items() if k not in TIME_FIELDS}
        admin_cluster.client.indices.create(
            index=old.concrete(kind),
            mappings={**body, "properties": properties},
            aliases={old.alias(kind): {"is_write_index": True}},
        )
    admin_cluster.client.indices.create(
        index=old.state_concrete,
        mappings=state_mapping(),
        aliases={old.state_alias: {"is_write_index": True}},
    )
    leeds = Memory(
        new_id(), MemoryType.SEMANTIC, "u1", "The user lives in Leeds.", datetime(2025, 1, 5, tzinfo=UTC)
    )
    source = {k: v for k, v in docs.to_source(leeds).items() if k not in TIME_FIELDS}
    writer = Cluster(connect(config), config)
    operations = [{"index": {"_index": old.alias(MemoryType.SEMANTIC), "_id": leeds.id}}, source]
    assert not writer.client.bulk(operations=operations, refresh="true")["errors"]
    keys = KeyStore(tmp_path / "keys.json")
    admin.add_user(admin_cluster, keys, IndexLayout(config.index_prefix), "u1", None)
    engine = ElasticsearchEngine(writer, keys)
    yield engine, admin_cluster, leeds
    admin_cluster.close()
    engine.close()


def test_v2_indices_refuse_valid_time_until_migrated_to_v3(v2_deployment, fake_es):
    """A fact carries ``valid_from``, which a v2 index's strict mapping refuses: the write names
    the fix, nothing is stored, and after ``--migrate`` the old fact is valid from its writing."""
    engine, admin_cluster, leeds = v2_deployment
    layout = engine.layout
    service = MemoryService(engine)
    with pytest.raises(ConfigurationError, match="bootstrap --migrate"):
        service.write("u1", "The user drives a Kia Niro.")
    assert [m.id for m in engine.list(ListQuery("u1"))] == [leeds.id]
    assert all("outdated" in line for line in admin.bootstrap(admin_cluster, layout, INFERENCE))
    assert len(migration.migrate(admin_cluster, layout, INFERENCE)) == 5
    assert f"{layout.prefix}-semantic-v2" in fake_es.indices, "the old index is kept for the operator"
    glasgow = service.write(
        "u1", "The user lives in Glasgow.", about="home city", valid_from="2026-02-01T00:00:00Z"
    )
    then = service.recall(
        "u1", "where does the user live", min_relevance=0, touch=False, as_of="2025-06-01T00:00:00Z"
    )
    assert [h.memory.id for h in then] == [leeds.id]
    now = service.recall("u1", "where does the user live", min_relevance=0, touch=False)
    assert now[0].memory.id == glasgow.id
