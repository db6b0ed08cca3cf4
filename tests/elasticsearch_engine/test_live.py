"""Live suite (es-api.md C.2): runs only when ATLAS_ES_URL points at an Elasticsearch 9.x cluster.

    ATLAS_ES_URL=http://localhost:9200 ATLAS_ES_USER=elastic ATLAS_ES_PASSWORD=... \\
    ATLAS_ES_EMBED_ID=my-embeddings ATLAS_ES_RERANK_ID=my-reranker \\
        .venv/bin/python -m pytest tests/elasticsearch_engine/test_live.py -m live_es

Needs a user credential (keys are minted with it, with ``manage_own_api_key`` at least) and an
Enterprise or trial licence. Each test works under its own index prefix and removes its indices
and the keys minted for that prefix afterwards (never another deployment's keys).
Tests 13-20 cover issue 16: each is what the strict fake checks offline, against the real thing.
The licence case downgrades the cluster to Basic and runs only with ATLAS_ES_ALLOW_DOWNGRADE=1.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from atlas_mcp.config_tables import ElasticsearchSettings
from atlas_mcp.domain.model import USER_MEMORY_TYPES, Memory, MemoryType, new_id
from atlas_mcp.domain.multipliers import multipliers
from atlas_mcp.engines.base import ListQuery
from atlas_mcp.engines.elasticsearch import admin
from atlas_mcp.engines.elasticsearch import requests as rq
from atlas_mcp.engines.elasticsearch.doctor import mapping_problems, render, run_checks
from atlas_mcp.engines.elasticsearch.engine import ElasticsearchEngine
from atlas_mcp.engines.elasticsearch.keys import KeyStore
from atlas_mcp.engines.elasticsearch.layout import ALL_TYPES, IndexLayout
from atlas_mcp.engines.elasticsearch.mappings import CONTENT, SEMANTIC, mapping
from atlas_mcp.engines.elasticsearch.scores import describe_endpoint
from atlas_mcp.engines.elasticsearch.transport import Cluster, connect
from atlas_mcp.errors import ConfigurationError
from atlas_mcp.service import MemoryService, RecallQuery

# read at import: the suite-wide fixture clears ATLAS_* (except ATLAS_ES_URL) before each test
LIVE = {
    k: os.environ.get(f"ATLAS_ES_{k}")
    for k in ("URL", "USER", "PASSWORD", "EMBED_ID", "RERANK_ID", "CA_CERTS", "ADMIN_API_KEY")
}
ALLOW_DOWNGRADE = os.environ.get("ATLAS_ES_ALLOW_DOWNGRADE") == "1"

pytestmark = [
    pytest.mark.live_es,
    pytest.mark.skipif(
        not LIVE["URL"], reason="set ATLAS_ES_URL (and ATLAS_ES_USER/PASSWORD) to run the live suite"
    ),
]


def live_settings(**overrides) -> ElasticsearchSettings:
    """The live cluster's settings under a fresh index prefix."""
    return ElasticsearchSettings(
        url=LIVE["URL"],
        username=LIVE["USER"],
        password=LIVE["PASSWORD"],
        ca_certs=LIVE["CA_CERTS"],
        embedding_inference_id=LIVE["EMBED_ID"] or ElasticsearchSettings().embedding_inference_id,
        rerank_inference_id=LIVE["RERANK_ID"] or ElasticsearchSettings().rerank_inference_id,
        index_prefix=f"atlas-live-{uuid.uuid4().hex[:8]}",
        max_retries=1,
    ).model_copy(update=overrides)


class Live:
    def __init__(self, tmp_path, **overrides):
        self.config = live_settings(**overrides)
        self.layout = IndexLayout(self.config.index_prefix)
        self.admin = Cluster(connect(self.config, admin=True), self.config)
        self.keys = KeyStore(tmp_path / "es-keys.json")
        admin.bootstrap(self.admin, self.layout, self.config.embedding_inference_id)
        for user in ("alice", "bob"):
            admin.add_user(self.admin, self.keys, self.layout, user, "1d")
        self.engine = ElasticsearchEngine(Cluster(connect(self.config), self.config), self.keys)
        self.service = MemoryService(self.engine)

    @property
    def es(self):
        return self.admin.client

    def as_user(self, user: str):
        return self.engine.cluster.as_user(self.keys.key_for(user))

    def close(self) -> None:
        for user in ("alice", "bob"):
            admin.revoke_user(self.admin, self.keys, self.layout, user)
        for kind in ALL_TYPES:
            self.es.options(ignore_status=404).indices.delete(index=self.layout.concrete(kind))
        self.es.options(ignore_status=404).indices.delete(index=self.layout.state_concrete)
        self.engine.close()
        self.admin.close()


@pytest.fixture
def live(tmp_path):
    cluster = Live(tmp_path)
    yield cluster
    cluster.close()


def _search(live, body, kinds=ALL_TYPES, user="alice"):
    return live.as_user(user).search(index=live.layout.aliases(tuple(kinds)), body=body)["hits"]["hits"]


