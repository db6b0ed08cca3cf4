"""Where a real cluster differs from a lenient fake (issue 16): each test fails on the engine
as it was before, because the fake now behaves as Elasticsearch 9 does.

Rerank logits, recall without server-side rerank, key ownership and prefixes, writes before
bootstrap, listings past ``index.max_result_window``, best-effort usage updates, deep-merged
partial updates, and the Painless priors (run, not skipped) for dates before 1970.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from structlog.testing import capture_logs

from atlas_mcp.domain.model import MemoryType
from atlas_mcp.domain.multipliers import multipliers
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.engines.base import ListQuery
from atlas_mcp.engines.elasticsearch import admin
from atlas_mcp.engines.elasticsearch import requests as rq
from atlas_mcp.engines.elasticsearch.layout import IndexLayout
from atlas_mcp.engines.elasticsearch.transport import Cluster, connect
from atlas_mcp.errors import AtlasError, BackendUnavailable, ConfigurationError
from atlas_mcp.service import MemoryService, RecallQuery

from .harness import bootstrapped_engine, es_config

FACTS = [
    "The garage door opener is a Chamberlain MyQ",
    "The user's sister lives in Porto",
    "The hub runs firmware 2.1 since March",
    "Oat milk is the only milk the user drinks",
    "The user's bike has a broken rear derailleur",
]
LOGIT_RERANKER = ".rerank-v1-elasticsearch"


# 1 -- rerank scores on the endpoint's scale ---------------------------------------------------


def test_elastic_rerank_logits_keep_the_rerankers_order(fake_es, tmp_path):
    """`.rerank-v1-elasticsearch` returns raw logits (mostly negative here). Read as probabilities
    and clamped, they all became relevance 0 (score 0, order by id); the scale now comes from
    GET _inference (service "elasticsearch": logits)."""
    fake_es.inference_ids.add(LOGIT_RERANKER)
    engine = bootstrapped_engine(fake_es, tmp_path / "keys.json", rerank_inference_id=LOGIT_RERANKER)
    service = MemoryService(engine)
    for fact in FACTS:
        service.write("u1", fact)
    candidates = engine.candidates(service.recall_plan(RecallQuery("u1", "which firmware does the hub run")))
    es_order = [c.engine_score for c in candidates]
    relevance = [c.rerank_score for c in candidates]
    assert es_order == sorted(es_order, reverse=True)
    assert relevance == sorted(relevance, reverse=True) and len(set(relevance)) == len(FACTS), relevance
    assert any(s < 1.0 for s in es_order), "some logits were negative (shifted below 1)"
    hits = service.recall("u1", "which firmware does the hub run", min_relevance=0.0)
    assert "firmware" in hits[0].memory.text and hits[0].explanation.match > 0
    assert fake_es.requests_to("GET", rf"^/_inference/.*{LOGIT_RERANKER}$"), (
        "the scale was read from the endpoint"
    )


def test_a_probability_setting_on_a_logit_endpoint_still_keeps_the_order(fake_es, tmp_path):
    fake_es.inference_ids.add(LOGIT_RERANKER)
    engine = bootstrapped_engine(
        fake_es, tmp_path / "keys.json", rerank_inference_id=LOGIT_RERANKER, rerank_score_scale="probability"
    )
    service = MemoryService(engine)
    for fact in FACTS:
        service.write("u1", fact)
    plan = service.recall_plan(
        RecallQuery("u1", "the user garage door hub firmware since oat milk sister porto")
    )
    relevance = [c.rerank_score for c in engine.candidates(plan)]
    assert relevance == sorted(relevance, reverse=True) and len(set(relevance)) == len(FACTS)


def test_the_reranker_scores_its_own_window(es_engine, fake_es):
    MemoryService(es_engine).recall("u1", "anything", touch=False)
    (search,) = fake_es.requests_to("POST", r"/_search$")
    reranker = search.json()["retriever"]["text_similarity_reranker"]
    assert (
        reranker["rank_window_size"] == 80
        and reranker["retriever"]["rrf"]["rank_window_size"] == ScoringPolicy().retrieval.rrf_window
    )


# 2 -- recall without server-side rerank ------------------------------------------------------


def test_without_a_rerank_endpoint_the_service_ranks_with_real_signals(fake_es, tmp_path):
    """The documented `rerank_inference_id = ""`: every relevance used to be 1.0 (the engine gave
    only RRF scores and the service looked for a rerank score), so the id decided the order."""
    engine = bootstrapped_engine(fake_es, tmp_path / "keys.json", rerank_inference_id="")
    service = MemoryService(engine)
    ids = {fact: service.write("u1", fact).id for fact in FACTS}
    assert engine.info.reranks_server_side is False
    for fact, query in zip(
        FACTS,
        [
            "garage door opener brand",
            "where does my sister live",
            "hub firmware version",
            "which milk",
            "bike derailleur",
        ],
        strict=True,
    ):
        hits = service.recall("u1", query, min_relevance=0.0, touch=False)
        assert hits[0].memory.id == ids[fact], query
        assert hits[0].explanation.reranker == "context" and len({h.explanation.match for h in hits}) > 1
    candidate = engine.candidates(service.recall_plan(RecallQuery("u1", "hub firmware")))[0]
    assert candidate.bm25_score and candidate.dense_similarity is not None and candidate.bm25_rank == 1
    (msearch, *_) = fake_es.requests_to("POST", r"^/_msearch$")
    assert msearch.auth[0] == "apikey" and not fake_es.requests_to("POST", r"/_search$")


# 3 -- keys belong to a prefix and to their minter ---------------------------------------------


def test_revoke_leaves_keys_minted_under_another_prefix(fake_es, tmp_path):
    """`users revoke alice` used to invalidate every `atlas-user-alice` key on the cluster."""
    ours = bootstrapped_engine(fake_es, tmp_path / "ours.json", users=("alice",))
    theirs = bootstrapped_engine(fake_es, tmp_path / "theirs.json", users=("alice",))
    MemoryService(theirs).write("alice", "another deployment's memory")
    with _admin(ours) as cluster:
        assert admin.revoke_user(cluster, ours.keys, ours.layout, "alice") == 1
    assert "alice" not in ours.keys.stored()
    with pytest.raises(ConfigurationError):
        MemoryService(ours).recall("alice", "memory")
    assert MemoryService(theirs).recall("alice", "memory", touch=False), (
        "the other deployment's key still works"
    )


def test_a_failed_revoke_keeps_the_record_of_a_live_key(es_engine, fake_es):
    fake_es.fail(
        "DELETE", r"^/_security/api_key$", 503, {"error": {"type": "unavailable", "reason": "down"}}, times=99
    )
    with _admin(es_engine) as cluster, pytest.raises(AtlasError):
        admin.revoke_user(cluster, es_engine.keys, es_engine.layout, "u1")
    assert "u1" in es_engine.keys.stored() and not fake_es.keys[es_engine.keys.stored()["u1"].id].invalidated


def test_a_failed_rotation_keeps_the_old_key_and_withdraws_the_new_one(es_engine, fake_es):
    old = es_engine.keys.stored()["u1"]
    fake_es.fail(
        "DELETE",
        r"^/_security/api_key$",
        503,
        {"error": {"type": "unavailable", "reason": "down"}},
        times=es_engine.cluster.config.max_retries + 1,
    )  # the rotation fails, the withdrawal works
    with _admin(es_engine) as cluster, pytest.raises(AtlasError):
        admin.add_user(cluster, es_engine.keys, es_engine.layout, "u1", None)
    assert es_engine.keys.stored()["u1"] == old and not fake_es.keys[old.id].invalidated
    newest = max(
        fake_es.keys.values(), key=lambda k: int(k.id.split("-")[-1]) if k.id.startswith("key-") else 0
    )
    assert newest.id != old.id and newest.invalidated, "the new key does not stay live unrecorded"


def test_a_least_privilege_admin_rotates_with_owner_true(es_engine, fake_es):
    old = es_engine.keys.stored()["u1"]
    with _admin(es_engine) as cluster:
        admin.add_user(cluster, es_engine.keys, es_engine.layout, "u1", None)
    (invalidation,) = fake_es.requests_to("DELETE", r"^/_security/api_key$")
    assert invalidation.json() == {"ids": [old.id], "owner": True} and fake_es.keys[old.id].invalidated


def _admin(engine):
    config = engine.cluster.config
    cluster = Cluster(connect(config, admin=True), config)

    class Closing:
        def __enter__(self):
            return cluster

        def __exit__(self, *exc):
            cluster.close()

    return Closing()


# 4 -- writes need the alias ------------------------------------------------------------------


def test_a_write_before_bootstrap_is_refused_and_bootstrap_still_works(fake_es, tmp_path):
    """Without require_alias the write auto-created `<prefix>-semantic` as a concrete index with a
    dynamic mapping, and bootstrap could no longer create the alias of that name."""
    engine = bootstrapped_engine(fake_es, tmp_path / "keys.json", users=("u1",))
    late = engine.layout.prefix + "-late"
    config = es_config(fake_es.url, index_prefix=late)
    from atlas_mcp.engines.elasticsearch.engine import ElasticsearchEngine

    unbooted = ElasticsearchEngine(Cluster(connect(config), config), engine.keys)
    with pytest.raises(ConfigurationError, match="atlas-mcp bootstrap"):
        MemoryService(unbooted).write("u1", "too early")
    assert not [name for name in fake_es.indices if name.startswith(late)], "nothing was auto-created"
    with _admin(unbooted) as cluster:
        assert all(line.startswith("created") for line in admin.bootstrap(cluster, unbooted.layout, "x"))


# 6 -- listings past the result window --------------------------------------------------------


def test_listing_and_export_go_past_the_result_window(fake_es, tmp_path, monkeypatch):
    """from/size stopped at index.max_result_window (10,000; 5 here) and had no unique
    tiebreaker: memories written in the same instant could repeat or vanish across pages."""
    fake_es.max_result_window = 5
    monkeypatch.setattr("atlas_mcp.engines.elasticsearch.requests.LIST_PAGE", 4)  # pages fit the window
    monkeypatch.setattr("atlas_mcp.writing.NEIGHBOURS", 4)  # so does a write's look for what it repeats
    engine = bootstrapped_engine(fake_es, tmp_path / "keys.json", users=("u1",))
    at = datetime(2026, 1, 1, tzinfo=UTC)
    service = MemoryService(engine, clock=lambda: at)  # one instant: only the tiebreaker orders them
    written = {service.write("u1", f"fact number {n}").id for n in range(12)}
    everything = [m.id for m in engine.list(ListQuery("u1", limit=100))]
    assert len(everything) == 12 and set(everything) == written
    assert [m.id for m in engine.list(ListQuery("u1", limit=3, offset=7))] == everything[7:10]
    assert [m.id for m in engine.list(ListQuery("u1", limit=100, offset=11))] == everything[11:]
    oldest = [m.id for m in engine.list(ListQuery("u1", limit=100, oldest_first=True))]
    assert sorted(oldest) == sorted(written) and len(oldest) == 12
    assert not fake_es.pits, "every point in time is closed"


# 7 -- usage updates --------------------------------------------------------------------------


def test_usage_updates_never_fail_a_recall_and_need_no_refresh(es_engine, fake_es):
    service = MemoryService(es_engine)
    fact = service.write("u1", "The user drinks oat milk")
    fake_es.requests.clear()
    service.recall("u1", "oat milk")
    service.recall("u1", "oat milk")  # right after: the version read must be current without a refresh
    assert es_engine.get("u1", [fact.id])[0].use_count == 2
    assert {b.query["refresh"] for b in fake_es.requests_to("PUT", r"^/_bulk$")} == {"false"}
    fake_es.fail(
        "PUT", r"^/_bulk$", 503, {"error": {"type": "unavailable_shards_exception", "reason": "x"}}, times=99
    )
    assert service.recall("u1", "oat milk")[0].memory.id == fact.id, (
        "a lost usage update is not a recall error"
    )


def test_a_rejected_usage_item_is_retried(es_engine, fake_es):
    service = MemoryService(es_engine)
    fact = service.write("u1", "The user drinks oat milk")
    real, state = fake_es._bulk_item, {"rejected": False}

    def reject_once(who, op, meta, body):
        from .fake_es import EsError

        if op == "update" and not state["rejected"]:
            state["rejected"] = True
            raise EsError(
                429, "es_rejected_execution_exception", "rejected execution of coordinating operation"
            )
        return real(who, op, meta, body)

    fake_es._bulk_item = reject_once
    service.recall("u1", "oat milk")
    assert state["rejected"] and es_engine.get("u1", [fact.id])[0].use_count == 1


# 8 -- partial updates, and the priors run as Painless ----------------------------------------


def test_a_removed_metadata_key_is_removed(es_engine):
    """A partial `doc` is deep-merged into _source: sending the new metadata left old keys in."""
    service = MemoryService(es_engine)
    fact = service.write(
        "u1", "The user's locker is 12", metadata={"room": "gym", "floor": {"n": 2, "wing": "b"}}
    )
    stored = es_engine.get("u1", [fact.id])[0]
    es_engine.update("u1", stored.evolve(metadata={"floor": {"n": 3}}))
    assert es_engine.get("u1", [fact.id])[0].metadata == {"floor": {"n": 3}}
    es_engine.update("u1", es_engine.get("u1", [fact.id])[0].evolve(use_count=4))
    assert es_engine.get("u1", [fact.id])[0].metadata == {"floor": {"n": 3}}


def test_the_painless_priors_equal_the_python_multipliers_before_1970_too(es_engine):
    """Each branch's score over its plain query's score is the script's factor: the fake runs the
    script, so an event from 1965 (negative epoch millis) must decay like any other."""
    service = MemoryService(es_engine)
    now = datetime.now(UTC)
    phrase = "zebra crossing near the bakery"
    ids = [
        service.write("u1", phrase, "episodic", occurred_at=datetime(1965, 5, 1, tzinfo=UTC)).id,
        service.write("u1", phrase, "episodic", occurred_at=now - timedelta(days=3000)).id,
        service.write("u1", phrase, "episodic").id,
        service.write("u1", phrase).id,
        service.write("u1", phrase, "procedural", steps=["look both ways"]).id,
    ]
    service.load_catalog([{"id": "cat-z", "title": "crossings", "text": phrase}])
    playbook = es_engine.get("u1", [ids[-1]])[0]
    es_engine.update("u1", playbook.evolve(success_count=3, failure_count=1))
    plan = service.recall_plan(RecallQuery("u1", phrase))
    request = es_engine.recall_request(plan)
    scored = request.body["retriever"]["text_similarity_reranker"]["retriever"]["rrf"]["retrievers"][0]
    plain = {
        "standard": {**scored["standard"], "query": scored["standard"]["query"]["function_score"]["query"]}
    }
    user = es_engine.cluster.as_user(es_engine.keys.key_for("u1"))

    def scores(retriever):
        hits = user.search(index=list(request.indices), body={"size": 20, "retriever": retriever})["hits"][
            "hits"
        ]
        return {h["_id"]: h["_score"] for h in hits}

    with_priors, without = scores(scored), scores(plain)
    stored = {m.id: m for m in es_engine.get("u1", [*ids, "cat-z"], include_catalog=True)}
    assert len(stored) == 6
    for doc_id, memory in stored.items():
        expected = multipliers(memory, now, service.policy.multipliers).product
        assert with_priors[doc_id] / without[doc_id] == pytest.approx(expected, rel=1e-3), memory.text
    assert with_priors[ids[0]] / without[ids[0]] < 0.01, "a 1965 event is decayed"


def test_an_unguarded_doc_access_fails_as_on_a_cluster(es_engine):
    """Catalog indices do not map use_count: `doc['use_count']` without containsKey throws."""
    MemoryService(es_engine).load_catalog([{"id": "cat-1", "title": "t", "text": "anything at all"}])
    script = {"source": "if (doc['use_count'].size() > 0) { return 2.0; } return 1.0;", "lang": "painless"}
    body = {
        "query": {
            "function_score": {
                "query": {"match_all": {}},
                "functions": [{"script_score": {"script": script}}],
            }
        }
    }
    user = es_engine.cluster.as_user(es_engine.keys.key_for("u1"))
    from elasticsearch import BadRequestError

    with pytest.raises(BadRequestError, match="No field found for \\[use_count\\]"):
        user.search(index=[es_engine.layout.alias(MemoryType.CATALOG)], body=body)


def test_an_evaluation_on_elasticsearch_gets_its_own_bootstrapped_prefix(fake_es, tmp_path):
    """The eval harness's scratch prefix used to be written to without bootstrap (auto-created
    indices) and read with keys scoped to the real prefix."""
    from atlas_mcp.config import load_settings
    from atlas_mcp.eval.harness import scratch_service

    settings = load_settings(
        backend="elasticsearch",
        data_dir=tmp_path,
        elasticsearch=es_config(fake_es.url, index_prefix="real").model_dump(),
    )
    with scratch_service(settings) as (service, _):
        fact = service.write("sarah", "The hub runs firmware 2.1")
        assert [h.memory.id for h in service.recall("sarah", "hub firmware", touch=False)] == [fact.id]
        prefix = re.search(r"\((\S+)-\*\)$", service.stats().location).group(1)
    assert prefix.startswith("real-eval-") and fake_es.aliases[f"{prefix}-semantic"] == IndexLayout(
        prefix
    ).concrete(MemoryType.SEMANTIC)
    assert all(k.invalidated for k in fake_es.keys.values() if k.metadata.get("index_prefix") == prefix)


# -- issue 33 N1: any date a memory can carry is stored ------------------------------------------


def test_events_before_1970_and_after_2262_are_written_listed_and_recalled(es_engine):
    """`date_nanos` holds 1970..2262 only: the cluster refused the document, so an event from
    1965 (or 2300) could not be written, updated or imported."""
    service = MemoryService(es_engine)
    sixties = service.write(
        "u1", "Parents married in Lisbon", "episodic", occurred_at=datetime(1965, 5, 1, tzinfo=UTC)
    )
    future = service.write(
        "u1", "Time capsule opens in Lisbon", "episodic", occurred_at=datetime(2300, 1, 1, tzinfo=UTC)
    )
    recent = service.write("u1", "Visited Lisbon again", "episodic")
    assert [m.id for m in es_engine.list(ListQuery("u1"))] == [future.id, recent.id, sixties.id]
    moved = es_engine.get("u1", [recent.id])[0].evolve(occurred_at=datetime(1950, 1, 1, tzinfo=UTC))
    es_engine.update("u1", moved)
    assert es_engine.get("u1", [recent.id])[0].occurred_at == datetime(1950, 1, 1, tzinfo=UTC)
    found = {h.memory.id for h in service.recall("u1", "Lisbon", min_relevance=0.0, touch=False)}
    assert {sixties.id, future.id, recent.id} <= found


def test_microseconds_order_memories_created_within_one_millisecond(es_engine):
    """A `date` keeps milliseconds: the consolidation watermark (strictly after, microseconds)
    and the oldest-first order must not lose the digits below."""
    stamps = [datetime(1969, 12, 31, 23, 59, 59, 999_000 + us, tzinfo=UTC) for us in (3, 1, 2)]
    ids = {}
    for n, at in enumerate(stamps):
        ids[at] = MemoryService(es_engine, clock=lambda at=at: at).write("u1", f"episode {n}", "episodic").id
    ordered = [ids[at] for at in sorted(stamps)]
    assert [m.id for m in es_engine.list(ListQuery("u1", oldest_first=True))] == ordered
    after_first = es_engine.list(ListQuery("u1", since=min(stamps), oldest_first=True))
    assert [m.id for m in after_first] == ordered[1:]
    assert [m.id for m in es_engine.list(ListQuery("u1"))] == ordered[::-1]


# -- issue 33 N3, N9, N12: inference endpoints as the keys can read them ---------------------------


def test_a_key_can_do_no_more_than_the_admin_who_minted_it(fake_es, tmp_path):
    """An administrator without `monitor_inference` mints keys without it, whatever their role
    descriptor says: reading the endpoint then fails under the key, and atlas says so and how
    to fix it instead of silently reading the scores by their range."""
    fake_es.admin.cluster.discard("monitor_inference")  # the least-privilege role the docs gave
    fake_es.inference_ids.add(LOGIT_RERANKER)
    engine = bootstrapped_engine(
        fake_es, tmp_path / "keys.json", users=("u1",), rerank_inference_id=LOGIT_RERANKER
    )
    key = engine.cluster.as_user(engine.keys.key_for("u1"))
    held = key.security.has_privileges(cluster=["monitor_inference"])
    assert held["cluster"] == {"monitor_inference": False}, "the intersection with the minter's rights"
    service = MemoryService(engine)
    service.write("u1", "The hub runs firmware 2.1")
    with capture_logs() as logs:
        assert service.recall("u1", "hub firmware", min_relevance=0.0, touch=False)
    (warning,) = [e for e in logs if e["event"] == "elasticsearch_endpoint_unreadable"]
    assert "monitor_inference" in warning["fix"] and "administrator" in warning["fix"]


def test_a_failed_endpoint_read_is_asked_again_later(fake_es, tmp_path, monkeypatch):
    """One 503 on the first `GET _inference` pinned "probability" (and "dense") for the life of
    the process; a read that worked is never repeated."""
    fake_es.inference_ids.add(LOGIT_RERANKER)
    engine = bootstrapped_engine(
        fake_es, tmp_path / "keys.json", users=("u1",), rerank_inference_id=LOGIT_RERANKER
    )
    service = MemoryService(engine)
    service.write("u1", "The hub runs firmware 2.1")
    reads = lambda: len(fake_es.requests_to("GET", rf"^/_inference/.*{LOGIT_RERANKER}$"))
    fake_es.fail("GET", r"^/_inference/", 503, {"error": {"type": "unavailable", "reason": "busy"}}, times=2)
    service.recall("u1", "hub firmware", touch=False)
    service.recall("u1", "hub firmware", touch=False)
    assert reads() == 2, "the failure stands for a while (user key, then writer: one try each)"
    monkeypatch.setattr("atlas_mcp.engines.elasticsearch.endpoints.RETRY_S", 0.0)
    engine.recall.endpoints.forget()
    fake_es.fail("GET", r"^/_inference/", 503, {"error": {"type": "unavailable", "reason": "busy"}}, times=2)
    service.recall("u1", "hub firmware", touch=False)
    service.recall("u1", "hub firmware", touch=False)
    service.recall("u1", "hub firmware", touch=False)
    assert reads() == 2 + 2 + 1, "asked again once the wait is over, then kept"
    assert engine.recall.rerank_scale(None) == "logit"


@pytest.mark.parametrize("similarity", ["cosine", "dot_product", "l2_norm", "max_inner_product"])
def test_the_dense_score_is_read_by_the_endpoints_similarity(fake_es, tmp_path, similarity):
    """`(1 + cos) / 2` holds for cosine and dot_product only: an l2_norm or max_inner_product
    endpoint's score, read that way, gave wrong cosines."""
    endpoint = f"my-{similarity}-embedder"
    fake_es.inference_ids.add(endpoint)
    fake_es.endpoints[endpoint] = {
        "task_type": "text_embedding",
        "service": "custom",
        "model_id": "mini",
        "similarity": similarity,
    }
    fake_es.licence = "trial"
    engine = bootstrapped_engine(
        fake_es,
        tmp_path / "keys.json",
        users=("u1",),
        embedding_inference_id=endpoint,
        rerank_inference_id="",
    )
    service = MemoryService(engine)
    facts = {service.write("u1", fact).id: fact for fact in FACTS}
    query = "which firmware does the hub run"
    for candidate in engine.candidates(service.recall_plan(RecallQuery("u1", query))):
        if candidate.dense_similarity is None:
            continue
        expected = float(fake_es._vector(query) @ fake_es._vector(candidate.memory.search_text()))
        assert candidate.dense_similarity == pytest.approx(expected, abs=1e-9), facts[candidate.memory.id]


