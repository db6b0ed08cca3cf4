"""Request bodies: golden files (reviewed once by a person) and structural invariants."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest

from atlas_mcp.domain.model import MemoryType
from atlas_mcp.domain.multipliers import FACTORS
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.engines.elasticsearch import admin, priors
from atlas_mcp.engines.elasticsearch import requests as rq
from atlas_mcp.engines.elasticsearch.mappings import CONTENT, SEMANTIC
from atlas_mcp.engines.elasticsearch.priors import MS_PER_DAY, PRIORS_SCRIPT
from atlas_mcp.engines.elasticsearch.scores import describe_endpoint, rerank_relevance

from . import bodies

GOLDEN = Path(__file__).parent / "golden"
FORBIDDEN_NEXT_TO_RETRIEVER = {
    "query",
    "knn",
    "rank",
    "sort",
    "search_after",
    "scroll",
    "pit",
    "rescore",
    "allow_partial_search_results",
}


def golden(name: str, value: Any) -> None:
    """Compare with ``golden/<name>.json``; UPDATE_GOLDEN=1 rewrites it for review."""
    path = GOLDEN / f"{name}.json"
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert json.loads(path.read_text()) == value, (
        f"{name} changed; review the diff and update the golden file"
    )


def test_recall_request_matches_golden():
    request = bodies.RECALL_VARIANTS["default"]
    golden("recall_request", {"method": "POST", "path": request.path, "body": request.body})


def test_bootstrap_plan_matches_golden():
    golden(
        "bootstrap", [r.to_dict() for r in admin.bootstrap_plan(bodies.LAYOUT, bodies.INFERENCE.embedding_id)]
    )


def test_user_key_matches_golden():
    golden("user_key", admin.user_key_plan(bodies.LAYOUT, "sarah", "90d").to_dict())


# -- recall invariants -------------------------------------------------------------------


def walk(retriever: dict[str, Any], parents: tuple[str, ...] = ()):
    ((kind, spec),) = retriever.items()
    yield kind, spec, parents
    for child in [spec["retriever"]] if "retriever" in spec else spec.get("retrievers", []):
        yield from walk(child, (*parents, kind))


@pytest.mark.parametrize("variant", sorted(bodies.RECALL_VARIANTS))
def test_windows_nest_and_nothing_conflicts_with_the_retriever(variant):
    body = bodies.RECALL_VARIANTS[variant].body
    assert not FORBIDDEN_NEXT_TO_RETRIEVER & body.keys()
    windows = [spec["rank_window_size"] for kind, spec, _ in walk(body["retriever"]) if kind != "standard"]
    assert windows and body["size"] <= windows[0]
    assert windows == sorted(windows), "a compound parent's window may not exceed its child's"
    for kind, spec, _ in walk(body["retriever"]):
        if kind == "rrf":
            assert len(spec["retrievers"]) >= 2 and spec["rank_constant"] >= 1
        if kind == "standard":
            assert not FORBIDDEN_NEXT_TO_RETRIEVER - {"query"} & spec.keys()


def test_reranker_reads_the_stored_text_field_with_the_query():
    (top,) = bodies.RECALL_VARIANTS["default"].body["retriever"].values()
    assert top["field"] == CONTENT and top["inference_text"] == bodies.QUERY
    assert top["inference_id"] == bodies.INFERENCE.rerank_id
    assert bodies.RECALL_VARIANTS["default"].body["_source"] == {"excludes": [SEMANTIC]}


def test_the_reranker_window_is_its_own_setting_never_below_k():
    default = bodies.RECALL_VARIANTS["default"].body
    assert (
        default["size"] == _reranker_spec(default)["rank_window_size"] == bodies.INFERENCE.rerank_window == 80
    )
    assert _reranker_spec(default)["retriever"]["rrf"]["rank_window_size"] == 200
    assert bodies.RECALL_VARIANTS["k-100"].body["size"] == 100


def _reranker_spec(body: dict[str, Any]) -> dict[str, Any]:
    return body["retriever"]["text_similarity_reranker"]


def test_bm25_matches_the_content_words_and_the_dense_branch_the_whole_question():
    rrf = _reranker_spec(bodies.RECALL_VARIANTS["default"].body)["retriever"]["rrf"]
    lexical, dense = (b["standard"]["query"]["function_score"]["query"] for b in rrf["retrievers"])
    assert lexical["multi_match"]["query"] == "firmware hub" and dense["semantic"]["query"] == bodies.QUERY
    for name, request in bodies.BRANCHES.items():
        (query,) = request.body["query"]["bool"]["must"]
        assert query == (lexical if name == "bm25" else dense), "the fallback branches match the same text"
        assert "function_score" not in json.dumps(request.body), "no priors: the service applies them once"


def test_listing_pages_are_totally_ordered_over_a_point_in_time():
    for name in ("list", "list-since", "list-catalog", "list-next"):
        body = bodies.SEARCH_BODIES[name]
        assert body["pit"]["id"] == bodies.PIT and "from" not in body
        assert list(body["sort"][-1]) == ["_shard_doc"], (
            "a unique tiebreaker: search_after never skips a memory"
        )
    assert bodies.SEARCH_BODIES["list-next"]["search_after"][-1] == 41


def branch_filters(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [spec["filter"] for kind, spec, _ in walk(body["retriever"]) if kind == "standard"]


def test_every_branch_is_scoped_to_the_caller_and_hides_superseded():
    filters = branch_filters(bodies.RECALL_VARIANTS["default"].body)
    assert len(filters) == 2
    for f in filters:
        (owner,) = f["bool"]["filter"]
        should = owner["bool"]["should"]
        assert {"term": {"user_id": {"value": "sarah"}}} in should
        assert {"bool": {"must_not": [{"exists": {"field": "user_id"}}]}} in should
        assert owner["bool"]["minimum_should_match"] == 1
        assert f["bool"]["must_not"] == [{"exists": {"field": "superseded_by"}}]


def test_without_catalog_shared_docs_are_not_admitted_and_superseded_can_be_asked_for():
    for f in branch_filters(bodies.RECALL_VARIANTS["own-only"].body):
        assert f["bool"]["filter"] == [{"term": {"user_id": {"value": "sarah"}}}]
    for f in branch_filters(bodies.RECALL_VARIANTS["with-superseded"].body):
        assert "must_not" not in f["bool"]


def test_memory_type_selection_is_the_search_path():
    assert bodies.RECALL_VARIANTS["own-only"].indices == ("atlas-semantic",)
    assert (
        bodies.RECALL_VARIANTS["default"].path
        == "/atlas-episodic,atlas-semantic,atlas-procedural,atlas-catalog/_search"
    )


def test_both_branches_are_scored_by_the_priors_script():
    for kind, spec, _ in walk(bodies.RECALL_VARIANTS["default"].body["retriever"]):
        if kind == "standard":
            fs = spec["query"]["function_score"]
            assert fs["boost_mode"] == "multiply"
            (function,) = fs["functions"]
            assert function["script_score"]["script"]["source"] == PRIORS_SCRIPT


# -- the Painless script -------------------------------------------------------------------


def test_every_doc_access_in_the_script_is_guarded():
    """A field unmapped in one of the searched indices makes doc['x'] throw: guard it on the
    same line or in the ``if`` that opens the line's block."""
    lines = PRIORS_SCRIPT.splitlines()
    for number, line in enumerate(lines):
        guard_zone = line + (lines[number - 1] if number and lines[number - 1].rstrip().endswith("{") else "")
        for field in re.findall(r"doc\['([a-z_]+)'\]", line):
            if field != "_index":
                assert f"doc.containsKey('{field}') && doc['{field}'].size() > 0" in guard_zone, (
                    f"unguarded doc['{field}']: {line.strip()}"
                )