# 1 -------------------------------------------------------------------------------------------
def test_indices_round_trip_and_a_bad_mapping_is_refused(live):
    for kind in ALL_TYPES:
        found = live.es.indices.get_mapping(index=live.layout.alias(kind))
        (body,) = found.values()
        assert mapping_problems(mapping(kind, live.config.embedding_inference_id), body["mappings"]) == []
    bad = {"properties": {"n": {"type": "nested", "properties": {"s": {"type": "semantic_text"}}}}}
    with pytest.raises(Exception, match="400|semantic_text"):
        live.es.indices.create(index=f"{live.layout.prefix}-bad", mappings=bad)


# 2 -------------------------------------------------------------------------------------------
def test_ingested_memories_are_searchable_at_once_including_semantically(live):
    fact = live.service.write("alice", "Alice's thermostat is set to nineteen degrees")
    semantic = {"query": {"semantic": {"field": SEMANTIC, "query": "how warm does Alice keep her home"}}}
    assert fact.id in [h["_id"] for h in _search(live, semantic)]


# 3 -------------------------------------------------------------------------------------------
def test_each_branch_then_rrf_then_reranker(live):
    fact = live.service.write("alice", "The garage door opener is a Chamberlain MyQ")
    plan = live.service.recall_plan(RecallQuery("alice", "garage door opener"))
    full = live.engine.recall_request(plan).body
    rrf = full["retriever"]["text_similarity_reranker"]["retriever"]
    for branch in rrf["rrf"]["retrievers"]:
        assert fact.id in [h["_id"] for h in _search(live, {"size": 10, "retriever": branch})]
    assert fact.id in [h["_id"] for h in _search(live, {"size": 10, "retriever": rrf})]
    explained = live.as_user("alice").search(
        index=list(live.engine.recall_request(plan).indices), body={**full, "explain": True}
    )
    text = str(explained["hits"]["hits"][0]["_explanation"])
    assert "bm25" in text and "dense" in text


# 4 + 5 ---------------------------------------------------------------------------------------
def test_the_painless_priors_equal_the_python_multipliers_behind_aliases(live):
    """Each branch's score divided by its plain BM25 score is the script's factor; it must be
    ``domain.scoring.multipliers`` for every type (so the script sees concrete index names)."""
    phrase = "zebra crossing near the bakery"
    now = datetime.now(UTC)
    old = live.service.write("alice", phrase, "episodic", occurred_at=now - timedelta(days=3000))
    sixties = live.service.write("alice", phrase, "episodic", occurred_at=datetime(1965, 5, 1, tzinfo=UTC))
    fresh = live.service.write("alice", phrase, "episodic")
    fact = live.service.write("alice", phrase)
    live.engine.update("alice", live.engine.get("alice", [fact.id])[0].evolve(use_count=10))
    playbook = live.service.write("alice", phrase, "procedural", steps=["look both ways"])
    live.engine.update(
        "alice", live.engine.get("alice", [playbook.id])[0].evolve(success_count=3, failure_count=1)
    )
    catalog_id = f"{live.layout.prefix}-cat"
    live.service.load_catalog([{"id": catalog_id, "title": "crossings", "text": phrase}])
    plan = live.service.recall_plan(RecallQuery("alice", phrase))
    (scored, _) = live.engine.recall_request(plan).body["retriever"]["text_similarity_reranker"]["retriever"][
        "rrf"
    ]["retrievers"]
    plain = {
        "standard": {**scored["standard"], "query": scored["standard"]["query"]["function_score"]["query"]}
    }
    with_priors = {h["_id"]: h["_score"] for h in _search(live, {"size": 20, "retriever": scored})}
    without = {h["_id"]: h["_score"] for h in _search(live, {"size": 20, "retriever": plain})}
    stored = {m.id: m for m in live.engine.get("alice", list(with_priors), include_catalog=True)}
    assert set(stored) == {old.id, sixties.id, fresh.id, fact.id, playbook.id, catalog_id}
    for doc_id, memory in stored.items():
        expected = multipliers(memory, now, live.service.policy.multipliers).product
        assert with_priors[doc_id] / without[doc_id] == pytest.approx(expected, rel=1e-3), memory.memory_type


# 6 -------------------------------------------------------------------------------------------
def test_the_server_enforces_window_rules(live):
    live.service.write("alice", "window rules fact")
    plan = live.service.recall_plan(RecallQuery("alice", "window rules"))
    body = live.engine.recall_request(plan).body
    with pytest.raises(Exception, match="400|rank_window_size"):
        _search(live, {**body, "size": body["size"] + 1})
    too_wide = {
        **body,
        "retriever": {
            "text_similarity_reranker": {
                **body["retriever"]["text_similarity_reranker"],
                "rank_window_size": plan.window + 10,
            }
        },
    }
    with pytest.raises(Exception, match="400|rank_window_size"):
        _search(live, too_wide)
    assert _search(live, {**body, "from": plan.window, "size": 1}) == []