# -- issue 33 N7, N13, N14: what 429s and failed shards do to a recall, a listing, a write --------


def _recording_sleeps(engine) -> list[float]:
    sleeps: list[float] = []
    engine.cluster._sleep = sleeps.append  # the waits are recorded, not slept
    return sleeps


def test_usage_bookkeeping_never_holds_a_finished_recall_for_long(fake_es, tmp_path):
    """Each usage call went through the whole retry budget, honouring Retry-After up to
    max_retry_wait (defaults 3 x 10 s): a recall whose answer was ready waited tens of seconds."""
    engine = bootstrapped_engine(
        fake_es, tmp_path / "keys.json", users=("u1",), max_retries=3, max_retry_wait=10.0, retry_backoff=0.5
    )
    service = MemoryService(engine)
    fact = service.write("u1", "The user drinks oat milk")
    sleeps = _recording_sleeps(engine)
    storm = {"error": {"type": "es_rejected_execution_exception", "reason": "queue full"}}
    fake_es.fail("POST", r"^/_mget$", 429, storm, headers={"Retry-After": "10"}, times=99)
    assert service.recall("u1", "oat milk")[0].memory.id == fact.id
    assert sum(sleeps) <= 0.5, sleeps
    fake_es.faults.clear()
    real, rejected = fake_es._bulk_item, []

    def reject_updates(who, op, meta, body):
        from .fake_es import EsError

        if op == "update":
            rejected.append(meta["_id"])
            raise EsError(429, "es_rejected_execution_exception", "rejected execution of bulk shard request")
        return real(who, op, meta, body)

    fake_es._bulk_item = reject_updates
    sleeps.clear()
    service.recall("u1", "oat milk")
    assert rejected and sum(sleeps) <= 0.5, sleeps


