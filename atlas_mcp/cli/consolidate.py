"""``atlas-mcp consolidate``: turn users' new episodes into facts and playbooks, now."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import anyio
import click

from ..app import open_service
from ..config import Settings
from ..errors import AtlasError
from .options import OutputFile, config_option, settings_from, user_option


@click.command()
@user_option
@click.option("--dry-run", is_flag=True, help="Ask the LLM and show what would be written; write nothing.")
@click.option(
    "--replay",
    "replay_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Answer from a recording (JSONL made by --record) instead of asking an LLM.",
)
@click.option(
    "--record",
    "record_file",
    type=OutputFile(),
    help="Append every LLM answer to this JSONL file, for --replay.",
)
@config_option
def consolidate(
    user: str | None,
    dry_run: bool,
    replay_file: Path | None,
    record_file: Path | None,
    config_file: str | None,
) -> None:
    """Consolidate episodes since each user's watermark (default: every configured user)."""
    from ..consolidation import Consolidator, open_provider
    from ..consolidation.providers import LLMProvider, RecordingProvider, ReplayProvider

    settings = settings_from(config_file)
    provider: LLMProvider = (
        ReplayProvider(replay_file) if replay_file else open_provider(settings.consolidation)
    )
    if record_file:
        provider = RecordingProvider(provider, record_file)
    service = open_service(settings)
    failures = 0
    try:
        consolidator = Consolidator(service, settings.consolidation, provider)
        for user_id in _users(settings, user):
            try:
                reports = anyio.run(partial(consolidator.run, user_id, dry_run=dry_run))
            except AtlasError as exc:
                failures += 1
                click.echo(f"user {user_id}: not consolidated: {exc}", err=True)
                continue
            for report in reports:
                click.echo("\n".join(report.lines()))
    finally:
        service.close()
    if failures:
        raise SystemExit(1)


def _users(settings: Settings, user: str | None) -> list[str]:
    if user:
        return [user]
    return sorted(settings.users) or [settings.user]
