"""``atlas-mcp rekey``: encrypt the embedded store, change its key, or decrypt it (servers stopped)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from functools import partial
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
    every server using the store first. A crash leaves the old store or the new one, whole.
    Afterwards, point the settings at the new key.
    """
    from ..engines.embedded.maintenance import configured_key, re_encrypt, store_key

    if decrypt == (new_key_file is not None):
        raise click.UsageError("give exactly one of --new-key-file FILE and --decrypt")
    settings = settings_from(config_file)
    if settings.backend != "embedded":
        raise ConfigurationError("rekey encrypts the embedded store; Elasticsearch encrypts at rest itself")
    if not settings.database_path.is_file():
        raise ConfigurationError(f"no memory store at {settings.database_path}")
    current = configured_key(settings)
    new, save_key = None, None
    if new_key_file is not None:
        secret, save_key = _new_secret(new_key_file)
        new = store_key(secret, f"--new-key-file {new_key_file}")
        if save_key is None and new_key_file.stat().st_mode & 0o077:
            click.echo(
                f"Warning: {new_key_file} may be read by other users: chmod 600 {new_key_file}", err=True
            )
    count = re_encrypt(settings.database_path, current, new, save_key)
    where = settings.database_path
    if new is None:
        click.echo(f"decrypted {where} ({count} memories); remove the encryption key from the settings")
    else:
        click.echo(
            f"encrypted {where} ({count} memories) with the key in {new_key_file}; set "
            f'encryption_key_file = "{new_key_file}" (or ATLAS_ENCRYPTION_KEY_FILE) before starting a server'
        )


def _new_secret(path: Path) -> tuple[str, Callable[[], None] | None]:
    """The key in ``path`` (its first line), or a random raw key and how to write it there
    (rekey writes it once the re-encrypted copy checks out, before the store depends on it)."""
    if path.exists():
        lines = path.read_text(encoding="utf-8").strip().splitlines()
        if not lines:
            raise click.BadParameter(f"{path} is empty", param_hint="--new-key-file")
        return lines[0].strip(), None
    if not path.parent.is_dir():
        raise click.BadParameter(f"folder {path.parent} does not exist", param_hint="--new-key-file")
    secret = secrets.token_hex(32)
    return secret, partial(_write_key, path, secret)


def _write_key(path: Path, secret: str) -> None:
    """``secret`` in a new file only we may read, on the disk (its folder entry too)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(secret + "\n")
        out.flush()
        os.fsync(out.fileno())
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    click.echo(f"wrote a new random key to {path} (keep a copy: without it the memories are lost)", err=True)