def test_a_listing_with_a_failed_shard_is_asked_again_then_refused(es_engine, fake_es):
    """With `allow_partial_search_results` (the default) a failed shard leaves the others' hits:
    taken as complete, a listing or an export silently lacked that index's memories."""
    service = MemoryService(es_engine)
    fact = service.write("u1", "The hub runs firmware 2.1")
    event = service.write("u1", "Flew to Lisbon", "episodic")
    semantic = es_engine.layout.concrete(MemoryType.SEMANTIC)
    fake_es.fail_shard(semantic, times=1)
    assert {m.id for m in es_engine.list(ListQuery("u1"))} == {fact.id, event.id}
    fake_es.fail_shard(semantic, times=99)
    with pytest.raises(BackendUnavailable, match="only in part.*1 of 3 shards failed"):
        es_engine.list(ListQuery("u1"))


def test_a_recall_branch_with_a_failed_shard_or_a_rejection_is_asked_again(fake_es, tmp_path):
    engine = bootstrapped_engine(fake_es, tmp_path / "keys.json", users=("u1",), rerank_inference_id="")
    service = MemoryService(engine)
    fact = service.write("u1", "The hub runs firmware 2.1")
    fake_es.rejected_searches = 1  # one branch of the _msearch answers 429
    assert service.recall("u1", "hub firmware", touch=False)[0].memory.id == fact.id
    fake_es.fail_shard(engine.layout.concrete(MemoryType.SEMANTIC), times=1)
    assert service.recall("u1", "hub firmware", touch=False)[0].memory.id == fact.id
    fake_es.fail_shard(engine.layout.concrete(MemoryType.SEMANTIC), times=99)
    with pytest.raises(BackendUnavailable, match="only in part"):
        service.recall("u1", "hub firmware", touch=False)


