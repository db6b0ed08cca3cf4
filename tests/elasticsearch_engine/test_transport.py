"""The real elasticsearch 9.x client against the loopback fake: what goes over the wire.

Asserts paths, which credential each request carries, refresh flags, bulk framing, and how
every failure mode maps to an atlas error (with retries only where they are safe).
"""

from __future__ import annotations

import json
import socket

import pytest

from atlas_mcp.domain.model import MemoryType
from atlas_mcp.engines.base import ListQuery
from atlas_mcp.errors import BackendUnavailable, ConfigurationError, Conflict
from atlas_mcp.service import MemoryService

from .fake_es import ADMIN, SILENT_S, WRITER_KEY
from .harness import bootstrapped_engine, es_config


def user_key_id(engine, user: str) -> str:
    return engine.keys.stored()[user].id


def test_reads_carry_the_callers_key_and_writes_the_writers(es_engine, fake_es):
    service = MemoryService(es_engine)
    mine = service.write("u1", "u1 parks the car in bay 7")
    service.write("u2", "u2 parks the car in bay 9")
    fake_es.requests.clear()
    assert [h.memory.id for h in service.recall("u1", "where is the car parked", min_relevance=0.0)] == [
        mine.id
    ]
    service.recall("u2", "where is the car parked")
    searches = fake_es.requests_to("POST", r"/_search$")
    assert {r.auth for r in searches} == {
        ("apikey", user_key_id(es_engine, "u1")),
        ("apikey", user_key_id(es_engine, "u2")),
    }
    bulks = fake_es.requests_to(None, r"^/_bulk$")
    assert bulks and {r.auth for r in bulks} == {("apikey", WRITER_KEY[0])}, (
        "writes must never use a user key"
    )


def test_every_request_asks_for_the_9x_api(es_engine, fake_es):
    MemoryService(es_engine).recall("u1", "anything")
    for request in fake_es.requests:
        assert "compatible-with=9" in request.headers["accept"]


def test_supersession_is_one_conditional_bulk_with_refresh(es_engine, fake_es):
    service = MemoryService(es_engine)
    old = service.write("u1", "The user's car is blue")
    fake_es.requests.clear()
    new = service.write("u1", "The user's car is red", supersedes_id=old.id)
    bulk, trail = fake_es.requests_to("PUT", r"^/_bulk$")  # the write, then its audit entries
    assert bulk.query["refresh"] == "true" and trail.query["refresh"] == "false"
    assert [line["index"]["_index"] for line in trail.ndjson()[::2]] == [es_engine.layout.state_alias] * 2
    assert bulk.headers["content-type"].startswith("application/vnd.elasticsearch+x-ndjson")
    assert bulk.body.endswith(b"\n") and all(json.loads(line) for line in bulk.body.splitlines())
    create, source, update, doc = bulk.ndjson()
    assert create["create"]["_id"] == new.id and create["create"]["_index"] == es_engine.layout.alias(
        MemoryType.SEMANTIC
    )
    assert source["user_id"] == "u1" and source["supersedes"] == [old.id]
    assert update["update"]["_id"] == old.id and {"if_seq_no", "if_primary_term"} <= update["update"].keys()
    # The old fact's validity closes where the new one's starts.
    assert doc == {
        "doc": {
            "superseded_by": new.id,
            "superseded_at": source["created_at"],
            "valid_to": source["valid_from"],
        }
    }
    proofs = fake_es.requests_to("POST", r"^/_mget$")
    assert proofs and {p.auth for p in proofs} == {("apikey", user_key_id(es_engine, "u1"))}, (
        "ownership is proven with the user's key"
    )


def test_refresh_mode_is_configurable(fake_es, tmp_path):
    engine = bootstrapped_engine(fake_es, tmp_path / "keys.json", refresh="wait_for")
    MemoryService(engine).write("u1", "a fact")
    bulk, _trail = fake_es.requests_to("PUT", r"^/_bulk$")  # the write, then its audit entry
    assert bulk.query["refresh"] == "wait_for"