# 7 -------------------------------------------------------------------------------------------
def test_reranker_scores_come_back_on_the_shifted_scale_and_keep_their_order(live):
    for text in (
        "The hub runs firmware 2.1",
        "The hub is in the hallway",
        "The user likes tea",
        "Firmware updates run at night",
    ):
        live.service.write("alice", text)
    candidates = live.engine.candidates(live.service.recall_plan(RecallQuery("alice", "hub firmware")))
    shifted = [c.engine_score for c in candidates]
    relevance = [c.rerank_score for c in candidates]
    assert all(s > 0 for s in shifted) and all(0.0 <= r <= 1.0 for r in relevance)
    assert shifted == sorted(shifted, reverse=True) and relevance == sorted(relevance, reverse=True)
    assert len(set(relevance)) == len(set(shifted)), "no two reranker scores collapse into one relevance"


# 8 -------------------------------------------------------------------------------------------
def test_partial_updates_work_and_scripted_bulk_updates_are_refused(live):
    fact = live.service.write("alice", "Alice drinks oat milk")
    live.engine.touch("alice", [fact.id], datetime.now(UTC))
    assert live.engine.get("alice", [fact.id])[0].use_count == 1
    semantic = {"query": {"semantic": {"field": SEMANTIC, "query": "what milk does Alice like"}}}
    assert fact.id in [h["_id"] for h in _search(live, semantic)], "the embedding survived the partial update"
    index = live.layout.alias(MemoryType.SEMANTIC)
    scripted = live.es.bulk(
        operations=[
            {"update": {"_index": index, "_id": fact.id}},
            {"script": {"source": "ctx._source.use_count += 1"}},
        ]
    )
    assert scripted["errors"] and "script" in str(scripted["items"][0]).lower()
    stale = live.es.options(ignore_status=409).bulk(
        operations=rq.bulk_update(index, fact.id, {"use_count": 9}, (0, 1))
    )
    assert next(iter(stale["items"][0].values()))["status"] == 409


# 9 -------------------------------------------------------------------------------------------
def test_a_superseded_fact_disappears_from_recall(live):
    old = live.service.write("alice", "Alice's car is blue")
    new = live.service.write("alice", "Alice's car is red", supersedes_id=old.id)
    found = [h.memory.id for h in live.service.recall("alice", "car colour")]
    assert new.id in found and old.id not in found


# 10 ------------------------------------------------------------------------------------------
def test_user_keys_are_scoped_read_only_and_revocable(live):
    mine = live.service.write("alice", "Alice's locker code is 4417")
    live.service.load_catalog(
        [{"id": f"{live.layout.prefix}-shared", "title": "Lockers", "text": "locker rules"}]
    )
    seen_by_bob = [h["_id"] for h in _search(live, {"query": {"match_all": {}}}, user="bob")]
    assert mine.id not in seen_by_bob and f"{live.layout.prefix}-shared" in seen_by_bob
    bob = live.as_user("bob")
    assert (
        bob.options(ignore_status=404).get(index=live.layout.alias(MemoryType.SEMANTIC), id=mine.id)["found"]
        is False
    )
    with pytest.raises(Exception, match="403|unauthorized"):
        bob.index(index=live.layout.alias(MemoryType.SEMANTIC), id="x", document={"text": "x"})
    with pytest.raises(Exception, match="403|profile"):
        bob.search(
            index=live.layout.alias(MemoryType.SEMANTIC), body={"profile": True, "query": {"match_all": {}}}
        )
    assert live.service.recall("alice", "locker code")[0].memory.id == mine.id  # semantic + rerank
    writer_key = live.es.security.create_api_key(name=f"{live.layout.prefix}-derived")
    derived = live.admin.client.options(api_key=writer_key["encoded"])
    with pytest.raises(Exception, match="400|role descriptor"):
        derived.security.create_api_key(**admin.user_key_plan(live.layout, "mallory", None).body)
    live.es.security.invalidate_api_key(ids=[writer_key["id"]])
    admin.revoke_user(live.admin, live.keys, live.layout, "bob")
    with pytest.raises(ConfigurationError):
        live.service.recall("bob", "locker")


# 11 ------------------------------------------------------------------------------------------
@pytest.mark.skipif(
    not ALLOW_DOWNGRADE, reason="downgrades the cluster to Basic: set ATLAS_ES_ALLOW_DOWNGRADE=1"
)
def test_zz_a_basic_licence_refuses_rrf_with_a_clear_error(live):
    endpoint = describe_endpoint(live.es.inference.get(inference_id=live.config.embedding_inference_id))
    live.es.license.post_start_basic(acknowledge=True)
    with pytest.raises(ConfigurationError, match="licence"):
        live.service.recall("alice", "anything")
    if endpoint.service != "elastic":  # issue 33 N11: ingest calls the licensed inference API
        with pytest.raises(ConfigurationError, match="licence does not cover inference"):
            live.service.write("alice", "needs the inference licence")


# 12 ------------------------------------------------------------------------------------------
def test_highlighting_through_the_retriever_tree(live):
    live.service.write("alice", "The espresso machine needs descaling monthly")
    plan = live.service.recall_plan(RecallQuery("alice", "espresso descaling"))
    body = {**live.engine.recall_request(plan).body, "highlight": {"fields": {CONTENT: {}}}}
    (hit, *_) = _search(live, body)
    assert "<em>" in str(hit.get("highlight", {}).get(CONTENT, ""))


