"""``atlas-mcp users token ID``: a fresh HTTP bearer token and the config lines that accept it."""

from __future__ import annotations

import json
import re

import click

from .. import scopes
from ..errors import InvalidInput
from ..tokens import new_token

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # a bare TOML key: the lines print without quoting


@click.command("token")
@click.argument("user_id")
@click.option(
    "--scopes",
    "scope_list",
    default=",".join(scopes.SCOPES),
    show_default=True,
    help="The tools the token may use, comma-separated: recall, write, forget.",
)
@click.option("--name", default=None, help="Names the token in the config, logs and the audit trail.")
def users_token(user_id: str, scope_list: str, name: str | None) -> None:
    """Print a random bearer token for USER_ID and the config lines that accept it.

    A user may hold several tokens, each with its own scopes: a reporting agent gets
    `--scopes recall`, a note-taker `--scopes recall,write`. The config keeps only the
    token's sha256; give the token to the client and keep it nowhere else.
    """
    try:
        granted = scopes.ordered(scopes.parse(scope_list))
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint="--scopes") from exc
    if name is not None and not NAME.match(name):
        raise click.BadParameter("use letters, digits, '-' and '_' (at most 64)", param_hint="--name")
    token, digest = new_token()
    name = name or f"token-{digest[:8]}"
    table = f"users.{json.dumps(user_id) if not NAME.match(user_id) else user_id}.tokens.{name}"
    click.echo(
        f"token for {user_id}, scopes {', '.join(granted)} "
        f"(give it to the client; it is not stored anywhere):\n  {token}\n"
    )
    click.echo(f'add to the config file:\n[{table}]\nsha256 = "{digest}"\nscopes = {json.dumps(granted)}')
