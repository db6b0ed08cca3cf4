"""``atlas-mcp export`` / ``atlas-mcp import``: back up and move memories as JSON lines, and
bring them in from (or take them to) other memory programs (``interchange.py``)."""

from __future__ import annotations

from pathlib import Path

import click

from .. import portability
from ..domain.audit import Actor
from ..domain.model import Memory
from ..importers import FORMATS, OWN_FORMAT
from . import interchange
from .options import OutputFile, config_option, require_known_user, service_session, settings_from
from .tables import clip, progress

EXPORT_FORMATS = (OWN_FORMAT, "mcp-memory")
FORMAT_HELP = "; ".join(f"{f.name}: {f.reads}" for f in FORMATS.values())


@click.command("export")
@click.argument("file", type=OutputFile())
@click.option(
    "--user",
    "user",
    default=None,
    help="Export only this user's memories (default: everyone + catalog; "
    "with --format mcp-memory: the settings' user).",
)
@click.option(
    "--format",
    "format_name",
    type=click.Choice(EXPORT_FORMATS),
    default=OWN_FORMAT,
    show_default=True,
    help="atlas: every field, for atlas-mcp; mcp-memory: a memory.jsonl the official MCP memory server reads.",
)
@config_option
def export(file: Path, user: str | None, format_name: str, config_file: str | None) -> None:
    """Write memories to FILE.jsonl, one per line with every field (ids, links, provenance, model)."""
    settings = settings_from(config_file)
    if format_name != OWN_FORMAT:
        owner = user or settings.user
        with service_session(settings) as service:
            written = interchange.export_mcp_memory(service, owner, file)
        click.echo(
            f"exported user {owner!r} as {written} entities and relations to {file} ({format_name})", err=True
        )
        return
    with service_session(settings) as service:
        stats = service.stats()
        users = [user] if user is not None else portability.owners(stats)
        total = sum(portability.count(stats, u) for u in users)
        if user is not None and total == 0:
            require_known_user(service, user)
        partial = file.with_name(file.name + ".partial")
        with partial.open("w", encoding="utf-8") as out, progress(total, "exporting") as bar:
            written = service.export_memories(out, users, bar.update)
        partial.replace(file)  # a crash never leaves a truncated FILE that looks complete
    click.echo(f"exported {written} memories to {file}", err=True)


@click.command("import")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--format",
    "format_name",
    type=click.Choice([OWN_FORMAT, *FORMATS]),
    default=OWN_FORMAT,
    show_default=True,
    help=f"What wrote PATH. atlas: an atlas-mcp export; {FORMAT_HELP}.",
)
@click.option(
    "--user",
    "user",
    default=None,
    help="Whose memories another program's file holds (default: the settings' user).",
)
@click.option("--dry-run", is_flag=True, help="Print what would be written, and write nothing.")
@config_option
def import_(path: Path, format_name: str, user: str | None, dry_run: bool, config_file: str | None) -> None:
    """Load memories from PATH: an atlas-mcp export (ids already present are skipped), or
    another memory program's file (--format); importing the same file again adds nothing."""
    settings = settings_from(config_file)
    if format_name != OWN_FORMAT:
        with service_session(settings) as service:
            interchange.import_other(service, format_name, path, user or settings.user, dry_run)
        return
    if user is not None:
        raise click.UsageError("--user is for other programs' files: an atlas-mcp export names each owner")
    if path.is_dir():
        raise click.UsageError(f"{path} is a folder; an atlas-mcp export is one .jsonl file")
    records, trail = portability.read_records(path), portability.read_trail(path)
    if dry_run:
        _preview(records, path)
        return
    with service_session(settings) as service, progress(len(records), "importing") as bar:
        report = service.import_memories(
            records, bar.update, trail=trail, actor=Actor("atlas-mcp import", "cli")
        )
    click.echo(f"imported {report.imported} memories from {path}; {report.skipped} already present", err=True)
    if report.re_embedded:
        click.echo(
            f"re-embedded with {report.target_model} (the file came from "
            f"{', '.join(sorted(report.source_models))}); vector spaces are never mixed",
            err=True,
        )


def _preview(records: list[tuple[Memory, str | None]], path: Path) -> None:
    for memory, _model in records:
        click.echo(
            f"{memory.memory_type.value:<11} {memory.user_id or '(catalog)':<16} {clip(memory.text, 80)}"
        )
    click.echo(f"dry run: {len(records)} memories in {path}; nothing written", err=True)