def test_script_params_are_exactly_what_the_script_reads():
    params = priors.priors_params(bodies.LAYOUT, ScoringPolicy(), bodies.NOW)
    used = set(re.findall(r"params\.([a-z_]+)", PRIORS_SCRIPT))
    assert used == set(params)


def test_every_multiplier_is_in_the_priors_script_or_left_out_with_a_reason():
    """The script picks the reranker's window under the same multipliers that rank after it: a
    new factor of ``Multipliers`` must be computed here too, or say why it cannot be."""
    assert set(FACTORS) == set(priors.PRIORS_FACTORS) | set(priors.PRIORS_LEAVE_OUT)
    assert not set(priors.PRIORS_FACTORS) & set(priors.PRIORS_LEAVE_OUT)
    used = set(re.findall(r"params\.([a-z_]+)", PRIORS_SCRIPT))
    for factor, names in priors.PRIORS_FACTORS.items():
        assert set(names) <= used, f"the priors script does not compute {factor}"


def test_script_params_come_from_the_one_scoring_policy():
    policy = ScoringPolicy(
        decay_offset_days=10,
        decay_scale_days=20,
        decay_value=0.25,
        use_count_weight=0.3,
        catalog_prior=0.7,
        track_record_prior=4,
        track_record_weight=0.1,
    )
    params = priors.priors_params(bodies.LAYOUT, policy, bodies.NOW)
    assert params["decay_offset_ms"] == 10 * MS_PER_DAY and params["decay_scale_ms"] == 20 * MS_PER_DAY
    assert (params["decay_value"], params["use_count_weight"], params["catalog_prior"]) == (0.25, 0.3, 0.7)
    assert (params["track_record_prior"], params["track_record_weight"]) == (4, 0.1)
    assert params["now_ms"] == int(bodies.NOW.timestamp() * 1000)
    assert params["episodic"] == "atlas-episodic-v" and params["catalog"] == "atlas-catalog-v"