def test_a_reranked_recall_over_a_failed_shard_is_retried(es_engine, fake_es):
    """A compound retriever's inner searches allow no partial results: the whole search fails
    (503, wrapped by the rrf) and is asked again."""
    fact = MemoryService(es_engine).write("u1", "The hub runs firmware 2.1")
    fake_es.fail_shard(es_engine.layout.concrete(MemoryType.SEMANTIC), times=1)
    assert MemoryService(es_engine).recall("u1", "hub firmware", touch=False)[0].memory.id == fact.id


def test_a_rejected_write_item_is_sent_again(es_engine, fake_es):
    """A bulk item rejected with 429 was not applied: the write failed with "nothing was
    changed" although sending it again would have worked."""
    service = MemoryService(es_engine)
    old = service.write("u1", "The user lives in Lyon")
    real, state = fake_es._bulk_item, {"creates": 0, "updates": 0}

    def reject_first(who, op, meta, body):
        from .fake_es import EsError

        if op in ("create", "update") and state[f"{op}s"] == 0:
            state[f"{op}s"] += 1
            raise EsError(429, "es_rejected_execution_exception", "rejected execution of bulk shard request")
        return real(who, op, meta, body)

    fake_es._bulk_item = reject_first
    new = service.write("u1", "The user lives in Porto", supersedes_id=old.id)
    assert state == {"creates": 1, "updates": 1}
    stored = {m.id: m for m in es_engine.list(ListQuery("u1"))}
    assert stored[old.id].superseded_by == new.id and new.id in stored


