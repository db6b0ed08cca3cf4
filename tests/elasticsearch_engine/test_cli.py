"""The Elasticsearch commands: dry runs print exactly what would be sent; real runs go to the fake."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from atlas_mcp.cli import cli
from atlas_mcp.domain import ranking
from atlas_mcp.domain.limits import Limits
from atlas_mcp.domain.model import utcnow
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.engines.elasticsearch import admin
from atlas_mcp.engines.elasticsearch.layout import IndexLayout

from . import bodies
from .fake_es import ADMIN, ADMIN_KEY, WRITER_KEY, encode_key


def es_env(url: str, data_dir: Path, prefix: str = "cli", **extra: str) -> dict[str, str]:
    return {
        "ATLAS_BACKEND": "elasticsearch",
        "ATLAS_DATA_DIR": str(data_dir),
        "ATLAS_ELASTICSEARCH__URL": url,
        "ATLAS_ELASTICSEARCH__API_KEY": encode_key(*WRITER_KEY),
        "ATLAS_ELASTICSEARCH__USERNAME": ADMIN[0],
        "ATLAS_ELASTICSEARCH__PASSWORD": ADMIN[1],
        "ATLAS_ELASTICSEARCH__INDEX_PREFIX": prefix,
        "ATLAS_ELASTICSEARCH__RETRY_BACKOFF": "0.01",
        **extra,
    }


@pytest.fixture
def run(fake_es, tmp_path, monkeypatch):
    def invoke(*args: str, **extra_env: str):
        for key, value in es_env(fake_es.url, tmp_path / "data", **extra_env).items():
            monkeypatch.setenv(key, value)
        return CliRunner().invoke(cli, list(args))

    return invoke


def test_dry_runs_print_every_body_and_send_nothing(fake_es, run):
    result = run("bootstrap", "--dry-run")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed == [
        r.to_dict() for r in admin.bootstrap_plan(IndexLayout("cli"), bodies.INFERENCE.embedding_id)
    ]
    key = json.loads(run("users", "add", "sarah", "--dry-run").output)
    assert key["path"] == "/_security/api_key" and key["body"]["name"] == "atlas-user-cli/sarah"
    assert fake_es.requests == []


def test_es_query_prints_the_recall_request(fake_es, run):
    result = run("es-query", "--user", "sarah", "--k", "5", "--type", "semantic", "hub firmware")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed["path"] == "/cli-semantic/_search"  # named types are the whole filter
    reranker = printed["body"]["retriever"]["text_similarity_reranker"]
    assert reranker["inference_text"] == "hub firmware" and printed["body"]["size"] == 80
    assert reranker["retriever"]["rrf"]["rank_window_size"] == ScoringPolicy().retrieval.rrf_window
    assert fake_es.requests == []
    assert run("es-query", "--user", "sarah", "--k", "0", "x").exit_code != 0


def test_es_query_plans_as_recall_does(fake_es, run):
    """One plan: the time phrase ("last weekend") shapes ranking and stays out of BM25, in the
    printed request as in recall's own plan."""
    printed = json.loads(run("es-query", "--user", "sarah", "what did I cook last weekend").output)
    matches = _values(printed, "multi_match")
    assert [m["query"] for m in matches] == ["cook"]  # the BM25 branch of the one search
    plan = ranking.plan(
        ScoringPolicy(), Limits(), ranking.RecallQuery("sarah", "what did I cook last weekend"), utcnow()
    )
    assert plan.lexical_text == "cook" and plan.intent.window is not None
    unranked = json.loads(
        run(
            "es-query",
            "--user",
            "sarah",
            "what did I cook last weekend",
            ATLAS_ELASTICSEARCH__RERANK_INFERENCE_ID="",
        ).output
    )
    assert [m["query"] for m in _values(unranked, "multi_match")] == ["cook"]


def _values(tree, key: str) -> list:
    """Every value under ``key`` anywhere in a JSON tree."""
    if isinstance(tree, dict):
        return [v for k, v in tree.items() if k == key] + [x for v in tree.values() for x in _values(v, key)]
    if isinstance(tree, list):
        return [x for v in tree for x in _values(v, key)]
    return []


def test_bootstrap_is_idempotent(fake_es, run):
    first = run("bootstrap")
    assert first.exit_code == 0 and first.output.count("created") == 5
    second = run("bootstrap")
    assert second.exit_code == 0 and second.output.count("exists") == 5
    assert len(fake_es.indices) == 5


def test_users_add_rotates_and_revoke_invalidates(fake_es, run, tmp_path):
    run("bootstrap")
    added = run("users", "add", "sarah")
    assert added.exit_code == 0, added.output
    key_file = tmp_path / "data" / "es-keys.json"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    first = json.loads(key_file.read_text())["users"]["sarah"]
    assert first["encoded"] not in added.output, "keys are never printed"
    run("users", "add", "sarah")
    second = json.loads(key_file.read_text())["users"]["sarah"]
    assert second["id"] != first["id"] and fake_es.keys[first["id"]].invalidated
    revoked = run("users", "revoke", "sarah")
    assert revoked.exit_code == 0 and "invalidated 1 key" in revoked.output
    assert fake_es.keys[second["id"]].invalidated and "sarah" not in json.loads(key_file.read_text())["users"]


