"""Options every command shares, and the one way commands load settings."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..app import open_service
from ..config import Settings, ignored_environment, load_settings

if TYPE_CHECKING:
    from ..service import MemoryService


class OutputFile(click.Path):
    """A file a command will write: a missing folder is reported now, not after the work is done."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        folder = Path(os.fsdecode(path)).parent
        if not folder.is_dir():
            self.fail(f"folder '{folder}' does not exist", param, ctx)
        return path


EXISTING_DIR = click.Path(exists=True, file_okay=False, path_type=Path)


def config_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False),
        envvar=None,
        help="TOML settings file (default: $ATLAS_CONFIG).",
    )(fn)


def user_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--user", "user", default=None, help="User id to act as (default: settings' user).")(
        fn
    )


def settings_from(config_file: str | None, **flags: Any) -> Settings:
    """The settings every command runs with; ATLAS_* variables that set nothing are named on
    stderr (never stdout: under ``serve`` that is the MCP wire)."""
    settings = load_settings(config_file, **flags)
    for warning in ignored_environment():
        click.echo(f"Warning: {warning}", err=True)
    return settings


def require_known_user(service: MemoryService, user_id: str) -> None:
    """An operator's ``--user`` that owns no memory is most likely a typo: say so, and who exists.

    Called only when a command found nothing, so a known user costs nothing extra.
    """
    owners = sorted({row.user_id for row in service.stats().counts if row.user_id is not None})
    if user_id in owners:
        return
    close = difflib.get_close_matches(user_id, owners, n=1)
    hint = (
        f"did you mean {close[0]!r}?" if close else f"users with memories: {', '.join(owners[:20]) or 'none'}"
    )
    raise click.ClickException(f"unknown user {user_id!r}: no memories are stored for it ({hint})")


@contextmanager
def service_session(settings: Settings) -> Iterator[MemoryService]:
    """A service for one command, closed when the command ends (even on error)."""
    service = open_service(settings)
    try:
        yield service
    finally:
        service.close()
