"""``atlas-mcp rekey``: encrypt the embedded store, change its key, or decrypt it (server stopped)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import click

from ..errors import ConfigurationError
from .options import config_option, settings_from


@click.command("rekey")
@click.option(
    "--new-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The new key's file; if it does not exist, a random 256-bit key is written there (0600).",
)
@click.option("--decrypt", is_flag=True, help="Store the memories unencrypted again.")
@config_option
def rekey(new_key_file: Path | None, decrypt: bool, config_file: str | None) -> None:
    """Encrypt the embedded store with a new key (or decrypt it), every file beside it included.

    The current key comes from the settings (ATLAS_ENCRYPTION_KEY or encryption_key_file); stop
    every server using the store first. Afterwards, point the settings at the new key.
    """
    from ..engines.embedded.cipher import StoreKey
    from ..engines.embedded.rekey import rekey as re_encrypt

    if decrypt == (new_key_file is not None):
        raise click.UsageError("give exactly one of --new-key-file FILE and --decrypt")
    settings = settings_from(config_file)
    if settings.backend != "embedded":
        raise ConfigurationError("rekey encrypts the embedded store; Elasticsearch encrypts at rest itself")
    if not settings.database_path.is_file():
        raise ConfigurationError(f"no memory store at {settings.database_path}")
    current = settings.encryption_secret()
    new = None if decrypt else StoreKey(_new_secret(new_key_file))
    count = re_encrypt(settings.database_path, StoreKey(current) if current else None, new)
    where = settings.database_path
    if new is None:
        click.echo(f"decrypted {where} ({count} memories); remove the encryption key from the settings")
    else:
        click.echo(
            f"encrypted {where} ({count} memories) with the key in {new_key_file}; set "
            f'encryption_key_file = "{new_key_file}" (or ATLAS_ENCRYPTION_KEY) before starting a server'
        )


def _new_secret(path: Path) -> str:
    if path.exists():
        lines = path.read_text(encoding="utf-8").strip().splitlines()
        if not lines or len(lines[0].strip()) < 8:
            raise click.BadParameter(f"{path} holds no key of 8+ characters", param_hint="--new-key-file")
        return lines[0].strip()
    secret = secrets.token_hex(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(secret + "\n")
    click.echo(f"wrote a new random key to {path} (keep a copy: without it the memories are lost)", err=True)
    return secret