def test_minting_without_a_user_credential_is_refused_clearly(run):
    result = run("users", "add", "sarah", ATLAS_ELASTICSEARCH__USERNAME="", ATLAS_ELASTICSEARCH__PASSWORD="")
    assert result.exit_code != 0 and "administration needs a credential" in result.output


def test_doctor_passes_on_a_ready_cluster_and_names_each_fix(fake_es, run):
    run("bootstrap")
    run("users", "add", "sarah")
    fake_es.writer.cluster |= {"monitor", "monitor_inference"}
    fake_es.writer.index["*"].add("view_index_metadata")
    healthy = run("doctor")
    assert healthy.exit_code == 0, healthy.output
    assert (
        "FAIL" not in healthy.output
        and "warn" not in healthy.output
        and "Elasticsearch 9.1.0" in healthy.output
    )
    assert "scores read as probability" in healthy.output
    fake_es.licence = "gold"
    fake_es.inference_ids.discard(".jina-reranker-v2-base-multilingual")
    sick = run("doctor")
    assert sick.exit_code == 1
    assert "[FAIL] licence for RRF and the reranker: cluster licence is gold" in sick.output
    assert "[FAIL] rerank endpoint" in sick.output and "start_trial" in sick.output


def test_doctor_passes_with_a_least_privilege_writer(fake_es, run):
    """read/create_doc/index/delete only: GET / (monitor), _mapping (view_index_metadata) and
    GET _inference (monitor_inference) are 403 for it; that is a warning, not a failure."""
    run("bootstrap")
    run("users", "add", "sarah")
    fake_es.inference_ids.add(".rerank-v1-elasticsearch")
    result = run("doctor", ATLAS_ELASTICSEARCH__RERANK_INFERENCE_ID=".rerank-v1-elasticsearch")
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.output and "[warn] connection: connected as atlas-writer" in result.output
    assert "mapping not checked without `view_index_metadata`" in result.output
    assert (
        "rerank endpoint: .rerank-v1-elasticsearch (rerank, elasticsearch .rerank-v1); scores read as logit"
        in result.output
    )


def test_serverless_runs_on_api_keys_only(fake_es, run):
    """Serverless accepts API keys only (issue 33 N6): `bootstrap`, `users revoke` and doctor run
    with `admin_api_key`; a user's DLS key is made in Kibana (an API key cannot mint one) and
    registered with `users add --api-key`, which checks it. Serverless answers GET / with
    "8.11.0" and build_flavor "serverless", and has no licence API."""
    fake_es.flavour = "serverless"
    fake_es.writer.cluster |= {"monitor", "monitor_inference"}
    refused = run("bootstrap")
    assert refused.exit_code != 0 and "401" in refused.output and "API keys only" in refused.output
    keyed = {
        "ATLAS_ELASTICSEARCH__USERNAME": "",
        "ATLAS_ELASTICSEARCH__PASSWORD": "",
        "ATLAS_ELASTICSEARCH__ADMIN_API_KEY": encode_key(*ADMIN_KEY),
    }
    assert run("bootstrap", **keyed).exit_code == 0 and len(fake_es.indices) == 5
    minted = run("users", "add", "sarah", **keyed)
    assert minted.exit_code != 0 and "Kibana" in minted.output and "--api-key" in minted.output
    body = json.loads(run("users", "add", "sarah", "--dry-run").output)["body"]
    wrong_id, wrong = fake_es.kibana_key(
        "bob's key", json.loads(run("users", "add", "bob", "--dry-run").output)["body"]["role_descriptors"]
    )
    mismatch = run("users", "add", "sarah", "--api-key", wrong, **keyed)
    assert mismatch.exit_code != 0 and "not a read-only key of sarah" in mismatch.output
    key_id, encoded = fake_es.kibana_key("sarah's atlas key", body["role_descriptors"])
    registered = run("users", "add", "sarah", "--api-key", encoded, **keyed)
    assert registered.exit_code == 0 and f"registered key {key_id}" in registered.output, registered.output
    doctor = run("doctor", **keyed)
    assert doctor.exit_code == 0, doctor.output
    assert (
        "[ok  ] connection: Elasticsearch Serverless" in doctor.output and "no licence API" in doctor.output
    )
    assert "[ok  ] reranked recall" in doctor.output
    revoked = run("users", "revoke", "sarah", **keyed)
    assert revoked.exit_code == 0, revoked.output
    assert fake_es.keys[key_id].invalidated and not fake_es.keys[wrong_id].invalidated


def test_doctor_reports_missing_indices(run):
    result = run("doctor")
    assert result.exit_code == 1 and "run `atlas-mcp bootstrap`" in result.output


