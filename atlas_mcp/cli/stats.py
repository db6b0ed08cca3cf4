"""``atlas-mcp stats``: how many memories each user holds, by type, and how big the store is."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import click

from ..domain.model import MemoryType
from ..engines.base import StoreStats
from .options import config_option, service_session, settings_from
from .tables import echo_json, json_option, table

CATALOG_LABEL = "(catalog)"


@click.command()
@json_option
@config_option
def stats(as_json: bool, config_file: str | None) -> None:
    """Memory counts per user and type (superseded ones included), and the store's size."""
    with service_session(settings_from(config_file)) as service:
        found = service.stats()
    if as_json:
        echo_json(stats_view(found))
        return
    kinds = [t.value for t in MemoryType]
    rows = [
        [owner, *(per_type.get(k, 0) for k in kinds), superseded, sum(per_type.values())]
        for owner, (per_type, superseded) in _by_owner(found).items()
    ]
    click.echo(table(["user", *kinds, "superseded", "total"], rows) if rows else "the store is empty")
    size = "unknown" if found.size_bytes is None else f"{found.size_bytes / 1_048_576:.2f} MiB"
    click.echo(f"\nstore: {found.location} ({size})")
    click.echo(f"embeddings: {found.embedding_model} (another model needs `atlas-mcp reindex`)")
    if found.expired:
        click.echo(
            f"{found.expired} memories have expired: never recalled, removed at the next sweep "
            "(`serve`, or `atlas-mcp prune` now)"
        )
    if found.awaiting_embedding:
        click.echo(
            f"{found.awaiting_embedding} memories await (re-)embedding in the background "
            "(found by their words meanwhile; `atlas-mcp reindex` does it at once)"
        )


def stats_view(found: StoreStats) -> dict[str, Any]:
    owners = _by_owner(found)
    return {
        "users": {
            owner: {"counts": per_type, "superseded": superseded}
            for owner, (per_type, superseded) in owners.items()
            if owner != CATALOG_LABEL
        },
        "catalog": sum(owners.get(CATALOG_LABEL, ({}, 0))[0].values()),
        "size_bytes": found.size_bytes,
        "location": found.location,
        "embedding_model": found.embedding_model,
        "awaiting_embedding": found.awaiting_embedding,
        "expiring": sum(c.expiring for c in found.counts),
        "expired": found.expired,
    }


def _by_owner(found: StoreStats) -> dict[str, tuple[dict[str, int], int]]:
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    superseded: dict[str, int] = defaultdict(int)
    for row in found.counts:
        owner = CATALOG_LABEL if row.user_id is None else row.user_id
        counts[owner][row.memory_type.value] = row.count
        superseded[owner] += row.superseded
    return {owner: (counts[owner], superseded[owner]) for owner in counts}
