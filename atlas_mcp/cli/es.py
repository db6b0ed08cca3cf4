"""Elasticsearch administration: ``bootstrap``, ``users add|revoke``, ``doctor``, ``es-query``.

``--dry-run`` and ``es-query`` print the exact requests as JSON and never contact the cluster,
so a reviewer (or a user debugging relevance) sees what would be sent.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..domain.model import utcnow
from .options import config_option, settings_from
from .tokens import users_token


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


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
    from ..engines.elasticsearch import operations

    settings = settings_from(config_file)
    if dry_run:
        _echo_json(operations.bootstrap_plan(settings, migrate=migrate))
        return
    for line in operations.bootstrap(settings, migrate=migrate):
        click.echo(line)


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
    from ..engines.elasticsearch import operations

    settings = settings_from(config_file)
    if dry_run:
        _echo_json(operations.user_key_plan(settings, user_id))
        return
    if api_key is None:
        stored = operations.add_user(settings, user_id)
        done = "minted"
    else:
        encoded = sys.stdin.read().strip() if api_key == "-" else api_key
        stored = operations.register_user_key(settings, user_id, encoded)
        done = "registered"
    click.echo(f"{done} key {stored.key_id} for {user_id}; stored in {stored.path} (mode 0600)")
    for warning in stored.warnings:
        click.echo(f"warning: {warning}", err=True)


@users.command("revoke")
@click.argument("user_id")
@config_option
def users_revoke(user_id: str, config_file: str | None) -> None:
    """Invalidate USER_ID's keys minted for this index prefix and remove the stored one."""
    from ..engines.elasticsearch import operations

    count = operations.revoke_user(settings_from(config_file), user_id)
    click.echo(f"invalidated {count} key(s) of {user_id}")


@click.command()
@config_option
def doctor(config_file: str | None) -> None:
    """Check the cluster: version, licence, inference endpoints, mappings, privileges."""
    from ..engines.elasticsearch import operations

    diagnosis = operations.diagnose(settings_from(config_file))
    click.echo(diagnosis.report)
    if diagnosis.failed:
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
def es_query(
    text: str,
    user: str,
    k: int,
    memory_types: tuple[str, ...],
    no_catalog: bool,
    include_superseded: bool,
    config_file: str | None,
) -> None:
    """Print the exact search request(s) recall would send for TEXT (the cluster is not contacted)."""
    from ..domain import ranking
    from ..engines.elasticsearch import operations

    settings = settings_from(config_file)
    asked = ranking.RecallQuery(user, text, k, memory_types or None, not no_catalog, include_superseded)
    now = utcnow()
    plan = ranking.plan(settings.scoring, settings.limits, asked, now)
    _echo_json(operations.recall_requests(settings, plan, now))
