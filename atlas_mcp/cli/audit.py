"""``atlas-mcp audit``: who wrote, superseded, forgot or imported a user's memories, and when."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import click

from ..domain.inputs import timestamp
from ..domain.model import utcnow
from ..errors import InvalidInput
from .options import config_option, service_session, settings_from
from .tables import echo_json, json_option, table

HEADERS = ["at", "action", "memory", "via", "credential", "detail"]
_AGO = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def since_time(value: str | None) -> datetime | None:
    """``--since``: an ISO-8601 time or date, or an age such as ``30m``, ``24h``, ``7d``, ``2w``."""
    if value is None:
        return None
    if match := _AGO.match(value.strip()):
        return utcnow() - timedelta(**{_UNITS[match[2]]: int(match[1])})
    try:
        return timestamp(value.strip(), "--since")
    except InvalidInput as exc:
        raise click.BadParameter(f"{exc}; or an age such as 24h or 7d", param_hint="--since") from exc


@click.command("audit")
@click.option("--user", "user", default=None, help="Whose trail (default: the settings' user).")
@click.option("--catalog", is_flag=True, help="The shared catalog's trail instead of a user's.")
@click.option("--since", default=None, help="Only entries after this time (ISO-8601) or age (24h, 7d).")
@click.option("--limit", type=click.IntRange(1, 1_000_000), default=1000, show_default=True)
@json_option
@config_option
def audit(
    user: str | None, catalog: bool, since: str | None, limit: int, as_json: bool, config_file: str | None
) -> None:
    """Every write, supersession, forget and import of one user's memories, oldest first: when,
    through which tool or command, and with which credential (its name, never the token). A
    forgotten memory is named by its id only."""
    after = since_time(since)
    settings = settings_from(config_file, user=user)
    owner = None if catalog else settings.user
    with service_session(settings) as service:
        entries = service.audit(owner, after, limit)
    if as_json:
        shown = [{k: v for k, v in e.to_record().items() if k != "format"} for e in entries]
        echo_json({"user_id": owner, "entries": shown})
        return
    rows = [
        (e.at.strftime("%Y-%m-%d %H:%M:%S"), e.action, e.memory_id, e.via, e.credential, e.detail)
        for e in entries
    ]
    click.echo(table(HEADERS, rows) if rows else f"no audit entries for {owner or 'the catalog'}")
