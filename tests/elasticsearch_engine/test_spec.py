"""Every generated body against the Elasticsearch specification (9.0 = the floor, and main).

The oracle is preprocessed (spec_oracle.py) so unknown keys, wrong types and missing required
keys are errors. Known spec gaps, allow-listed there: decay functions and field-keyed sort
options are left open; "exactly one function/aggregation per container" is not enforced.
"""

from __future__ import annotations

import copy

import pytest

from . import bodies
from .spec_oracle import FLOOR, MAIN, oracle, spec_path

SPECS = [
    pytest.param(
        name,
        marks=pytest.mark.skipif(
            not spec_path(name).exists(), reason=f"{name} missing from tests/elasticsearch_engine/spec"
        ),
    )
    for name in (FLOOR, MAIN)
]


@pytest.fixture(params=SPECS, ids=["9.0", "main"])
def spec(request):
    return oracle(request.param)


@pytest.mark.parametrize("name", sorted(bodies.SEARCH_BODIES))
def test_search_bodies_are_valid(spec, name):
    assert spec.body_errors("POST", "/{index}/_search", bodies.SEARCH_BODIES[name]) == []


@pytest.mark.parametrize("index", sorted(bodies.INDEX_BODIES))
def test_index_bodies_are_valid(spec, index):
    assert spec.body_errors("PUT", "/{index}", bodies.INDEX_BODIES[index]) == []


def test_api_key_bodies_are_valid(spec):
    assert spec.body_errors("POST", "/_security/api_key", bodies.KEY_BODY) == []
    assert spec.body_errors("DELETE", "/_security/api_key", bodies.INVALIDATE_BODY) == []
    assert spec.body_errors("POST", "/_security/_query/api_key", bodies.LIVE_KEYS_BODY) == []


def test_read_bodies_are_valid(spec):
    assert spec.body_errors("POST", "/_mget", bodies.MGET_BODY) == []
    assert spec.body_errors("DELETE", "/_pit", {"id": bodies.PIT}) == []
    for request in bodies.BRANCHES.values():  # the two halves of one _msearch
        assert spec.schema_errors("_global.msearch.MultisearchHeader", {"index": list(request.indices)}) == []


def test_bulk_lines_are_valid(spec):
    for line in bodies.BULK_LINES:
        if set(line) & {"create", "index", "update", "delete"}:
            assert spec.schema_errors("_global.bulk.OperationContainer", line) == [], line
        elif "doc" in line:
            assert spec.schema_errors("_global.bulk.UpdateAction", line) == [], line


def _reranker(body):
    return body["retriever"]["text_similarity_reranker"]


MUTATIONS = {
    "typo in a retriever key": lambda b: _reranker(b).update(rank_windows_size=40),
    "string rank_constant": lambda b: _reranker(b)["retriever"]["rrf"].update(rank_constant="thirty"),
    "reranker without field": lambda b: _reranker(b).pop("field"),
    "two retriever kinds": lambda b: b["retriever"].update(rrf={"retrievers": []}),
    "unknown query type": lambda b: _reranker(b)["retriever"]["rrf"]["retrievers"][1]["standard"].update(
        query={"semantik": {"field": "content_semantic", "query": "q"}}
    ),
    "semantic query without text": lambda b: _reranker(b)["retriever"]["rrf"]["retrievers"][1][
        "standard"
    ].update(query={"semantic": {"field": "content_semantic"}}),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_oracle_rejects_broken_bodies(spec, mutation):
    body = copy.deepcopy(bodies.SEARCH_BODIES["recall/default"])
    MUTATIONS[mutation](body)
    assert spec.body_errors("POST", "/{index}/_search", body) != []


def test_the_oracle_rejects_a_mapping_typo(spec):
    body = copy.deepcopy(next(iter(bodies.INDEX_BODIES.values())))
    body["mappings"]["properties"]["content"]["copy_too"] = "content_semantic"
    assert spec.body_errors("PUT", "/{index}", body) != []
