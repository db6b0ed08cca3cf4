"""``atlas-mcp doctor``: is the cluster ready for atlas-mcp, and if not, what to do about it.

Each check reports ok / warn / fail with the fix. Nothing here changes the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...errors import AtlasError
from .keys import KeyStore
from .layout import ALL_TYPES, IndexLayout
from .mappings import mapping, state_mapping
from .requests import Inference
from .transport import SUPPORTED_MAJOR, Cluster

OK, WARN, FAIL = "ok", "warn", "fail"
# What self-managed licences allow (trial = everything); serverless has no licence API.
LICENCE_RANK = {"basic": 0, "standard": 0, "gold": 1, "platinum": 2, "enterprise": 3, "trial": 3}
NEEDS = (("DLS per-user keys", "platinum", 2), ("RRF, reranker and inference", "enterprise", 3))
WRITER_PRIVILEGES = ["read", "create_doc", "index", "delete"]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""


def run_checks(cluster: Cluster, layout: IndexLayout, inference: Inference, keys: KeyStore) -> list[Check]:
    checks: list[Check] = []
    for name, probe in (
        ("connection", lambda: _version(cluster)),
        ("licence", lambda: _licence(cluster)),
        ("inference endpoints", lambda: _inference(cluster, inference)),
        ("indices", lambda: _indices(cluster, layout, inference.embedding_id)),
        ("writer privileges", lambda: _writer(cluster, layout)),
        ("user keys", lambda: _user_keys(cluster, layout, keys)),
    ):
        checks.extend(_guarded(name, probe))
        if name == "connection" and checks[-1].status == FAIL:
            break  # nothing else can be checked
    return checks


def _guarded(name: str, probe: Callable[[], Iterable[Check]]) -> list[Check]:
    try:
        return list(probe())
    except AtlasError as exc:
        return [Check(name, FAIL, str(exc))]


def _version(cluster: Cluster) -> list[Check]:
    info = cluster.call("read the server version", lambda es: es.info())
    number = str(info["version"]["number"])
    flavour = info["version"].get("build_flavor", "default")
    if int(number.split(".")[0]) != SUPPORTED_MAJOR:
        return [Check("connection", FAIL, f"Elasticsearch {number}", f"atlas-mcp needs Elasticsearch {SUPPORTED_MAJOR}.x")]
    return [Check("connection", OK, f"Elasticsearch {number} ({flavour}), cluster {info.get('cluster_name', '?')}")]


def _licence(cluster: Cluster) -> list[Check]:
    try:
        kind = cluster.call("read the licence", lambda es: es.license.get())["license"]["type"]
    except AtlasError:
        return [Check("licence", WARN, "no licence API (Serverless?); features are managed by Elastic")]
    rank = LICENCE_RANK.get(str(kind).lower(), 0)
    return [
        Check(f"licence for {what}", OK if rank >= need else FAIL, f"cluster licence is {kind}",
              "" if rank >= need else f"needs {level} or higher: start a trial (POST _license/start_trial) or upgrade")
        for what, level, need in NEEDS
    ]


def _inference(cluster: Cluster, inference: Inference) -> list[Check]:
    wanted = [("embedding", inference.embedding_id), ("rerank", inference.rerank_id)]
    out = []
    for role, endpoint in wanted:
        if endpoint is None:
            out.append(Check(f"{role} endpoint", WARN, "server-side rerank is off; RRF order is reranked locally"))
            continue
        try:
            found = cluster.call(f"read inference endpoint {endpoint}", lambda es, e=endpoint: es.inference.get(inference_id=e))
            task = (found.get("endpoints") or [{}])[0].get("task_type", "?")
            out.append(Check(f"{role} endpoint", OK, f"{endpoint} ({task})"))
        except AtlasError as exc:
            out.append(Check(f"{role} endpoint", FAIL, str(exc),
                             f"create {endpoint} (PUT _inference/...), or point [elasticsearch] {role}_inference_id at "
                             "one listed by GET _inference/_all (ELSER/E5 on ML nodes, or a `custom` endpoint)"))
    return out


def _indices(cluster: Cluster, layout: IndexLayout, inference_id: str) -> list[Check]:
    out = []
    for kind in ALL_TYPES:
        alias = layout.alias(kind)
        try:
            found = cluster.call(f"read mapping of {alias}", lambda es, a=alias: es.indices.get_mapping(index=a))
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


def _mapping_check(alias: str, found: dict[str, Any], expected: dict[str, Any]) -> Check:
    (concrete, body), *_ = found.items()
    problems = mapping_problems(expected, body["mappings"])
    return Check(f"index {alias}", FAIL if problems else OK,
                 "; ".join(problems) if problems else f"{concrete}, mapping as expected",
                 "reindex into a new version (see docs/elasticsearch.md)" if problems else "")


def mapping_problems(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Fields that are missing or typed differently (extra settings the server adds are ignored)."""
    have = actual.get("properties", {})
    problems = []
    for field, spec in expected["properties"].items():
        got = have.get(field)
        if got is None:
            problems.append(f"{field} missing")
        elif any(got.get(k) != v for k, v in spec.items() if k in ("type", "inference_id", "value")):
            problems.append(f"{field} is {got.get('type')} ({got.get('inference_id', '')}), expected {spec['type']}")
    return problems


def _writer(cluster: Cluster, layout: IndexLayout) -> list[Check]:
    names = [*(layout.pattern(k) for k in ALL_TYPES), f"{layout.state_alias}*"]
    result = cluster.call("check writer privileges", lambda es: es.security.has_privileges(
        index=[{"names": names, "privileges": WRITER_PRIVILEGES}]))
    missing = _missing(result)
    return [Check("writer privileges", FAIL if missing else OK,
                  f"missing {', '.join(missing)}" if missing else "read/create/index/delete on the atlas indices",
                  "grant the writer's role these index privileges" if missing else "")]


def _user_keys(cluster: Cluster, layout: IndexLayout, keys: KeyStore) -> list[Check]:
    names = [layout.pattern(k) for k in ALL_TYPES]
    users = sorted(set(keys.stored()) | set(keys.configured_users()))
    if not users:
        return [Check("user keys", WARN, "no user has a key yet", "`atlas-mcp users add <id>`")]
    out = []
    for user_id in users:
        try:
            as_user = cluster.as_user(keys.key_for(user_id))
            result = cluster.call(f"check the key of user {user_id}", lambda es: es.security.has_privileges(
                cluster=["monitor_inference"], index=[{"names": names, "privileges": ["read"]}]), client=as_user)
        except AtlasError as exc:
            out.append(Check(f"key of {user_id}", FAIL, str(exc), f"`atlas-mcp users add {user_id}` mints a new one"))
            continue
        missing = _missing(result)
        out.append(Check(f"key of {user_id}", FAIL if missing else OK,
                         f"missing {', '.join(missing)}" if missing else "read (DLS) + monitor_inference",
                         f"`atlas-mcp users add {user_id}` mints a key with both" if missing else ""))
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
