"""``atlas-mcp prune``: remove expired memories and those past their type's retention."""

from __future__ import annotations

from collections import Counter

import click

from ..domain.audit import Actor
from .options import config_option, service_session, settings_from
from .tables import echo_json, json_option, table


@click.command()
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@json_option
@config_option
def prune(dry_run: bool, as_json: bool, config_file: str | None) -> None:
    """Remove memories that expired (expires_at) or aged past [retention] (every user).

    An event a fact cites as its source stays unless [retention] keep_cited_episodes = false.
    `serve` does the same at start and every [retention] every_hours.
    """
    settings = settings_from(config_file)
    with service_session(settings) as service:
        gone = service.prune(
            settings.retention.rules(), dry_run=dry_run, actor=Actor("atlas-mcp prune", "cli")
        )
    if as_json:
        echo_json(
            {
                "dry_run": dry_run,
                "removed": [
                    {"id": m.id, "user": m.user_id, "memory_type": m.memory_type.value, "text": m.text}
                    for m in gone
                ],
            }
        )
        return
    verb = "would remove" if dry_run else "removed"
    counts = Counter((m.user_id, m.memory_type.value) for m in gone)
    click.echo(f"{verb} {len(gone)} memories")
    if counts:
        click.echo(table(["user", "type", "memories"], [[u, t, n] for (u, t), n in sorted(counts.items())]))
    if dry_run:
        for memory in gone:
            click.echo(f"  {memory.user_id} {memory.memory_type.value} {memory.id}: {memory.text[:80]}")
