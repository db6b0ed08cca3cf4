"""``atlas-mcp doctor``: is the cluster ready for atlas-mcp, and if not, what to do about it.

Each check reports ok / warn / fail with the fix (``report``). Nothing here changes the cluster.
The checks by what they look at: ``cluster`` (connection, release, licence, inference endpoints,
one reranked search), ``access`` (the writer's privileges, each user's key), ``indices`` (each
index and its mapping).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ....errors import AtlasError
from ..keys import KeyStore
from ..layout import IndexLayout
from ..requests import Inference
from ..scores import Endpoint
from ..transport import Cluster
from .access import read_grants, user_keys, writer
from .cluster import connection, inference_endpoints, licence, reranked_recall
from .indices import indices, mapping_problems
from .report import FAIL, OK, WARN, Check, render

__all__ = ["FAIL", "OK", "WARN", "Check", "mapping_problems", "render", "run_checks"]


def run_checks(cluster: Cluster, layout: IndexLayout, inference: Inference, keys: KeyStore) -> list[Check]:
    checks = _guarded("connection", lambda: connection(cluster, inference))
    if checks[0].status == FAIL:
        return checks  # nothing else can be checked
    try:
        grants = read_grants(cluster, layout)
    except AtlasError as exc:
        return [*checks, Check("writer privileges", FAIL, str(exc))]
    described: dict[str, Endpoint] = {}
    for name, probe in (
        ("inference endpoints", lambda: inference_endpoints(cluster, inference, grants, keys, described)),
        ("licence", lambda: licence(cluster, grants, inference, described)),
        ("indices", lambda: indices(cluster, layout, inference.embedding_id, grants)),
        ("writer privileges", lambda: writer(grants)),
        ("user keys", lambda: user_keys(cluster, layout, keys)),
        ("reranked recall", lambda: reranked_recall(cluster, layout, inference, keys)),
    ):
        checks.extend(_guarded(name, probe))
    return checks


def _guarded(name: str, probe: Callable[[], Iterable[Check]]) -> list[Check]:
    try:
        return list(probe())
    except AtlasError as exc:
        return [Check(name, FAIL, str(exc))]
