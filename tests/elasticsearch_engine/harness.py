"""Wiring for tests: settings pointing at a fake cluster, and a bootstrapped engine with user keys."""

from __future__ import annotations

import itertools
from pathlib import Path

from atlas_mcp.config_tables import ElasticsearchSettings
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.engines.elasticsearch import admin
from atlas_mcp.engines.elasticsearch.engine import ElasticsearchEngine
from atlas_mcp.engines.elasticsearch.keys import KeyStore
from atlas_mcp.engines.elasticsearch.layout import IndexLayout
from atlas_mcp.engines.elasticsearch.transport import Cluster, connect

from .fake_es import ADMIN, WRITER_KEY, FakeElasticsearch, encode_key

USERS = ("u1", "u2", "u3", "alice", "bob", "sarah", "james")
_prefixes = itertools.count(1)


def es_config(url: str, **overrides) -> ElasticsearchSettings:
    values = {
        "url": url,
        "api_key": encode_key(*WRITER_KEY),
        "username": ADMIN[0],
        "password": ADMIN[1],
        "request_timeout": 5.0,
        "retry_backoff": 0.01,
        "max_retry_wait": 0.05,
    } | overrides
    return ElasticsearchSettings(**values)


def fresh_prefix() -> str:
    return f"t{next(_prefixes)}"


def bootstrapped_engine(
    fake: FakeElasticsearch, key_file: Path, users=USERS, policy: ScoringPolicy | None = None, **overrides
) -> ElasticsearchEngine:
    """Indices created and one DLS key per user minted, all through the real admin code."""
    config = es_config(fake.url, index_prefix=overrides.pop("index_prefix", fresh_prefix()), **overrides)
    layout = IndexLayout(config.index_prefix)
    keys = KeyStore(key_file)
    admin_cluster = Cluster(connect(config, admin=True), config)
    try:
        admin.bootstrap(admin_cluster, layout, config.embedding_inference_id)
        for user in users:
            admin.add_user(admin_cluster, keys, layout, user, None)
    finally:
        admin_cluster.close()
    return ElasticsearchEngine(Cluster(connect(config), config), keys, policy)


_contract_cluster: FakeElasticsearch | None = None


def fake_cluster_engine(tmp_path: Path) -> ElasticsearchEngine:
    """For tests/contract: one fake cluster per process whose ``semantic_text`` endpoint is the
    real MiniLM embedder, and a fresh index prefix (so a fresh store) per call."""
    global _contract_cluster
    if _contract_cluster is None:
        from atlas_mcp.inference.embedder import default_embedder

        _contract_cluster = FakeElasticsearch(embed=default_embedder().embed_batch).start()
    return bootstrapped_engine(_contract_cluster, tmp_path / "es-keys.json")
