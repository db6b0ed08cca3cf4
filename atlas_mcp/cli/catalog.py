"""``atlas-mcp catalog``: admin commands for the shared catalog (never reachable by a tool)."""

from __future__ import annotations

from pathlib import Path

import click

from .. import jsonl
from ..app import open_service
from ..domain.audit import Actor
from .options import config_option, settings_from


@click.group()
def catalog() -> None:
    """Manage shared catalog entries, visible to every user."""


@catalog.command("load")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@config_option
def load(file: Path, config_file: str | None) -> None:
    """Load catalog entries from FILE.jsonl: {"id"?, "title", "text", "category"?, "tags"?} per line.

    An entry with an existing id replaces it, so loading the same file twice is harmless.
    """
    service = open_service(settings_from(config_file))
    try:
        count = service.load_catalog(
            [entry for _, entry in jsonl.objects(file)], Actor("atlas-mcp catalog load", "cli")
        )
    finally:
        service.close()
    click.echo(f"loaded {count} catalog entries from {file}")