# 13 (issue 16) -------------------------------------------------------------------------------
def test_the_rerank_scale_is_read_from_the_endpoint(live):
    found = live.es.inference.get(inference_id=live.config.rerank_inference_id)
    endpoint = describe_endpoint(found)
    assert endpoint.task_type == "rerank"
    if live.config.rerank_inference_id == ".rerank-v1-elasticsearch":
        assert endpoint.rerank_scale == "logit"  # elastic/elasticsearch#118483


# 14 (issue 16) -------------------------------------------------------------------------------
def test_without_server_rerank_the_branches_are_fused_and_ranked_by_atlas(tmp_path):
    live = Live(tmp_path, rerank_inference_id=None)
    try:
        target = live.service.write("alice", "The garage door opener is a Chamberlain MyQ")
        live.service.write("alice", "The user's sister lives in Porto")
        hits = live.service.recall("alice", "garage door opener brand", touch=False)
        assert hits[0].memory.id == target.id and hits[0].explanation.reranker == "context"
        (candidate, *_) = live.engine.candidates(
            live.service.recall_plan(RecallQuery("alice", "garage door opener"))
        )
        assert candidate.bm25_score and candidate.dense_similarity is not None
    finally:
        live.close()


# 15 (issue 16) -------------------------------------------------------------------------------
def test_revoke_leaves_a_key_minted_under_another_prefix(live, tmp_path):
    other = Live(tmp_path / "other")  # another deployment on the same cluster: its own alice
    try:
        other.service.write("alice", "the other deployment's memory")
        admin.revoke_user(live.admin, live.keys, live.layout, "alice")
        with pytest.raises(ConfigurationError):
            live.service.recall("alice", "memory")
        assert other.service.recall("alice", "memory", touch=False), "the other prefix's key still works"
        assert admin.live_key_ids(live.admin, other.layout, "alice")
    finally:
        other.close()
    admin.add_user(live.admin, live.keys, live.layout, "alice", "1d")  # for the fixture's own teardown


# 16 (issue 16) -------------------------------------------------------------------------------
def test_a_write_before_bootstrap_is_refused_and_creates_nothing(live):
    config = live.config.model_copy(update={"index_prefix": f"{live.layout.prefix}-late"})
    late = ElasticsearchEngine(Cluster(connect(config, admin=True), config), live.keys)
    try:
        with pytest.raises(ConfigurationError, match="bootstrap"):
            MemoryService(late).write("alice", "too early")
        assert not live.es.indices.exists(index=late.layout.alias(MemoryType.SEMANTIC))
    finally:
        late.close()


# 17 (issue 16) -------------------------------------------------------------------------------
def test_doctor_passes_with_a_least_privilege_writer(live):
    names = [*(p for k in ALL_TYPES for p in live.layout.patterns(k)), f"{live.layout.state_alias}*"]
    writer = live.es.security.create_api_key(
        name=f"{live.layout.prefix}-writer",
        role_descriptors={
            "atlas_writer": {
                "indices": [{"names": names, "privileges": ["read", "create_doc", "index", "delete"]}]
            }
        },
    )
    try:
        config = live.config.model_copy(
            update={"api_key": writer["encoded"], "username": None, "password": None}
        )
        cluster = Cluster(connect(config), config)
        checks = run_checks(cluster, live.layout, rq.Inference.from_config(config), live.keys)
        assert not [c for c in checks if c.status == "fail"], render(checks)
        engine = ElasticsearchEngine(cluster, live.keys)
        fact = MemoryService(engine).write("alice", "least privilege is enough to serve")
        assert MemoryService(engine).recall("alice", "least privilege")[0].memory.id == fact.id
    finally:
        live.es.security.invalidate_api_key(ids=[writer["id"]], owner=True)


# 18 (issue 16) -------------------------------------------------------------------------------
def test_listing_pages_through_a_point_in_time(live, monkeypatch):
    monkeypatch.setattr("atlas_mcp.engines.elasticsearch.requests.LIST_PAGE", 7)
    written = {live.service.write("alice", f"listed fact {n}").id for n in range(25)}
    everything = [m.id for m in live.engine.list(ListQuery("alice", limit=100))]
    assert len(everything) == 25 and set(everything) == written
    assert [m.id for m in live.engine.list(ListQuery("alice", limit=5, offset=12))] == everything[12:17]


# 19 (issue 16) -------------------------------------------------------------------------------
def test_back_to_back_usage_updates_need_no_refresh(live):
    """Real-time _mget under a DLS key sees the version the previous (unrefreshed) update wrote."""
    fact = live.service.write("alice", "Alice drinks oat milk")
    for _ in range(3):
        live.engine.touch("alice", [fact.id], datetime.now(UTC))
    assert live.engine.get("alice", [fact.id])[0].use_count == 3


# 20 (issue 16) -------------------------------------------------------------------------------
def test_a_removed_metadata_key_is_removed(live):
    fact = live.service.write(
        "alice", "Alice's locker is 12", metadata={"room": "gym", "floor": {"n": 2, "wing": "b"}}
    )
    stored = live.engine.get("alice", [fact.id])[0]
    live.engine.update("alice", stored.evolve(metadata={"floor": {"n": 3}}))
    assert live.engine.get("alice", [fact.id])[0].metadata == {"floor": {"n": 3}}


