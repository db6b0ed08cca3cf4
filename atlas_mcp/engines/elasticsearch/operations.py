"""What an operator does to an Elasticsearch deployment, from the settings alone: the door the
CLI (``bootstrap``, ``users add|revoke``, ``doctor``, ``es-query``) uses into this package.

Each job opens the cluster with the credential it needs (administration, or the writer's) and
closes it; a dry run builds the exact requests and contacts nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ...config import Settings
from ..base import RecallPlan
from . import admin, migration
from .doctor import FAIL, render, run_checks
from .engine import key_store
from .layout import IndexLayout
from .registration import register_key
from .requests import Inference, branch_requests, recall_request
from .transport import Cluster, connect


@dataclass(frozen=True, slots=True)
class StoredUserKey:
    """A user's key, minted or registered, and where it is kept."""

    key_id: str
    path: Path
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Diagnosis:
    report: str  # one line per check
    failed: bool


def layout(settings: Settings) -> IndexLayout:
    return IndexLayout(settings.elasticsearch.index_prefix)


def _administers(settings: Settings) -> bool:
    es = settings.elasticsearch
    return bool((es.username and es.password) or es.admin_api_key)


@contextmanager
def _cluster(settings: Settings, *, admin: bool = False) -> Iterator[Cluster]:
    cluster = Cluster(connect(settings.elasticsearch, admin=admin), settings.elasticsearch)
    try:
        yield cluster
    finally:
        cluster.close()


def bootstrap_plan(settings: Settings, *, migrate: bool = False) -> Any:
    """Every request ``bootstrap`` (or ``bootstrap --migrate``) would send, as JSON."""
    inference_id = settings.elasticsearch.embedding_inference_id
    if migrate:
        return migration.migration_plan(layout(settings), inference_id)
    return [r.to_dict() for r in admin.bootstrap_plan(layout(settings), inference_id)]


def bootstrap(settings: Settings, *, migrate: bool = False) -> list[str]:
    """Create the indices behind their aliases (creating indices is admin work); with
    ``migrate``, move indices an older atlas-mcp made to this version's mappings."""
    inference_id = settings.elasticsearch.embedding_inference_id
    with _cluster(settings, admin=_administers(settings)) as cluster:
        lines = admin.bootstrap(cluster, layout(settings), inference_id)
        if migrate:
            lines = [line for line in lines if not line.startswith("outdated")]
            lines += migration.migrate(cluster, layout(settings), inference_id) or ["nothing to migrate"]
    return lines


def user_key_plan(settings: Settings, user_id: str) -> dict[str, Any]:
    """The API-key request ``users add`` would send for ``user_id``."""
    return admin.user_key_plan(layout(settings), user_id, settings.elasticsearch.key_expiration).to_dict()


def add_user(settings: Settings, user_id: str) -> StoredUserKey:
    """Mint ``user_id``'s read key (their memories and the catalog) and store it."""
    keys = key_store(settings)
    with _cluster(settings, admin=True) as cluster:
        gaps = admin.minter_gaps(cluster, layout(settings))
        stored = admin.add_user(
            cluster, keys, layout(settings), user_id, settings.elasticsearch.key_expiration
        )
    return StoredUserKey(stored.id, keys.path, tuple(gaps))


def register_user_key(settings: Settings, user_id: str, encoded: str) -> StoredUserKey:
    """Check and store a key made elsewhere (Kibana; on Serverless the only way) for ``user_id``."""
    keys = key_store(settings)
    administers = _administers(settings)
    with _cluster(settings, admin=administers) as cluster:
        stored, warnings = register_key(
            cluster, cluster if administers else None, keys, layout(settings), user_id, encoded
        )
    return StoredUserKey(stored.id, keys.path, tuple(warnings))


def revoke_user(settings: Settings, user_id: str) -> int:
    """Invalidate ``user_id``'s keys for this index prefix and drop the stored one; how many."""
    with _cluster(settings, admin=True) as cluster:
        return admin.revoke_user(cluster, key_store(settings), layout(settings), user_id)


def diagnose(settings: Settings) -> Diagnosis:
    """Version, licence, inference endpoints, mappings and privileges, checked on the cluster."""
    with _cluster(settings) as cluster:
        results = run_checks(
            cluster, layout(settings), Inference.from_config(settings.elasticsearch), key_store(settings)
        )
    return Diagnosis(render(results), any(c.status == FAIL for c in results))


def recall_requests(settings: Settings, plan: RecallPlan, now: datetime) -> Any:
    """The exact search request(s) recall sends for ``plan``, as JSON: one reranked search, or
    without a rerank endpoint the two branches of one ``_msearch`` that atlas fuses itself."""
    inference = Inference.from_config(settings.elasticsearch)
    if inference.rerank_id is None:
        return [
            {"method": "POST", "path": r.path, "body": r.body}
            for r in branch_requests(plan, layout(settings))
        ]
    request = recall_request(plan, layout(settings), settings.scoring, inference, now)
    return {"method": "POST", "path": request.path, "body": request.body}
