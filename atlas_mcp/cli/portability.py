"""``atlas-mcp export`` / ``atlas-mcp import``: back up and move memories as JSON lines."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import portability
from .options import OutputFile, config_option, require_known_user, service_session, settings_from


@click.command("export")
@click.argument("file", type=OutputFile())
@click.option(
    "--user", "user", default=None, help="Export only this user's memories (default: everyone + catalog)."
)
@config_option
def export(file: Path, user: str | None, config_file: str | None) -> None:
    """Write memories to FILE.jsonl, one per line with every field (ids, links, provenance, model)."""
    with service_session(settings_from(config_file)) as service:
        stats = service.stats()
        users = [user] if user is not None else portability.owners(stats)
        total = sum(portability.count(stats, u) for u in users)
        if user is not None and total == 0:
            require_known_user(service, user)
        partial = file.with_name(file.name + ".partial")
        with partial.open("w", encoding="utf-8") as out, _bar(total, "exporting") as bar:
            written = service.export_memories(out, users, bar.update)
        partial.replace(file)  # a crash never leaves a truncated FILE that looks complete
    click.echo(f"exported {written} memories to {file}", err=True)


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@config_option
def import_(file: Path, config_file: str | None) -> None:
    """Load memories from FILE.jsonl (as written by export); ids already present are skipped."""
    records = portability.read_records(file)
    with service_session(settings_from(config_file)) as service, _bar(len(records), "importing") as bar:
        report = service.import_memories(records, bar.update)
    click.echo(f"imported {report.imported} memories from {file}; {report.skipped} already present", err=True)
    if report.re_embedded:
        click.echo(
            f"re-embedded with {report.target_model} (the file came from "
            f"{', '.join(sorted(report.source_models))}); vector spaces are never mixed",
            err=True,
        )


def _bar(length: int, label: str):
    return click.progressbar(length=length, label=label, file=sys.stderr)
