"""``atlas-mcp reindex``: re-embed the embedded store with the configured embedding model(s)."""

from __future__ import annotations

import click

from ..errors import ConfigurationError
from ..inference.embedder import open_models
from .options import config_option, settings_from


@click.command()
@config_option
def reindex(config_file: str | None) -> None:
    """Re-embed every memory with the configured model (after changing [embedding] model)."""
    settings = settings_from(config_file)
    if settings.backend != "embedded":
        raise ConfigurationError("reindex applies to the embedded engine; Elasticsearch embeds server-side")
    if not settings.database_path.exists():
        raise ConfigurationError(f"no store at {settings.database_path}")
    from ..engines.embedded.maintenance import configured_key
    from ..engines.embedded.maintenance import reindex as run_reindex

    models = open_models(settings.embedding.model, settings.embedding.threads)

    def progress(done: int, total: int) -> None:
        click.echo(f"\rre-embedded {done}/{total}", nl=False, err=True)

    count = run_reindex(settings.database_path, models, progress, configured_key(settings))
    click.echo("", err=True)
    click.echo(f"re-embedded {count} memories with {models.choice_id}")
