"""Options every command shares, and the one way commands load settings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from ..app import open_service
from ..config import Settings, load_settings

if TYPE_CHECKING:
    from ..service import MemoryService


def config_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--config", "config_file", type=click.Path(dir_okay=False), envvar=None,
        help="TOML settings file (default: $ATLAS_CONFIG).",
    )(fn)


def user_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--user", "user", default=None, help="User id to act as (default: settings' user).")(fn)


def settings_from(config_file: str | None, **flags: Any) -> Settings:
    return load_settings(config_file, **flags)


@contextmanager
def service_session(settings: Settings) -> Iterator[MemoryService]:
    """A service for one command, closed when the command ends (even on error)."""
    service = open_service(settings)
    try:
        yield service
    finally:
        service.close()
