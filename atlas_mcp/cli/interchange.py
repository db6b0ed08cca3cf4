"""Other memory programs' files: ``import --format NAME`` and ``export --format mcp-memory``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click

from .. import importers
from ..domain.model import Memory
from ..importers import apply, mcp_memory
from ..importers.apply import Planned
from ..service import MemoryService
from .options import require_known_user
from .tables import clip, progress

EXPORT_PAGE = 500


def import_other(service: MemoryService, format_name: str, path: Path, user_id: str, dry_run: bool) -> None:
    """Read the whole file, check every record, then write (or, dry, print) what it holds."""
    chosen = importers.format_named(format_name)
    source = importers.read_source(format_name, path)
    if not source.drafts:
        raise click.ClickException(f"found no memories in {path} read as {format_name} ({chosen.reads})")
    planned = apply.plan(service, user_id, source, chosen.id_prefix)
    new = sum(1 for p in planned if not p.present)
    if dry_run:
        for item in planned:
            click.echo(_line(item))
        click.echo(
            f"dry run: would import {new} memories for user {user_id!r} from {path} ({format_name}); "
            f"{len(planned) - new} already present{_skipped(source.skipped)}; nothing written",
            err=True,
        )
        return
    with progress(len(planned), "importing") as bar:
        outcome = apply.write(service, user_id, planned, bar.update)
    merged = f"; {outcome.merged} kept as existing duplicates" if outcome.merged else ""
    click.echo(
        f"imported {outcome.added} memories for user {user_id!r} from {path} ({format_name}); "
        f"{outcome.present} already present{merged}{_skipped(source.skipped)}",
        err=True,
    )


def _line(item: Planned) -> str:
    memory = item.write.memory
    kind = memory.memory_type.value + (f"/{memory.fact_type}" if memory.fact_type else "")
    state = "present" if item.present else ("superseded" if memory.is_superseded else "new")
    when = memory.timeline_at.strftime("%Y-%m-%d")
    return f"{state:<10} {kind:<20} {when}  {clip(memory.text, 70)}  [{item.draft.where}]"


def _skipped(reasons: tuple[str, ...]) -> str:
    return f"; left out: {', '.join(reasons)}" if reasons else ""


def export_mcp_memory(service: MemoryService, user_id: str, path: Path) -> int:
    """Write the user's current memories as the official memory server's file; how many lines.
    A user with no memories is most likely a typo: say so, and write nothing."""
    lines = mcp_memory.export_graph(_current(service, user_id), user_id)
    if not lines:
        require_known_user(service, user_id)
    partial = path.with_name(path.name + ".partial")
    partial.write_text("\n".join(lines), encoding="utf-8")
    partial.replace(path)  # a crash never leaves a truncated file that looks complete
    return len(lines)


def _current(service: MemoryService, user_id: str) -> Iterator[Memory]:
    """The user's live memories, oldest first: the order they were written (an imported
    graph's entities and observations come back in their original order)."""
    offset = 0
    while page := service.list(
        user_id, include_superseded=False, limit=EXPORT_PAGE, offset=offset, oldest_first=True
    ):
        yield from page
        offset += len(page)