def test_every_index_stem_distinguishes_its_type():
    stems = [bodies.LAYOUT.stem(k) for k in MemoryType]
    concrete = [bodies.LAYOUT.concrete(k) for k in MemoryType]
    for kind, name in zip(MemoryType, concrete, strict=True):
        assert [s for s in stems if name.startswith(s)] == [bodies.LAYOUT.stem(kind)]


# -- mappings, keys, bulk ------------------------------------------------------------------


def test_every_memory_index_copies_text_into_one_semantic_field_with_one_endpoint():
    memory_indices = {n: b for n, b in bodies.INDEX_BODIES.items() if "state" not in n}
    assert len(memory_indices) == 4
    for name, body in memory_indices.items():
        props = body["mappings"]["properties"]
        assert body["mappings"]["dynamic"] == "strict"
        assert {k: v for k, v in props[CONTENT].items() if k != "fields"} == {
            "type": "text",
            "copy_to": SEMANTIC,
        }
        # CJK bigrams and European stemming through built-in analyzers only (no plugin)
        assert {f["analyzer"] for f in props[CONTENT]["fields"].values()} >= {
            "cjk",
            "german",
            "spanish",
            "french",
        }
        assert props[SEMANTIC] == {"type": "semantic_text", "inference_id": bodies.INFERENCE.embedding_id}
        assert ("user_id" in props) == ("catalog" not in name), "catalog docs must have no user_id"


def test_the_state_index_has_no_semantic_field():
    (state,) = [b for n, b in bodies.INDEX_BODIES.items() if "state" in n]
    assert all(p["type"] != "semantic_text" for p in state["mappings"]["properties"].values())


def test_user_key_is_read_only_with_one_dls_entry_and_inference():
    (descriptor,) = bodies.KEY_BODY["role_descriptors"].values()
    (entry,) = descriptor["indices"]
    assert entry["privileges"] == ["read"] and "query" in entry
    assert len(entry["names"]) == len(set(entry["names"])) == 8  # each alias, and its -v* indices
    assert not [n for n in entry["names"] if n.endswith("*") and not n.endswith("-v*")]
    assert descriptor["cluster"] == ["monitor_inference"]
    assert bodies.KEY_BODY["expiration"] == "90d"