# -- issue 33 N4: a revoke the cluster answers with an empty success ------------------------------


def _other_admin(engine, fake_es):
    fake_es.add_admin("other-admin", "other-password")
    config = engine.cluster.config.model_copy(
        update={"username": "other-admin", "password": "other-password"}
    )
    return Cluster(connect(config, admin=True), config)


def test_revoking_a_key_another_administrator_owns_keeps_its_record(es_engine, fake_es):
    """With `owner: true` the cluster looks up the caller's own live keys only and answers an
    empty success for anyone else's: `users revoke` said "invalidated 0 key(s)", deleted the only
    record of the key, and the key kept working."""
    other = _other_admin(es_engine, fake_es)
    stored = es_engine.keys.stored()["u1"]
    try:
        with pytest.raises(ConfigurationError, match=rf"{stored.id}.*still valid.*another credential"):
            admin.revoke_user(other, es_engine.keys, es_engine.layout, "u1")
        assert es_engine.keys.stored()["u1"] == stored and not fake_es.keys[stored.id].invalidated
        with _admin(es_engine) as owner:  # its owner invalidates it; revoke then completes
            owner.client.security.invalidate_api_key(ids=[stored.id], owner=True)
        assert admin.revoke_user(other, es_engine.keys, es_engine.layout, "u1") == 0
        assert "u1" not in es_engine.keys.stored()
    finally:
        other.close()