# 21 (issue 33 N1) ----------------------------------------------------------------------------
def test_events_outside_1970_to_2262_are_stored_listed_and_updated(live):
    """A cluster refuses these in a `date_nanos` field; in a `date` they are stored and ordered."""
    sixties = live.service.write(
        "alice", "Parents married in Lisbon", "episodic", occurred_at=datetime(1965, 5, 1, tzinfo=UTC)
    )
    future = live.service.write(
        "alice", "Time capsule opens", "episodic", occurred_at=datetime(2300, 1, 1, tzinfo=UTC)
    )
    listed = [m.id for m in live.engine.list(ListQuery("alice"))]
    assert listed == [future.id, sixties.id]
    moved = live.engine.get("alice", [future.id])[0].evolve(occurred_at=datetime(1950, 1, 1, tzinfo=UTC))
    live.engine.update("alice", moved)
    assert [m.id for m in live.engine.list(ListQuery("alice"))] == [sixties.id, future.id]
    for kind in ALL_TYPES:
        (body,) = live.es.indices.get_mapping(index=live.layout.alias(kind)).values()
        assert "date_nanos" not in str(body["mappings"])


# 22 (issue 33 N1) ----------------------------------------------------------------------------
def test_v1_indices_are_migrated_in_place_of_their_alias(tmp_path):
    """A deployment bootstrapped by the v1 mappings: writes are refused with the fix, and
    `bootstrap --migrate` copies every document and swaps the aliases."""
    from atlas_mcp.engines.elasticsearch import migration

    from .test_migration import legacy_mapping, legacy_source

    config = live_settings()
    prefix = config.index_prefix
    old = IndexLayout(prefix, version=1)
    cluster = Cluster(connect(config, admin=True), config)
    try:
        for kind in ALL_TYPES:
            cluster.client.indices.create(
                index=old.concrete(kind),
                mappings=legacy_mapping(kind, config.embedding_inference_id),
                aliases={old.alias(kind): {"is_write_index": True}},
            )
        cluster.client.indices.create(
            index=old.state_concrete,
            mappings=legacy_mapping(None),
            aliases={old.state_alias: {"is_write_index": True}},
        )
        memory = Memory(
            new_id(), MemoryType.SEMANTIC, "alice", "The hub runs firmware 2.1", datetime.now(UTC)
        )
        cluster.client.index(
            index=old.alias(MemoryType.SEMANTIC), id=memory.id, document=legacy_source(memory), refresh=True
        )
        layout = IndexLayout(prefix)
        assert all(
            line.startswith("outdated")
            for line in admin.bootstrap(cluster, layout, config.embedding_inference_id)
        )
        report = migration.migrate(cluster, layout, config.embedding_inference_id)
        assert len(report) == 5
        keys = KeyStore(tmp_path / "keys.json")
        admin.add_user(cluster, keys, layout, "alice", "1d")
        engine = ElasticsearchEngine(Cluster(connect(config), config), keys)
        try:
            assert [m.id for m in engine.list(ListQuery("alice"))] == [memory.id]
            MemoryService(engine).write(
                "alice", "Parents married", "episodic", occurred_at=datetime(1965, 5, 1, tzinfo=UTC)
            )
        finally:
            engine.close()
            admin.revoke_user(cluster, keys, layout, "alice")
    finally:
        for version in (1, 2):
            names = IndexLayout(prefix, version=version)
            for kind in ALL_TYPES:
                cluster.client.options(ignore_status=404).indices.delete(index=names.concrete(kind))
            cluster.client.options(ignore_status=404).indices.delete(index=names.state_concrete)
        cluster.close()


# 23 (issue 33 N8) ----------------------------------------------------------------------------
def test_a_missing_rerank_endpoint_wrapped_by_the_retriever_keeps_its_hint(tmp_path):
    """The reranker reports the missing endpoint under `suppressed` of a `status_exception`."""
    live = Live(tmp_path, rerank_inference_id=f"atlas-live-missing-{uuid.uuid4().hex[:6]}")
    try:
        live.service.write("alice", "The hub runs firmware 2.1")
        with pytest.raises(ConfigurationError, match="inference endpoint missing.*rerank_inference_id"):
            live.service.recall("alice", "hub firmware")
    finally:
        live.close()


# 24 (issue 33 N3) ----------------------------------------------------------------------------
def test_a_key_is_limited_by_the_administrator_who_minted_it(live, tmp_path):
    """An administrator without `monitor_inference` mints keys that cannot read the endpoints,
    whatever their role descriptor says; `users add` warns. Needs a credential that may manage
    users and roles (the test creates and removes its own)."""
    minter = TemporaryAdmin(live, cluster_privileges=("manage_own_api_key",))
    try:
        gaps = admin.minter_gaps(minter.cluster, live.layout)
        assert gaps and "monitor_inference" in gaps[0]
        keys = KeyStore(tmp_path / "limited.json")
        admin.add_user(minter.cluster, keys, live.layout, "carol", "1d")
        key = live.admin.client.options(api_key=keys.key_for("carol"))
        assert key.security.has_privileges(cluster=["monitor_inference"])["cluster"] == {
            "monitor_inference": False
        }
        admin.revoke_user(minter.cluster, keys, live.layout, "carol")
    finally:
        minter.close()