def test_usage_statistics_are_partial_document_updates(es_engine, fake_es):
    service = MemoryService(es_engine)
    fact = service.write("u1", "The user drinks oat milk")
    fake_es.requests.clear()
    service.recall("u1", "oat milk")
    (bulk,) = fake_es.requests_to("PUT", r"^/_bulk$")
    action, doc = bulk.ndjson()
    assert action["update"]["_id"] == fact.id and "if_seq_no" in action["update"]
    assert set(doc) == {"doc"} and set(doc["doc"]) == {"use_count", "last_used_at"}


def test_admin_calls_use_the_user_credential(fake_es, tmp_path):
    bootstrapped_engine(fake_es, tmp_path / "keys.json", users=("sarah",))
    (mint,) = fake_es.requests_to(None, r"^/_security/api_key$")
    assert mint.auth == ("basic", ADMIN[0])


# -- failures --------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cluster_down_is_a_clear_error(es_engine, tmp_path):
    from atlas_mcp.engines.elasticsearch.engine import ElasticsearchEngine
    from atlas_mcp.engines.elasticsearch.transport import Cluster, connect

    config = es_config(f"http://127.0.0.1:{closed_port()}", index_prefix=es_engine.layout.prefix)
    engine = ElasticsearchEngine(Cluster(connect(config), config), es_engine.keys)
    with pytest.raises(BackendUnavailable, match="cannot reach Elasticsearch"):
        MemoryService(engine).recall("u1", "anything")


def test_timeouts_are_retried_for_reads_then_reported(fake_es, tmp_path):
    engine = bootstrapped_engine(fake_es, tmp_path / "keys.json", request_timeout=0.3, max_retries=2)
    fake_es.requests.clear()
    fake_es.fail("POST", r"/_search$", delay=SILENT_S, times=3)
    with pytest.raises(BackendUnavailable, match="did not answer"):
        MemoryService(engine).recall("u1", "anything")
    assert len(fake_es.requests_to("POST", r"/_search$")) == 3


def test_overload_is_retried_honouring_retry_after(es_engine, fake_es):
    fake_es.fail(
        "POST",
        r"/_search$",
        429,
        {"error": {"type": "es_rejected_execution_exception", "reason": "queue full"}},
        headers={"Retry-After": "0"},
    )
    fake_es.requests.clear()
    assert MemoryService(es_engine).recall("u1", "anything") == []
    assert len(fake_es.requests_to("POST", r"/_search$")) == 2


def test_persistent_unavailability_on_a_write_is_reported_after_bounded_retries(es_engine, fake_es):
    fake_es.fail("PUT", r"^/_bulk$", 503, {"error": {"type": "unavailable", "reason": "no master"}}, times=99)
    fake_es.requests.clear()
    with pytest.raises(BackendUnavailable, match="overloaded"):
        MemoryService(es_engine).write("u1", "a fact")
    assert len(fake_es.requests_to("PUT", r"^/_bulk$")) == es_engine.cluster.config.max_retries + 1


def test_an_ambiguous_gateway_error_on_a_write_is_not_retried(es_engine, fake_es):
    fake_es.fail("PUT", r"^/_bulk$", 502, {"error": "bad gateway"}, times=99)
    fake_es.requests.clear()
    with pytest.raises(BackendUnavailable, match="502"):
        MemoryService(es_engine).write("u1", "a fact")
    assert len(fake_es.requests_to("PUT", r"^/_bulk$")) == 1


def test_a_revoked_key_is_a_clear_error(es_engine, fake_es):
    for key in fake_es.keys.values():
        if key.metadata.get("user_id") == "u1":
            key.invalidated = True
    with pytest.raises(ConfigurationError, match="rejected the credential.*users add"):
        MemoryService(es_engine).recall("u1", "anything")


def test_a_user_without_a_key_is_told_how_to_get_one(es_engine):
    with pytest.raises(ConfigurationError, match="atlas-mcp users add zoe"):
        MemoryService(es_engine).recall("zoe", "anything")


def test_a_basic_licence_names_the_feature_and_the_fix(es_engine, fake_es):
    """The reranker's parser checks its licence before its children's (the rrf's)."""
    fake_es.licence = "basic"
    with pytest.raises(ConfigurationError, match=r"licence does not cover text_similarity_reranker.*doctor"):
        MemoryService(es_engine).recall("u1", "anything")


def test_a_missing_inference_endpoint_names_the_setting(es_engine, fake_es):
    fake_es.inference_ids.discard(".jina-reranker-v2-base-multilingual")
    with pytest.raises(ConfigurationError, match="inference endpoint missing.*rerank_inference_id"):
        MemoryService(es_engine).recall("u1", "anything")