def test_rotating_a_key_another_administrator_owns_is_refused_whole(es_engine, fake_es):
    other = _other_admin(es_engine, fake_es)
    old = es_engine.keys.stored()["u2"]
    try:
        with pytest.raises(ConfigurationError, match="still valid"):
            admin.add_user(other, es_engine.keys, es_engine.layout, "u2", None)
    finally:
        other.close()
    assert es_engine.keys.stored()["u2"] == old and not fake_es.keys[old.id].invalidated
    minted = [k for k in fake_es.keys.values() if k.owner.name == "other-admin"]
    assert minted and all(k.invalidated for k in minted), "the new key was withdrawn"


# -- issue 33 N5: an export reads one snapshot, each memory once ---------------------------------


def test_an_export_reads_one_point_in_time_once_and_misses_nothing_forgotten_meanwhile(
    fake_es, tmp_path, monkeypatch
):
    """Export paged by offset: every page opened a new point in time and read (and dropped) all
    the hits before it, n²/page hits in all; and a forget between pages shifted the later ones
    up, so one live memory was never exported."""
    from atlas_mcp import portability

    monkeypatch.setattr("atlas_mcp.engines.elasticsearch.requests.LIST_PAGE", 4)
    engine = bootstrapped_engine(fake_es, tmp_path / "keys.json", users=("u1",))
    service = MemoryService(engine)
    written = [service.write("u1", f"fact number {n}").id for n in range(20)]
    fake_es.requests.clear()
    exported = portability.iter_memories(engine, "u1")
    first = [next(exported).id for _ in range(6)]
    later = next(i for i in reversed(written) if i not in first)
    engine.forget("u1", later)  # while the export runs
    rest = [m.id for m in exported]
    assert sorted(first + rest) == sorted(written), "the snapshot the export began with, each once"
    assert len(fake_es.requests_to("POST", r"/_pit$")) == 1, "one point in time for the whole export"
    pages = fake_es.requests_to(None, r"^/_search$")
    assert sum(r.json()["size"] for r in pages) <= len(written) + 4, "each memory read once (O(n))"