def test_bulk_updates_are_partial_documents_never_scripts():
    updates = [line for line in bodies.BULK_LINES if "doc" in line or "script" in line]
    assert updates and all(set(u) == {"doc"} for u in updates)
    (conditional,) = [
        line["update"] for line in bodies.BULK_LINES if "update" in line and "if_seq_no" in line["update"]
    ]
    assert (conditional["if_seq_no"], conditional["if_primary_term"]) == (42, 1)


def test_every_write_requires_an_alias():
    actions = [
        next(iter(line.values())) | {"op": op}
        for line in bodies.BULK_LINES
        for op in line
        if op in ("create", "index", "update")
    ]
    assert len(actions) == 5 and all(a["require_alias"] is True for a in actions)


def test_a_partial_update_is_read_as_the_cluster_merges_it():
    source = {"metadata": {"a": 1, "nested": {"x": 1, "y": 2}}, "superseded_by": "m2", "use_count": 1}
    merged = rq.as_merged(source, {"metadata": {"nested": {"x": 3}}, "superseded_by": None})
    assert merged == {"metadata": {"a": 1, "nested": {"x": 3, "y": 2}}, "use_count": 1}


def test_changed_doc_leaves_the_embedded_text_alone_unless_it_changed():
    from atlas_mcp.domain.model import Memory
    from atlas_mcp.engines.elasticsearch.documents import changed_doc

    stored = Memory("p1", MemoryType.PROCEDURAL, "u1", "Reset the router", bodies.NOW, name="Reset")
    assert changed_doc(stored, stored.evolve(success_count=2)) == {"success_count": 2}
    renamed = changed_doc(stored, stored.evolve(name="Reboot"))
    assert renamed["name"] == "Reboot" and renamed[CONTENT] == "Reboot\nReset the router"


# -- reranker score ------------------------------------------------------------------------


def shifted(raw: float) -> float:
    return max(raw, 0.0) + min(math.exp(raw), 1.0)  # elastic/elasticsearch#120930


@pytest.mark.parametrize("raw", [0.0, 0.03, 0.5, 0.97, 1.0])
def test_probability_scores_are_recovered_exactly_from_the_shifted_score(raw):
    assert rerank_relevance([shifted(raw)], "probability") == pytest.approx([raw])


@pytest.mark.parametrize("raw", [-6.0, -0.5, 0.0, 2.0, 7.0])
def test_logit_scores_become_sigmoids(raw):
    assert rerank_relevance([shifted(raw)], "logit") == pytest.approx([1.0 / (1.0 + math.exp(-raw))])


@pytest.mark.parametrize("scale", ["probability", "logit"])
def test_the_rerankers_order_survives_whatever_the_endpoint_returns(scale):
    """Elastic Rerank returns raw logits (elastic/elasticsearch#118483): read as probabilities and
    clamped, every negative logit became 0 and every logit above 1 became 1 (ties, order by id)."""
    logits = [7.5, 3.0, 1.2, 0.4, -0.3, -2.0, -9.0]
    relevance = rerank_relevance([shifted(x) for x in logits], scale)
    assert relevance == sorted(relevance, reverse=True) and len(set(relevance)) == len(logits)
    assert all(0.0 <= r <= 1.0 for r in relevance)


@pytest.mark.parametrize(
    ("service", "scale"),
    [
        ("elasticsearch", "logit"),
        ("elastic", "probability"),
        ("cohere", "probability"),
        ("jinaai", "probability"),
    ],
)
def test_the_scale_comes_from_the_endpoints_service(service, scale):
    found = {
        "endpoints": [
            {
                "inference_id": "r",
                "task_type": "rerank",
                "service": service,
                "service_settings": {"model_id": "m"},
            }
        ]
    }
    assert describe_endpoint(found).rerank_scale == scale
