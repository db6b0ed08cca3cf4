"""Options every command shares, and the one way commands load settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..config import Settings, load_settings


def config_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--config", "config_file", type=click.Path(dir_okay=False), envvar=None,
        help="TOML settings file (default: $ATLAS_CONFIG).",
    )(fn)


def user_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--user", "user", default=None, help="User id to act as (default: settings' user).")(fn)


def settings_from(config_file: str | None, **flags: Any) -> Settings:
    return load_settings(config_file, **flags)
