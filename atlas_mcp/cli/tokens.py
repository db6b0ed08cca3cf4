"""``atlas-mcp users token ID``: a fresh HTTP bearer token and the config lines that accept it."""

from __future__ import annotations

import click

from ..tokens import new_token


@click.command("token")
@click.argument("user_id")
def users_token(user_id: str) -> None:
    """Print a random bearer token for USER_ID and the [users.USER_ID] lines for the config.

    The config keeps only the sha256; give the token to the client and keep it nowhere else.
    """
    token, digest = new_token()
    click.echo(f"token for {user_id} (give it to the client; it is not stored anywhere):\n  {token}\n")
    click.echo(f'add to the config file:\n[users.{user_id}]\ntoken_sha256 = "{digest}"')