# 25 (issue 33 N9) ----------------------------------------------------------------------------
def test_an_unreadable_endpoint_is_asked_again_and_a_readable_one_kept(live, monkeypatch):
    reads: list[str] = []
    real = live.engine.cluster.call

    def counting(what, fn, **kwargs):
        if what.startswith("read inference endpoint"):
            reads.append(what)
        return real(what, fn, **kwargs)

    monkeypatch.setattr(live.engine.cluster, "call", counting)
    client = live.engine.reader.client("alice")
    missing = f"atlas-live-missing-{uuid.uuid4().hex[:6]}"
    assert live.engine.recall.endpoints.get(missing, client) is None
    assert live.engine.recall.endpoints.get(missing, client) is None
    assert len(reads) == 2, "a failure stands for a while (the key, then the writer)"
    monkeypatch.setattr("atlas_mcp.engines.elasticsearch.endpoints.RETRY_S", 0.0)
    live.engine.recall.endpoints.forget()
    assert live.engine.recall.endpoints.get(missing, client) is None
    assert live.engine.recall.endpoints.get(missing, client) is None
    assert len(reads) == 6, "asked again once the wait is over"
    found = live.engine.recall.endpoints.get(live.config.embedding_inference_id, client)
    again = live.engine.recall.endpoints.get(live.config.embedding_inference_id, client)
    assert found is not None and again is found and len(reads) == 7


# 26 (issue 33 N12) ---------------------------------------------------------------------------
def test_the_dense_score_is_read_back_as_the_endpoints_cosine(tmp_path):
    """Whatever similarity the embedding endpoint declares, the candidate's cosine is the cosine
    of the endpoint's own vectors."""
    live = Live(tmp_path, rerank_inference_id=None)
    try:
        endpoint = describe_endpoint(live.es.inference.get(inference_id=live.config.embedding_inference_id))
        if not endpoint.dense:
            pytest.skip(f"{live.config.embedding_inference_id} is sparse: its score is no cosine")
        fact = live.service.write("alice", "The garage door opener is a Chamberlain MyQ")
        query = "garage door opener"
        (candidate,) = [
            c
            for c in live.engine.candidates(live.service.recall_plan(RecallQuery("alice", query)))
            if c.memory.id == fact.id
        ]
        a = _embedding(live, query, "search")
        b = _embedding(live, fact.search_text(), "ingest")
        norm = (sum(x * x for x in a) * sum(y * y for y in b)) ** 0.5
        cosine = sum(x * y for x, y in zip(a, b, strict=True)) / norm
        assert candidate.dense_similarity == pytest.approx(cosine, abs=0.02)
    finally:
        live.close()


def _embedding(live, text: str, input_type: str) -> list[float]:
    """The endpoint's vector for ``text`` as ``semantic_text`` asks for it (query or passage)."""
    path = f"/_inference/text_embedding/{live.config.embedding_inference_id}"
    headers = {"content-type": "application/json", "accept": "application/json"}
    try:
        found = live.es.perform_request(
            "POST", path, headers=headers, body={"input": [text], "input_type": input_type}
        )
    except Exception:  # noqa: BLE001 - servers before input_type embed without it
        found = live.es.perform_request("POST", path, headers=headers, body={"input": [text]})
    return list(found["text_embedding"][0]["embedding"])


# 27 (issue 33 N7) ----------------------------------------------------------------------------
def test_usage_bookkeeping_that_fails_does_not_hold_the_recall(live, monkeypatch):
    """Usage updates refused by the cluster (a write block here: 403 per item; 429s cannot be
    provoked on demand) and a 429 storm on the real-time read leave the recall its answer, with
    at most half a second of pauses."""
    from elasticsearch import ApiError

    fact = live.service.write("alice", "Alice drinks oat milk")
    index = live.layout.concrete(MemoryType.SEMANTIC)
    sleeps: list[float] = []
    monkeypatch.setattr(live.engine.cluster, "_sleep", sleeps.append)
    live.es.indices.put_settings(index=index, settings={"index.blocks.write": True})
    try:
        assert live.service.recall("alice", "oat milk")[0].memory.id == fact.id
    finally:
        live.es.indices.put_settings(index=index, settings={"index.blocks.write": None})
    real = live.engine.cluster.call

    def storm(what, fn, **kwargs):
        if what.startswith("usage read"):
            meta = type("Meta", (), {"status": 429, "headers": {"retry-after": "10"}})()
            raise ApiError("rejected", meta, {"error": {"type": "es_rejected_execution_exception"}})
        return real(what, fn, **kwargs)

    monkeypatch.setattr(live.engine.cluster, "call", storm)
    assert live.service.recall("alice", "oat milk")[0].memory.id == fact.id
    assert sum(sleeps) <= 0.5


