"""``atlas-mcp catalog``: admin commands for the shared catalog (never reachable by a tool)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click

from ..app import open_service
from ..errors import InvalidInput
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
        count = service.load_catalog(_read_jsonl(file))
    finally:
        service.close()
    click.echo(f"loaded {count} catalog entries from {file}")


def _read_jsonl(path: Path) -> list[dict]:
    return list(_lines(path))


def _lines(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(entry, dict):
                raise InvalidInput(f"{path}:{number}: each line must be a JSON object")
            yield entry