# -- issue 33 N16: a key reaches its own deployment's indices only --------------------------------


def test_a_key_does_not_reach_a_deployment_whose_prefix_extends_its_own(fake_es, tmp_path):
    """Granted `<prefix>-<type>*`, a key of deployment `t` also read deployment `t-semantic`'s
    indices (`t-semantic-semantic`, ...), that user's memories and its catalog included."""
    ours = bootstrapped_engine(fake_es, tmp_path / "ours.json", users=("u1",), index_prefix="tn")
    theirs = bootstrapped_engine(fake_es, tmp_path / "theirs.json", users=("u1",), index_prefix="tn-semantic")
    secret = MemoryService(theirs).write("u1", "the other deployment's memory")
    key = ours.cluster.as_user(ours.keys.key_for("u1"))
    from elasticsearch import AuthorizationException

    with pytest.raises(AuthorizationException):
        key.search(index=theirs.layout.alias(MemoryType.SEMANTIC), body={"query": {"match_all": {}}})
    with pytest.raises(AuthorizationException):
        key.mget(docs=[{"_index": theirs.layout.alias(MemoryType.SEMANTIC), "_id": secret.id}])
    assert MemoryService(ours).recall("u1", "memory", touch=False) == []


# -- issue 33 N2: 9.0.0-9.0.1 refuse the reranker to read-only keys ------------------------------