# 28 (issue 33 N13) ---------------------------------------------------------------------------
def test_a_search_answered_by_some_shards_only_is_refused(live):
    """A script that fails on one index's shard only: the cluster answers 200 with the other
    shards' hits and `_shards.failed: 1`; atlas asks again and then refuses the partial answer."""
    from atlas_mcp.errors import BackendUnavailable

    live.service.write("alice", "fact in the semantic index")
    live.service.write("alice", "event in the episodic index", "episodic")
    failing = {
        "script_score": {
            "query": {"match_all": {}},
            "script": {
                "source": "if (doc['_index'].value.startsWith(params.stem)) { throw new IllegalStateException('boom'); } return 1;",
                "params": {"stem": live.layout.stem(MemoryType.SEMANTIC)},
            },
        }
    }
    request = rq.SearchRequest(tuple(live.layout.aliases(USER_MEMORY_TYPES)), {"query": failing})
    raw = live.as_user("alice").search(index=list(request.indices), body=request.body)
    assert raw["_shards"]["failed"] >= 1 and raw["hits"]["hits"], "the cluster answers in part"
    with pytest.raises(BackendUnavailable, match="only in part"):
        live.engine.reader.search(live.as_user("alice"), "a test search", request)


# 29 (issue 33 N14) ---------------------------------------------------------------------------
def test_bulk_results_come_back_per_item_in_order(live):
    """The item split behind retrying rejected items, against a real bulk response: a create, a
    conditional update that conflicts (409, not retried) and a delete, in order."""
    from atlas_mcp.engines.elasticsearch.bulk import bulk

    alias = live.layout.alias(MemoryType.SEMANTIC)
    fact = live.service.write("alice", "Alice likes tea")
    ops = [
        *rq.bulk_create(alias, "bulk-new", {"memory_type": "semantic", "text": "x", "content": "x"}),
        *rq.bulk_update(alias, fact.id, {"use_count": 9}, (0, 1)),
        *rq.bulk_delete(alias, "bulk-new"),
    ]
    results = bulk(live.engine.cluster, "a test bulk", ops, refresh="true")
    assert [r.get("status") for r in results] == [201, 409, 200]


class TemporaryAdmin:
    """A user with the documented least-privilege administrator role, made for one test
    (skips when the live credential may not manage users and roles)."""

    def __init__(
        self,
        live,
        cluster_privileges=("manage_own_api_key", "monitor_inference"),
        index_privileges=("read", "manage", "write"),
    ):
        self.live, self.name = live, f"{live.layout.prefix}-admin-{uuid.uuid4().hex[:4]}"
        self.password = f"pw-{uuid.uuid4().hex}"
        patterns = [f"{live.layout.prefix}-*"]
        try:
            live.es.security.put_role(
                name=self.name,
                cluster=list(cluster_privileges),
                indices=[{"names": patterns, "privileges": list(index_privileges)}],
            )
            live.es.security.put_user(username=self.name, password=self.password, roles=[self.name])
        except Exception as exc:  # noqa: BLE001 - a credential that cannot manage security skips
            pytest.skip(f"the live credential cannot create a role and a user: {exc}")
        config = live.config.model_copy(update={"username": self.name, "password": self.password})
        self.cluster = Cluster(connect(config, admin=True), config)

    def close(self) -> None:
        self.cluster.close()
        self.live.es.options(ignore_status=404).security.delete_user(username=self.name)
        self.live.es.options(ignore_status=404).security.delete_role(name=self.name)


# 30 (issue 33 N4) ----------------------------------------------------------------------------
def test_revoke_by_another_administrator_keeps_the_record_of_a_live_key(live):
    """The cluster answers an `owner: true` invalidation of another user's key with an empty
    success: the revoke must notice the key still works and keep its record."""
    other = TemporaryAdmin(live)
    stored = live.keys.stored()["bob"]
    try:
        with pytest.raises(ConfigurationError, match="still valid"):
            admin.revoke_user(other.cluster, live.keys, live.layout, "bob")
        assert live.keys.stored()["bob"] == stored
        assert live.service.recall("bob", "anything", touch=False) is not None, "the key still works"
        with pytest.raises(ConfigurationError, match="still valid"):
            admin.add_user(other.cluster, live.keys, live.layout, "bob", "1d")
        assert live.keys.stored()["bob"] == stored
    finally:
        other.close()
    admin.revoke_user(live.admin, live.keys, live.layout, "bob")  # its owner can
    admin.add_user(live.admin, live.keys, live.layout, "bob", "1d")  # for the fixture's teardown


# 31 (issue 33 N5) ----------------------------------------------------------------------------
def test_an_export_reads_one_point_in_time_and_survives_a_forget(live, monkeypatch):
    from atlas_mcp import portability

    monkeypatch.setattr("atlas_mcp.engines.elasticsearch.requests.LIST_PAGE", 4)
    written = [live.service.write("alice", f"exported fact {n}").id for n in range(11)]
    opened: list[str] = []
    real = live.engine.cluster.call

    def counting(what, fn, **kwargs):
        if "open a point in time" in what:
            opened.append(what)
        return real(what, fn, **kwargs)

    monkeypatch.setattr(live.engine.cluster, "call", counting)
    exported = portability.iter_memories(live.engine, "alice")
    first = [next(exported).id for _ in range(5)]
    live.engine.forget("alice", next(i for i in reversed(written) if i not in first))
    assert sorted(first + [m.id for m in exported]) == sorted(written)
    assert len(opened) == 1


