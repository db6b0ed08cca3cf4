"""``atlas-mcp doctor``: is the cluster ready for atlas-mcp, and if not, what to do about it.

Each check reports ok / warn / fail with the fix. Nothing here changes the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...domain.model import MemoryType, utcnow
from ...domain.scoring import ScoringPolicy
from ...errors import AtlasError
from ..base import RecallPlan
from .failures import RERANK_REFUSED_RELEASES, SUPPORTED_MAJOR, RerankRefused
from .keys import KeyStore
from .layout import ALL_TYPES, IndexLayout
from .mappings import mapping, state_mapping
from .requests import Inference, recall_request
from .scores import EIS_SERVICE, Endpoint, describe_endpoint
from .transport import Cluster

OK, WARN, FAIL = "ok", "warn", "fail"
# What self-managed licences allow (trial = everything); serverless has no licence API.
LICENCE_RANK = {"basic": 0, "standard": 0, "gold": 1, "platinum": 2, "enterprise": 3, "trial": 3}
WRITER_PRIVILEGES = ["read", "create_doc", "index", "delete"]
# Privileges only doctor's own probes use: without them a probe is skipped (warn), never failed.
PROBE_CLUSTER = ["monitor", "monitor_inference"]
PROBE_INDEX = ["view_index_metadata"]
RERANK_REFUSED = (
    "this release refuses the reranker to read-only keys, so every server-reranked recall under a "
    "user's key fails (elastic/elasticsearch#128328); atlas falls back to reranking itself"
)
RERANK_FIX = 'upgrade to 9.0.2 or later, or set [elasticsearch] rerank_inference_id = ""'


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Grants:
    """What the credential doctor runs with may do (``_has_privileges`` needs no privilege)."""

    cluster: frozenset[str]
    missing_index: tuple[str, ...]  # "<privilege> on <pattern>" the writer needs and lacks
    view_metadata: bool


def run_checks(cluster: Cluster, layout: IndexLayout, inference: Inference, keys: KeyStore) -> list[Check]:
    checks = _guarded("connection", lambda: _version(cluster, inference))
    if checks[0].status == FAIL:
        return checks  # nothing else can be checked
    try:
        grants = _grants(cluster, layout)
    except AtlasError as exc:
        return [*checks, Check("writer privileges", FAIL, str(exc))]
    described: dict[str, Endpoint] = {}
    for name, probe in (
        ("inference endpoints", lambda: _inference(cluster, inference, grants, keys, described)),
        ("licence", lambda: _licence(cluster, grants, inference, described)),
        ("indices", lambda: _indices(cluster, layout, inference.embedding_id, grants)),
        ("writer privileges", lambda: _writer(grants)),
        ("user keys", lambda: _user_keys(cluster, layout, keys)),
        ("reranked recall", lambda: _reranked_recall(cluster, layout, inference, keys)),
    ):
        checks.extend(_guarded(name, probe))
    return checks


def _guarded(name: str, probe: Callable[[], Iterable[Check]]) -> list[Check]:
    try:
        return list(probe())
    except AtlasError as exc:
        return [Check(name, FAIL, str(exc))]


def _skipped(name: str, privilege: str) -> Check:
    return Check(
        name,
        WARN,
        f"not checked: this credential lacks `{privilege}` (serving does not need it)",
        f"grant `{privilege}` to check it, or run doctor with an administrator's credential",
    )


def _version(cluster: Cluster, inference: Inference) -> list[Check]:
    """``GET /`` needs ``monitor``; a least-privilege writer is still connected if it authenticates."""
    try:
        info = cluster.call("read the server version", lambda es: es.options(ignore_status=403).info())
    except AtlasError as exc:
        return [Check("connection", FAIL, str(exc))]
    if getattr(info, "meta", None) is not None and info.meta.status == 403:
        who = cluster.call("authenticate", lambda es: es.security.authenticate())
        return [
            Check(
                "connection",
                WARN,
                f"connected as {who.get('username', '?')}; the version is not readable without `monitor`",
                "grant `monitor` to check the version",
            )
        ]
    number = str(info["version"]["number"])
    flavour = info["version"].get("build_flavor", "default")
    if flavour == "serverless":  # Serverless reports a fixed 8.11.0: it is versionless
        return [Check("connection", OK, f"Elasticsearch Serverless, project {info.get('cluster_name', '?')}")]
    if int(number.split(".")[0]) != SUPPORTED_MAJOR:
        return [
            Check(
                "connection",
                FAIL,
                f"Elasticsearch {number}",
                f"atlas-mcp needs Elasticsearch {SUPPORTED_MAJOR}.x",
            )
        ]
    connected = Check(
        "connection", OK, f"Elasticsearch {number} ({flavour}), cluster {info.get('cluster_name', '?')}"
    )
    if number in RERANK_REFUSED_RELEASES and inference.rerank_id is not None:
        return [connected, Check("release", FAIL, f"Elasticsearch {number}: {RERANK_REFUSED}", RERANK_FIX)]
    return [connected]


def _reranked_recall(
    cluster: Cluster, layout: IndexLayout, inference: Inference, keys: KeyStore
) -> list[Check]:
    """One small reranked search under a user's key, as recall sends it: what no version number
    or privilege list can promise (a release that refuses the reranker to keys, an endpoint that
    refuses the window)."""
    if inference.rerank_id is None:
        return []
    users = sorted(set(keys.stored()) | set(keys.configured_users()))
    if not users:
        return [
            Check("reranked recall", WARN, "not checked: no user has a key yet", "`atlas-mcp users add <id>`")
        ]
    policy = ScoringPolicy()  # recall's windows, so the reranker sees the window it will see
    plan = RecallPlan(
        users[0],
        "atlas doctor",
        frozenset(MemoryType),
        False,
        policy.retrieval.rrf_window,
        policy.retrieval.rrf_rank_constant,
        k=1,
    )
    request = recall_request(plan, layout, policy, inference, utcnow())
    try:
        cluster.call(
            f"run a reranked search as {users[0]}",
            lambda es: es.search(index=list(request.indices), body=request.body),
            client=cluster.as_user(keys.key_for(users[0])),
        )
    except RerankRefused:
        return [Check("reranked recall", FAIL, RERANK_REFUSED, RERANK_FIX)]
    except AtlasError as exc:
        return [Check("reranked recall", FAIL, str(exc))]
    return [Check("reranked recall", OK, f"a reranked search runs under the key of {users[0]}")]


def _grants(cluster: Cluster, layout: IndexLayout) -> Grants:
    names = [*(p for k in ALL_TYPES for p in layout.patterns(k)), f"{layout.state_alias}*"]
    result = cluster.call(
        "check writer privileges",
        lambda es: es.security.has_privileges(
            cluster=PROBE_CLUSTER, index=[{"names": names, "privileges": [*WRITER_PRIVILEGES, *PROBE_INDEX]}]
        ),
    )
    held = frozenset(p for p, ok in result.get("cluster", {}).items() if ok)
    index = result.get("index", {})
    missing = tuple(
        f"{p} on {name}"
        for name, privileges in index.items()
        for p, ok in privileges.items()
        if not ok and p in WRITER_PRIVILEGES
    )
    view = all(privileges.get("view_index_metadata") for privileges in index.values())
    return Grants(held, missing, view)


def _licence(
    cluster: Cluster, grants: Grants, inference: Inference, described: dict[str, Endpoint]
) -> list[Check]:
    if "monitor" not in grants.cluster:
        return [_skipped("licence", "monitor")]
    try:
        kind = cluster.call("read the licence", lambda es: es.license.get())["license"]["type"]
    except AtlasError:
        return [Check("licence", WARN, "no licence API (Serverless?); features are managed by Elastic")]
    rank = LICENCE_RANK.get(str(kind).lower(), 0)
    return [
        Check(
            f"licence for {what}",
            OK if rank >= need else FAIL,
            f"cluster licence is {kind}{why}",
            ""
            if rank >= need
            else f"needs {level} or higher: start a trial (POST _license/start_trial) or upgrade{alternative}",
        )
        for what, level, need, why, alternative in _needs(inference, described)
    ]


def _needs(inference: Inference, described: dict[str, Endpoint]) -> list[tuple[str, str, int, str, str]]:
    """(feature, licence, its rank, why it is needed, another way) for this configuration.

    The inference API (``semantic_text`` ingest, the ``semantic`` query, the reranker's model)
    needs Enterprise unless the endpoint runs on the Elastic Inference Service (``elastic``);
    an endpoint doctor could not read is taken to need it.
    """
    needs = [("DLS per-user keys", "platinum", 2, "", "")]
    if inference.rerank_id is not None:
        needs.append(("RRF and the reranker", "enterprise", 3, "", ' (or set rerank_inference_id = "")'))
    licensed = [
        f"{endpoint_id} (service {e.service if e else 'unknown'})"
        for endpoint_id in (inference.embedding_id, inference.rerank_id)
        if endpoint_id is not None and ((e := described.get(endpoint_id)) is None or e.service != EIS_SERVICE)
    ]
    if licensed:
        why = "; the inference API runs " + ", ".join(licensed)
        needs.append(("inference", "enterprise", 3, why, " (or use Elastic Inference Service endpoints)"))
    return needs


def _inference(
    cluster: Cluster, inference: Inference, grants: Grants, keys: KeyStore, described: dict[str, Endpoint]
) -> list[Check]:
    """Reads each endpoint with the writer, or a user key (they carry ``monitor_inference``);
    what each is goes into ``described``."""
    client = None
    if "monitor_inference" not in grants.cluster:
        users = sorted(set(keys.stored()) | set(keys.configured_users()))
        if not users:
            return [_skipped("inference endpoints", "monitor_inference")]
        client = cluster.as_user(keys.key_for(users[0]))
    out = []
    for role, endpoint in (("embedding", inference.embedding_id), ("rerank", inference.rerank_id)):
        if endpoint is None:
            out.append(
                Check(
                    f"{role} endpoint", WARN, "server-side rerank is off; atlas ranks the candidates itself"
                )
            )
            continue
        try:
            found = cluster.call(
                f"read inference endpoint {endpoint}",
                lambda es, e=endpoint: es.inference.get(inference_id=e),
                client=client,
            )
        except AtlasError as exc:
            out.append(
                Check(
                    f"{role} endpoint",
                    FAIL,
                    str(exc),
                    f"create {endpoint} (PUT _inference/...), or point [elasticsearch] {role}_inference_id at "
                    "one listed by GET _inference/_all (ELSER/E5 on ML nodes, or a `custom` endpoint)",
                )
            )
            continue
        described[endpoint] = found_endpoint = describe_endpoint(found)
        detail = (
            f"{endpoint} ({found_endpoint.task_type}, {found_endpoint.service} {found_endpoint.model_id})"
        )
        if role == "rerank":
            detail += f"; scores read as {found_endpoint.rerank_scale}"
        out.append(Check(f"{role} endpoint", OK, detail))
    return out


def _indices(cluster: Cluster, layout: IndexLayout, inference_id: str, grants: Grants) -> list[Check]:
    if not grants.view_metadata:
        return [*(_exists(cluster, layout.alias(k)) for k in ALL_TYPES), _exists(cluster, layout.state_alias)]
    out = []
    for kind in ALL_TYPES:
        alias = layout.alias(kind)
        try:
            found = cluster.call(
                f"read mapping of {alias}", lambda es, a=alias: es.indices.get_mapping(index=a)
            )
        except AtlasError as exc:
            out.append(Check(f"index {alias}", FAIL, str(exc), "run `atlas-mcp bootstrap`"))
            continue
        out.append(_mapping_check(alias, found, mapping(kind, inference_id)))
    alias = layout.state_alias
    try:
        found = cluster.call(f"read mapping of {alias}", lambda es: es.indices.get_mapping(index=alias))
    except AtlasError as exc:
        return [*out, Check(f"index {alias}", FAIL, str(exc), "run `atlas-mcp bootstrap`")]
    return [*out, _mapping_check(alias, found, state_mapping())]


def _exists(cluster: Cluster, alias: str) -> Check:
    """Without ``view_index_metadata``: the index answers a count (``read``), the mapping is unchecked."""
    try:
        cluster.call(f"count {alias}", lambda es: es.count(index=alias))
    except AtlasError as exc:
        return Check(f"index {alias}", FAIL, str(exc), "run `atlas-mcp bootstrap`")
    return Check(
        f"index {alias}",
        WARN,
        "exists; mapping not checked without `view_index_metadata`",
        "grant `view_index_metadata` to check the mapping",
    )


def _mapping_check(alias: str, found: dict[str, Any], expected: dict[str, Any]) -> Check:
    (concrete, body), *_ = found.items()
    problems = mapping_problems(expected, body["mappings"])
    return Check(
        f"index {alias}",
        FAIL if problems else OK,
        "; ".join(problems) if problems else f"{concrete}, mapping as expected",
        "run `atlas-mcp bootstrap --migrate` (see docs/elasticsearch.md)" if problems else "",
    )


def mapping_problems(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Fields that are missing or typed differently (extra settings the server adds are ignored)."""
    have = actual.get("properties", {})
    problems = []
    for field, spec in expected["properties"].items():
        got = have.get(field)
        if got is None:
            problems.append(f"{field} missing")
        elif any(got.get(k) != v for k, v in spec.items() if k in ("type", "inference_id", "value")):
            problems.append(
                f"{field} is {got.get('type')} ({got.get('inference_id', '')}), expected {spec['type']}"
            )
    return problems


def _writer(grants: Grants) -> list[Check]:
    missing = grants.missing_index
    return [
        Check(
            "writer privileges",
            FAIL if missing else OK,
            f"missing {', '.join(missing)}" if missing else "read/create/index/delete on the atlas indices",
            "grant the writer's role these index privileges" if missing else "",
        )
    ]


def _user_keys(cluster: Cluster, layout: IndexLayout, keys: KeyStore) -> list[Check]:
    names = [p for k in ALL_TYPES for p in layout.patterns(k)]
    users = sorted(set(keys.stored()) | set(keys.configured_users()))
    if not users:
        return [Check("user keys", WARN, "no user has a key yet", "`atlas-mcp users add <id>`")]
    out = []
    for user_id in users:
        try:
            as_user = cluster.as_user(keys.key_for(user_id))
            result = cluster.call(
                f"check the key of user {user_id}",
                lambda es: es.security.has_privileges(
                    cluster=["monitor_inference"], index=[{"names": names, "privileges": ["read"]}]
                ),
                client=as_user,
            )
        except AtlasError as exc:
            out.append(
                Check(f"key of {user_id}", FAIL, str(exc), f"`atlas-mcp users add {user_id}` mints a new one")
            )
            continue
        missing = _missing(result)
        out.append(
            Check(
                f"key of {user_id}",
                FAIL if missing else OK,
                f"missing {', '.join(missing)}" if missing else "read (DLS) + monitor_inference",
                (
                    "a key can do no more than the administrator who minted it: grant the "
                    f"administrator's role {' and '.join(missing)}, then `atlas-mcp users add {user_id}`"
                )
                if missing
                else "",
            )
        )
    return out


def _missing(result: dict[str, Any]) -> list[str]:
    missing = [p for p, ok in result.get("cluster", {}).items() if not ok]
    for index, privileges in result.get("index", {}).items():
        missing += [f"{p} on {index}" for p, ok in privileges.items() if not ok]
    return missing


def render(checks: list[Check]) -> str:
    marks = {OK: "ok  ", WARN: "warn", FAIL: "FAIL"}
    lines = []
    for check in checks:
        lines.append(f"[{marks[check.status]}] {check.name}: {check.detail}")
        if check.fix:
            lines.append(f"       fix: {check.fix}")
    return "\n".join(lines)