@pytest.mark.parametrize("version", ["9.0.0", "9.0.1"])
def test_recall_on_a_release_that_refuses_the_reranker_to_keys_still_answers(fake_es, tmp_path, version):
    """elastic/elasticsearch#128328: the reranker ran its inference as the searching user, which
    no read-only key may; every recall with the default rerank endpoint was a 403 tool error."""
    fake_es.version = version
    engine = bootstrapped_engine(fake_es, tmp_path / "keys.json", users=("u1",))
    service = MemoryService(engine)
    ids = {fact: service.write("u1", fact).id for fact in FACTS}
    with capture_logs() as logs:
        hits = service.recall("u1", "which firmware does the hub run", touch=False)
    assert hits[0].memory.id == ids["The hub runs firmware 2.1 since March"]
    assert hits[0].explanation.reranker != "engine" and engine.info.reranks_server_side is False
    (warning,) = [e for e in logs if e["event"] == "elasticsearch_rerank_refused"]
    assert "9.0.2" in warning["fix"]
    fake_es.requests.clear()
    assert service.recall("u1", "garage door opener brand", touch=False)[0].memory.id == ids[FACTS[0]]
    assert not fake_es.requests_to("POST", r"/_search$"), "later recalls go straight to the branches"


# -- issue 33 N15: BM25 statistics are the shard's, whoever owns the documents --------------------


def test_bm25_statistics_include_other_users_memories(es_engine):
    """Document-level security filters hits, not term statistics: another user's memories change
    the IDF of a user's own matches (the fake computed IDF per user, more congruent than a cluster)."""
    service = MemoryService(es_engine)
    mine = service.write("u1", "The zebra crossing near the bakery")
    service.write("u1", "The user likes tea")
    plan = service.recall_plan(RecallQuery("u1", "zebra crossing"))
    body = {"size": 10, "query": rq.lexical_query(plan)}
    key = es_engine.cluster.as_user(es_engine.keys.key_for("u1"))

    def score() -> float:
        hits = key.search(index=[es_engine.layout.alias(MemoryType.SEMANTIC)], body=body)["hits"]["hits"]
        return {h["_id"]: h["_score"] for h in hits}[mine.id]

    alone = score()
    for n in range(6):
        service.write("u2", f"zebra crossing number {n}")
    assert score() < alone, "u2's memories (invisible to u1) lowered the IDF of u1's match"


# -- issue 33 N6: Serverless has API keys only ----------------------------------------------------


def test_an_evaluation_runs_on_serverless_with_the_admin_api_key(fake_es, tmp_path):
    """No username/password on Serverless, and an API key can mint no key with a role descriptor:
    the evaluation's throw-away users get keys derived from the administrator's key (no DLS; the
    owner filter keeps them apart), all invalidated at the end."""
    from atlas_mcp.config import load_settings
    from atlas_mcp.eval.harness import scratch_service

    from .fake_es import ADMIN_KEY, encode_key

    fake_es.flavour = "serverless"
    config = es_config(
        fake_es.url, index_prefix="srv", username=None, password=None, admin_api_key=encode_key(*ADMIN_KEY)
    )
    settings = load_settings(backend="elasticsearch", data_dir=tmp_path, elasticsearch=config.model_dump())
    with scratch_service(settings) as (service, _):
        sarah = service.write("sarah", "The hub runs firmware 2.1")
        omar = service.write("omar", "Omar's hub runs firmware 3.0")
        assert [h.memory.id for h in service.recall("sarah", "hub firmware", touch=False)] == [sarah.id]
        assert [h.memory.id for h in service.recall("omar", "hub firmware", touch=False)] == [omar.id]
    derived = [k for k in fake_es.keys.values() if k.owner is fake_es.admin_by_key and k.id != ADMIN_KEY[0]]
    assert len(derived) == 2 and all(k.invalidated and not k.descriptors for k in derived)