@pytest.mark.slow
async def test_stdio_server_on_the_elasticsearch_backend(fake_es, run, tmp_path):
    """The production shape: `atlas-mcp serve` as a subprocess, memory in the (fake) cluster."""
    run("bootstrap")
    run("users", "add", "sarah")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_")}
    env |= es_env(fake_es.url, tmp_path / "data")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "atlas_mcp", "serve", "--user", "sarah"], env=env
    )
    async with Client(params) as client:
        written = await client.call_tool("write_memory", {"text": "Sarah's hub runs firmware 2.1"})
        assert not written.is_error, written.content[0].text
        recalled = await client.call_tool("recall_memory", {"query": "hub firmware"})
        assert [m["id"] for m in recalled.structured_content["memories"]] == [
            written.structured_content["id"]
        ]
    searches = fake_es.requests_to(None, r"/_search$")
    sarah = json.loads((tmp_path / "data" / "es-keys.json").read_text())["users"]["sarah"]["id"]
    assert searches and {r.auth for r in searches} == {("apikey", sarah)}


def test_bootstrap_dry_run_maps_no_date_as_date_nanos(run):
    """date_nanos cannot hold an instant before 1970 or after 2262 (issue 33 N1)."""
    printed = json.loads(run("bootstrap", "--dry-run").output)
    types = [
        (request["path"], name, spec.get("type"))
        for request in printed
        for name, spec in request["body"]["mappings"]["properties"].items()
    ]
    assert not [t for t in types if t[2] == "date_nanos"], types
    assert {"created_at", "occurred_at"} <= {name for _, name, kind in types if kind == "date"}


def test_doctor_asks_for_the_licence_the_configuration_needs(fake_es, run):
    """Without server-side rerank and with an EIS embedding endpoint, Platinum (DLS) is enough;
    an ML-node endpoint needs Enterprise for inference (issue 33 N11)."""
    run("bootstrap")
    run("users", "add", "sarah")
    fake_es.writer.cluster |= {"monitor", "monitor_inference"}
    fake_es.licence = "platinum"
    eis = run("doctor", ATLAS_ELASTICSEARCH__RERANK_INFERENCE_ID="")
    assert "[FAIL] licence" not in eis.output, eis.output
    fake_es.inference_ids.add(".multilingual-e5-small-elasticsearch")
    ml_node = run(
        "doctor",
        ATLAS_ELASTICSEARCH__RERANK_INFERENCE_ID="",
        ATLAS_ELASTICSEARCH__EMBEDDING_INFERENCE_ID=".multilingual-e5-small-elasticsearch",
    )
    assert "[FAIL] licence for inference" in ml_node.output and "elasticsearch" in ml_node.output


def test_users_add_says_what_a_key_from_this_administrator_will_lack(fake_es, run):
    """A key can do no more than its minter: an administrator without `monitor_inference` (the
    role the docs once gave) mints keys that cannot read the endpoints, and doctor's fix names the
    administrator, not `users add` alone (issue 33 N3)."""
    run("bootstrap")
    fake_es.admin.cluster.discard("monitor_inference")
    added = run("users", "add", "sarah")
    assert added.exit_code == 0, added.output
    assert "warning:" in added.output and "`monitor_inference`" in added.output
    doctor = run("doctor")
    assert "[FAIL] key of sarah: missing monitor_inference" in doctor.output
    assert "administrator" in doctor.output.split("[FAIL] key of sarah")[1]
    fake_es.admin.index.clear()  # no read at all: a key would be useless
    refused = run("users", "add", "bob")
    assert refused.exit_code != 0 and "lacks `read`" in refused.output


def test_bootstrap_names_the_privilege_it_needs(fake_es, run):
    """Creating an index with its alias needs `manage` on both names: `create_index`, which the
    docs asked for, is refused (issue 33 N10)."""
    fake_es.admin.index = {"*": {"create_index", "view_index_metadata", "read"}}
    refused = run("bootstrap")
    assert refused.exit_code != 0 and "`manage`" in refused.output and "bootstrap" in refused.output
    assert not fake_es.indices
    fake_es.admin.index = {"*": {"manage", "read"}}
    assert run("bootstrap").exit_code == 0 and len(fake_es.indices) == 5


def test_doctor_rejects_a_release_that_refuses_the_reranker_to_keys(fake_es, run):
    """9.0.0 and 9.0.1 fail every server-reranked recall under a user key (issue 33 N2): doctor
    says so from the version, and from a reranked search under a key when the version is hidden."""
    run("bootstrap")
    run("users", "add", "sarah")
    fake_es.version = "9.0.1"
    fake_es.writer.cluster |= {"monitor", "monitor_inference"}
    told = run("doctor")
    assert told.exit_code == 1 and "[FAIL] release: Elasticsearch 9.0.1" in told.output
    assert "9.0.2" in told.output and 'rerank_inference_id = ""' in told.output
    fake_es.writer.cluster -= {"monitor"}  # the version is not readable: the search tells
    probed = run("doctor")
    assert probed.exit_code == 1 and "[FAIL] reranked recall" in probed.output and "128328" in probed.output
    fine = run("doctor", ATLAS_ELASTICSEARCH__RERANK_INFERENCE_ID="")
    assert "FAIL" not in fine.output, fine.output