def test_missing_indices_point_at_bootstrap(fake_es, tmp_path):
    engine = bootstrapped_engine(fake_es, tmp_path / "keys.json", users=())
    config = engine.cluster.config.model_copy(update={"index_prefix": "never-bootstrapped"})
    from atlas_mcp.engines.elasticsearch.engine import ElasticsearchEngine

    with pytest.raises(ConfigurationError, match="atlas-mcp bootstrap"):
        ElasticsearchEngine(engine.cluster.__class__(engine.cluster.client, config), engine.keys).list(
            ListQuery(None)
        )


def test_an_8x_cluster_is_named(es_engine, fake_es):
    fake_es.fail(
        "POST",
        r"/_search$",
        400,
        {
            "error": {
                "type": "media_type_header_exception",
                "reason": "Accept version must be either version 8 or 7",
            }
        },
    )
    with pytest.raises(ConfigurationError, match="not Elasticsearch 9.x"):
        MemoryService(es_engine).recall("u1", "anything")


def test_a_concurrent_change_to_a_superseded_memory_rolls_the_write_back(es_engine, fake_es):
    service = MemoryService(es_engine)
    old = service.write("u1", "The user's car is blue")
    # another writer changes the old fact between our ownership read and our bulk
    real_handle = fake_es._bulk

    def racing_bulk(who, lines):
        (index,) = [i for i in fake_es.indices.values() if old.id in i.docs]
        index.docs[old.id]["seq_no"] += 1000
        fake_es._bulk = real_handle
        return real_handle(who, lines)

    fake_es._bulk = racing_bulk
    with pytest.raises(Conflict, match="nothing was written"):
        service.write("u1", "The user's car is red", supersedes_id=old.id)
    live = es_engine.list(ListQuery("u1"))
    assert [m.id for m in live] == [old.id] and live[0].superseded_by is None


# -- issue 33 N8: causes wrapped by compound retrievers keep their hint ---------------------------


def test_a_missing_embedding_endpoint_inside_rrf_names_the_setting(es_engine, fake_es):
    """The rrf retriever answers `status_exception: [rrf] search failed - retrievers '[standard,
    standard]' returned errors` with the endpoint's 404 under `suppressed`: read only at the top,
    it was a generic failure without the fix."""
    MemoryService(es_engine).write("u1", "The hub runs firmware 2.1")
    fake_es.inference_ids.discard(".jina-embeddings-v5-text-small")
    with pytest.raises(ConfigurationError, match="inference endpoint missing.*embedding_inference_id"):
        MemoryService(es_engine).recall("u1", "hub firmware")


def test_a_missing_rerank_endpoint_wrapped_by_the_reranker_names_the_setting(es_engine, fake_es):
    """The rank phase's failure comes back as a 500 `status_exception` whose suppressed
    `search_phase_execution_exception` is caused by the endpoint's 404."""
    MemoryService(es_engine).write("u1", "The hub runs firmware 2.1")
    fake_es.inference_ids.discard(".jina-reranker-v2-base-multilingual")
    with pytest.raises(ConfigurationError, match="inference endpoint missing.*rerank_inference_id"):
        MemoryService(es_engine).recall("u1", "hub firmware")


# -- issue 33 N11: inference needs its licence, except on EIS ------------------------------------


def test_an_ml_node_endpoint_below_enterprise_refuses_writes_with_the_licence_named(fake_es, tmp_path):
    """`semantic_text` ingest calls the inference API: on Platinum an `elasticsearch`-service
    endpoint (ELSER, E5) fails every write, reranked or not."""
    fake_es.inference_ids.add(".multilingual-e5-small-elasticsearch")
    engine = bootstrapped_engine(
        fake_es,
        tmp_path / "keys.json",
        embedding_inference_id=".multilingual-e5-small-elasticsearch",
        rerank_inference_id="",
    )
    fake_es.licence = "platinum"
    with pytest.raises(
        ConfigurationError, match=r"licence does not cover inference.*Elastic Inference Service"
    ):
        MemoryService(engine).write("u1", "The hub runs firmware 2.1")
    assert engine.list(ListQuery("u1")) == []