# 32 (issue 33 N10) ---------------------------------------------------------------------------
def test_bootstrap_with_create_index_only_is_refused_with_the_privilege_named(live):
    creator = TemporaryAdmin(live, index_privileges=("create_index", "view_index_metadata", "read"))
    try:
        layout = IndexLayout(f"{live.layout.prefix}-ci")
        with pytest.raises(ConfigurationError, match="`manage`"):
            admin.bootstrap(creator.cluster, layout, live.config.embedding_inference_id)
        assert not live.es.indices.exists(index=layout.concrete(MemoryType.SEMANTIC))
        with pytest.raises(Exception, match="403|unauthorized"):  # the server's own refusal
            creator.cluster.client.indices.create(
                index=layout.concrete(MemoryType.SEMANTIC), aliases={layout.alias(MemoryType.SEMANTIC): {}}
            )
    finally:
        creator.close()


# 33 (issue 33 N16) ---------------------------------------------------------------------------
def test_a_key_does_not_reach_a_deployment_whose_prefix_extends_its_own(live, tmp_path):
    theirs = Live(tmp_path / "theirs", index_prefix=f"{live.layout.prefix}-semantic")
    try:
        theirs.service.write("alice", "the other deployment's memory")
        with pytest.raises(Exception, match="403|unauthorized"):
            live.as_user("alice").search(
                index=theirs.layout.alias(MemoryType.SEMANTIC), body={"query": {"match_all": {}}}
            )
    finally:
        theirs.close()


# 34 (issue 33 N2) ----------------------------------------------------------------------------
def test_a_reranked_recall_under_a_users_key_works_or_falls_back(live):
    """On 9.0.2+ the cluster reranks under the key; on 9.0.0-9.0.1 (elastic/elasticsearch#128328)
    it refuses, and atlas fuses and reranks itself. Doctor agrees with what happened."""
    fact = live.service.write("alice", "The hub runs firmware 2.1")
    number = live.es.info()["version"]["number"]
    hits = live.service.recall("alice", "hub firmware", touch=False)
    assert hits[0].memory.id == fact.id
    refused = number in ("9.0.0", "9.0.1")
    assert live.engine.info.reranks_server_side is not refused
    assert (hits[0].explanation.reranker == "engine") is not refused
    checks = {
        c.name: c
        for c in run_checks(live.admin, live.layout, rq.Inference.from_config(live.config), live.keys)
    }
    assert (checks["reranked recall"].status == "fail") is refused


# 35 (issue 33 N15) ---------------------------------------------------------------------------
def test_bm25_statistics_include_other_users_memories(live):
    """What the docs say about ranking under DLS: another user's memories move a user's BM25."""
    mine = live.service.write("alice", "The zebra crossing near the bakery")
    live.service.write("alice", "Alice likes tea")
    plan = live.service.recall_plan(RecallQuery("alice", "zebra crossing"))
    body = {"size": 10, "query": rq.lexical_query(plan)}

    def score() -> float:
        hits = _search(live, body, kinds=[MemoryType.SEMANTIC])
        return {h["_id"]: h["_score"] for h in hits}[mine.id]

    alone = score()
    for n in range(6):
        live.service.write("bob", f"zebra crossing number {n}")
    assert score() < alone


# 36 (issue 33 N6) ----------------------------------------------------------------------------
@pytest.mark.skipif(
    not LIVE["ADMIN_API_KEY"],
    reason="set ATLAS_ES_ADMIN_API_KEY (an administrator API key with manage_api_key) to run it",
)
def test_an_admin_api_key_administers_without_passwords(live, tmp_path):
    """What Serverless allows: bootstrap and revoke with an API key, a user key made elsewhere
    (here by the live user, as Kibana would) registered and checked, minting refused clearly."""
    from atlas_mcp.engines.elasticsearch.registration import register_key

    config = live.config.model_copy(
        update={"username": None, "password": None, "admin_api_key": LIVE["ADMIN_API_KEY"]}
    )
    keyed = Cluster(connect(config, admin=True), config)
    keys = KeyStore(tmp_path / "registered.json")
    try:
        assert all(
            line.startswith("exists")
            for line in admin.bootstrap(keyed, live.layout, config.embedding_inference_id)
        )
        with pytest.raises(ConfigurationError, match="Kibana"):
            admin.add_user(keyed, keys, live.layout, "dora", "1d")
        made = live.es.security.create_api_key(**admin.user_key_plan(live.layout, "dora", "1d").body)
        stored, warnings = register_key(keyed, keyed, keys, live.layout, "dora", made["encoded"])
        assert stored.id == made["id"] and not warnings
        admin.revoke_user(keyed, keys, live.layout, "dora")
        assert "dora" not in keys.stored()
        if live.es.info()["version"].get("build_flavor") == "serverless" and LIVE["USER"]:
            with pytest.raises(Exception, match="401"):
                live.admin.client.security.authenticate()
    finally:
        keyed.close()
