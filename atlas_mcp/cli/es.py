"""Elasticsearch administration: ``bootstrap``, ``users add|revoke``, ``doctor``, ``es-query``.

``--dry-run`` and ``es-query`` print the exact requests as JSON and never contact the cluster,
so a reviewer (or a user debugging relevance) sees what would be sent.
"""

from __future__ import annotations

import json
from typing import Any

import click

from ..config import Settings
from ..domain.model import utcnow
from ..engines.elasticsearch.layout import IndexLayout
from .options import config_option, settings_from
from .tokens import users_token


def _layout(settings: Settings) -> IndexLayout:
    return IndexLayout(settings.elasticsearch.index_prefix)


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _cluster(settings: Settings, *, admin: bool = False):
    from ..engines.elasticsearch.transport import Cluster, connect

    return Cluster(connect(settings.elasticsearch, admin=admin), settings.elasticsearch)


@click.command()
@click.option("--dry-run", is_flag=True, help="Print every index body instead of sending it.")
@click.option(
    "--migrate",
    is_flag=True,
    help="Move indices made by an older atlas-mcp to this version's mappings (stop the servers first).",
)
@config_option
def bootstrap(dry_run: bool, migrate: bool, config_file: str | None) -> None:
    """Create the atlas indices (versioned, behind aliases) in Elasticsearch."""
    from ..engines.elasticsearch import admin, migration

    settings = settings_from(config_file)
    inference_id = settings.elasticsearch.embedding_inference_id
    if dry_run:
        if migrate:
            _echo_json(migration.migration_plan(_layout(settings), inference_id))
        else:
            _echo_json([r.to_dict() for r in admin.bootstrap_plan(_layout(settings), inference_id)])
        return
    es = settings.elasticsearch
    administers = bool((es.username and es.password) or es.admin_api_key)
    cluster = _cluster(settings, admin=administers)  # creating indices is admin work
    try:
        lines = admin.bootstrap(cluster, _layout(settings), inference_id)
        if migrate:
            lines = [line for line in lines if not line.startswith("outdated")]
            lines += migration.migrate(cluster, _layout(settings), inference_id) or ["nothing to migrate"]
        for line in lines:
            click.echo(line)
    finally:
        cluster.close()


@click.group()
def users() -> None:
    """HTTP bearer tokens (token) and per-user, document-level-security API keys (add, revoke)."""


users.add_command(users_token)


@users.command("add")
@click.argument("user_id")
@click.option("--dry-run", is_flag=True, help="Print the API-key request instead of sending it.")
@click.option(
    "--api-key",
    "api_key",
    metavar="ENCODED",
    help="Register a key made elsewhere (Kibana; on Serverless the only way) instead of minting one; "
    "'-' reads it from stdin.",
)
@config_option
def users_add(user_id: str, dry_run: bool, api_key: str | None, config_file: str | None) -> None:
    """Mint USER_ID's read key (their memories + the catalog only) and store it (mode 0600)."""
    from ..engines.elasticsearch import admin
    from ..engines.elasticsearch.engine import key_store

    settings = settings_from(config_file)
    if dry_run:
        _echo_json(
            admin.user_key_plan(_layout(settings), user_id, settings.elasticsearch.key_expiration).to_dict()
        )
        return
    if api_key is not None:
        _register(
            settings, user_id, click.get_text_stream("stdin").read().strip() if api_key == "-" else api_key
        )
        return
    cluster = _cluster(settings, admin=True)
    keys = key_store(settings)
    try:
        gaps = admin.minter_gaps(cluster, _layout(settings))
        stored = admin.add_user(
            cluster, keys, _layout(settings), user_id, settings.elasticsearch.key_expiration
        )
    finally:
        cluster.close()
    click.echo(f"minted key {stored.id} for {user_id}; stored in {keys.path} (mode 0600)")
    for gap in gaps:
        click.echo(f"warning: {gap}", err=True)


def _register(settings: Settings, user_id: str, encoded: str) -> None:
    from ..engines.elasticsearch.engine import key_store
    from ..engines.elasticsearch.registration import register_key

    es = settings.elasticsearch
    administers = bool((es.username and es.password) or es.admin_api_key)
    cluster = _cluster(settings, admin=administers)
    keys = key_store(settings)
    try:
        stored, warnings = register_key(
            cluster, cluster if administers else None, keys, _layout(settings), user_id, encoded
        )
    finally:
        cluster.close()
    click.echo(f"registered key {stored.id} for {user_id}; stored in {keys.path} (mode 0600)")
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


@users.command("revoke")
@click.argument("user_id")
@config_option
def users_revoke(user_id: str, config_file: str | None) -> None:
    """Invalidate USER_ID's keys minted for this index prefix and remove the stored one."""
    from ..engines.elasticsearch import admin
    from ..engines.elasticsearch.engine import key_store

    settings = settings_from(config_file)
    cluster = _cluster(settings, admin=True)
    try:
        count = admin.revoke_user(cluster, key_store(settings), _layout(settings), user_id)
    finally:
        cluster.close()
    click.echo(f"invalidated {count} key(s) of {user_id}")


@click.command()
@config_option
def doctor(config_file: str | None) -> None:
    """Check the cluster: version, licence, inference endpoints, mappings, privileges."""
    from ..engines.elasticsearch import doctor as checks
    from ..engines.elasticsearch.engine import key_store
    from ..engines.elasticsearch.requests import Inference

    settings = settings_from(config_file)
    cluster = _cluster(settings)
    try:
        results = checks.run_checks(
            cluster, _layout(settings), Inference.from_config(settings.elasticsearch), key_store(settings)
        )
    finally:
        cluster.close()
    click.echo(checks.render(results))
    if any(c.status == checks.FAIL for c in results):
        raise SystemExit(1)


@click.command("es-query")
@click.argument("text")
@click.option("--user", "user", required=True, help="Whose recall to show.")
@click.option("--k", "k", type=int, default=10, show_default=True, help="How many memories recall returns.")
@click.option("--type", "memory_types", multiple=True, help="Restrict to a memory type (repeatable).")
@click.option(
    "--no-catalog", is_flag=True, help="Leave the shared catalog out (with --type: only named types count)."
)
@click.option("--include-superseded", is_flag=True, help="Show superseded memories too.")
@config_option
def es_query(text, user, k, memory_types, no_catalog, include_superseded, config_file) -> None:
    """Print the exact search request(s) recall would send for TEXT (the cluster is not contacted)."""
    from ..engines.elasticsearch.requests import Inference, branch_requests, recall_request
    from ..service import RecallQuery, plan_recall

    settings = settings_from(config_file)
    asked = RecallQuery(user, text, k, memory_types or None, not no_catalog, include_superseded)
    plan = plan_recall(settings.scoring, settings.limits, asked)
    inference = Inference.from_config(settings.elasticsearch)
    if inference.rerank_id is None:  # the two branches of one _msearch, fused by atlas
        _echo_json(
            [
                {"method": "POST", "path": r.path, "body": r.body}
                for r in branch_requests(plan, _layout(settings))
            ]
        )
        return
    request = recall_request(plan, _layout(settings), settings.scoring, inference, utcnow())
    _echo_json({"method": "POST", "path": request.path, "body": request.body})
