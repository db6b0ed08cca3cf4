"""Doctor's checks of what the cluster offers: the connection and release, the licence for what
this configuration uses, the inference endpoints, and one reranked search under a user's key."""

from __future__ import annotations

from ....domain.model import MemoryType, utcnow
from ....domain.scoring import ScoringPolicy
from ....errors import AtlasError
from ...base import RecallPlan
from ..failures import RERANK_REFUSED_RELEASES, SUPPORTED_MAJOR, RerankRefused
from ..keys import KeyStore
from ..layout import IndexLayout
from ..requests import Inference, recall_request
from ..scores import EIS_SERVICE, Endpoint, describe_endpoint
from ..transport import Cluster
from .report import FAIL, OK, WARN, Check, Grants, skipped

# What self-managed licences allow (trial = everything); serverless has no licence API.
LICENCE_RANK = {"basic": 0, "standard": 0, "gold": 1, "platinum": 2, "enterprise": 3, "trial": 3}
RERANK_REFUSED = (
    "this release refuses the reranker to read-only keys, so every server-reranked recall under a "
    "user's key fails (elastic/elasticsearch#128328); atlas falls back to reranking itself"
)
RERANK_FIX = 'upgrade to 9.0.2 or later, or set [elasticsearch] rerank_inference_id = ""'


def connection(cluster: Cluster, inference: Inference) -> list[Check]:
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


def reranked_recall(
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


def licence(
    cluster: Cluster, grants: Grants, inference: Inference, described: dict[str, Endpoint]
) -> list[Check]:
    if "monitor" not in grants.cluster:
        return [skipped("licence", "monitor")]
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


def inference_endpoints(
    cluster: Cluster, inference: Inference, grants: Grants, keys: KeyStore, described: dict[str, Endpoint]
) -> list[Check]:
    """Reads each endpoint with the writer, or a user key (they carry ``monitor_inference``);
    what each is goes into ``described``."""
    client = None
    if "monitor_inference" not in grants.cluster:
        users = sorted(set(keys.stored()) | set(keys.configured_users()))
        if not users:
            return [skipped("inference endpoints", "monitor_inference")]
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
