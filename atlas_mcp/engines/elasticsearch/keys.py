"""Per-user API keys: the DLS role descriptor, and where minted keys are kept.

A user's key may read the atlas indices, and only documents whose ``user_id`` is that user
or that have no ``user_id`` (the catalog). ``monitor_inference`` lets the semantic query and
the reranker run under the key. There is exactly one role descriptor with exactly one
``indices`` entry: DLS queries of several entries are OR-ed, so a second entry without a
query would silently lift the restriction.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ...domain.model import iso, utcnow
from ...errors import ConfigurationError
from ...files import replaced
from .layout import ALL_TYPES, IndexLayout
from .requests import owner_filter

KEY_NAME_PREFIX = "atlas-user-"
APPLICATION = "atlas-mcp"
QUERY_PAGE = 100  # live keys of one user under one prefix: a handful at most


def key_name(layout: IndexLayout, user_id: str) -> str:
    """Names are for people reading the key list; keys are *found* by their metadata."""
    return f"{KEY_NAME_PREFIX}{layout.prefix}/{user_id}"


def key_metadata(layout: IndexLayout, user_id: str) -> dict[str, str]:
    """What identifies a deployment's keys: the application, the index prefix and the user."""
    return {"application": APPLICATION, "index_prefix": layout.prefix, "user_id": user_id}


def role_descriptors(layout: IndexLayout, user_id: str) -> dict[str, Any]:
    return {
        f"atlas_read_{user_id}": {
            "cluster": ["monitor_inference"],
            "indices": [
                {
                    "names": [p for k in ALL_TYPES for p in layout.patterns(k)],
                    "privileges": ["read"],
                    "query": owner_filter(user_id, include_catalog=True),
                }
            ],
        }
    }


def create_key_body(layout: IndexLayout, user_id: str, expiration: str | None) -> dict[str, Any]:
    """``POST /_security/api_key``, sent with a *user* credential (an API key cannot mint it)."""
    body: dict[str, Any] = {
        "name": key_name(layout, user_id),
        "role_descriptors": role_descriptors(layout, user_id),
        "metadata": key_metadata(layout, user_id),
    }
    if expiration:
        body["expiration"] = expiration
    return body


def live_keys_body(layout: IndexLayout, user_id: str) -> dict[str, Any]:
    """``POST /_security/_query/api_key``: the user's live keys minted for *this* index prefix.

    With ``manage_own_api_key`` the cluster answers with the caller's own keys only, so a key
    minted by another deployment (another prefix) or another administrator is never touched.
    Keys from before the prefix was in the name carry the same metadata, so they are found too.
    """
    filters: list[dict[str, Any]] = [
        {"term": {f"metadata.{k}": {"value": v}}} for k, v in key_metadata(layout, user_id).items()
    ]
    filters.append({"term": {"invalidated": {"value": False}}})
    return {"query": {"bool": {"filter": filters}}, "size": QUERY_PAGE}


def invalidate_body(ids: list[str], owner: bool = True) -> dict[str, Any]:
    """``DELETE /_security/api_key``: these keys; with ``owner``, only if the caller owns them
    (what a least-privilege administrator with ``manage_own_api_key`` must send; one with
    ``manage_api_key`` may invalidate any key by its id)."""
    body: dict[str, Any] = {"ids": list(ids)}
    if owner:
        body["owner"] = True
    return body


def descriptor_problems(descriptors: dict[str, Any], layout: IndexLayout, user_id: str) -> list[str]:
    """How a key's role descriptors differ from what ``users add`` would mint for ``user_id``:
    a key made elsewhere (Kibana) must read the atlas indices only, and only through the DLS
    query of that user."""
    if len(descriptors) != 1:
        return [f"{len(descriptors)} role descriptors, expected exactly one"]
    ((_, descriptor),) = descriptors.items()
    entries = descriptor.get("indices") or []
    if len(entries) != 1:
        return [f"{len(entries)} index entries, expected exactly one (DLS queries of several are OR-ed)"]
    (entry,) = entries
    problems = []
    if sorted(entry.get("privileges") or []) != ["read"]:
        problems.append(f"index privileges {entry.get('privileges')}, expected [read]")
    wanted = {p for kind in ALL_TYPES for p in layout.patterns(kind)}
    if not wanted <= set(entry.get("names") or []):
        problems.append(f"index names {entry.get('names')}, expected {sorted(wanted)}")
    query = entry.get("query")
    if isinstance(query, str):
        query = json.loads(query)
    if query != owner_filter(user_id, include_catalog=True):
        problems.append(f"DLS query {json.dumps(query)}, expected the one `users add --dry-run` prints")
    return problems


@dataclass(frozen=True, slots=True)
class StoredKey:
    user_id: str
    id: str
    encoded: str
    created_at: str


class KeyStore:
    """Per-user keys: ``[users.<id>] es_api_key`` first, else the secrets file (mode 0600).

    The file is re-read when it changes, so a key minted while the server runs is picked up.
    """

    def __init__(self, path: Path, configured: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        self._configured = dict(configured or {})
        self._loaded: tuple[float, dict[str, StoredKey]] | None = None
        # Mints (and stores) a missing user's key: only for throw-away evaluation deployments.
        self.minter: Callable[[str], object] | None = None

    def forget_configured(self) -> None:
        """Use only the keys file (a scratch deployment's keys are minted into it)."""
        self._configured.clear()

    def configured_users(self) -> list[str]:
        return list(self._configured)

    def key_for(self, user_id: str) -> str:
        if user_id in self._configured:
            return self._configured[user_id]
        stored = self.stored().get(user_id)
        if stored is None and self.minter is not None:
            self.minter(user_id)
            stored = self.stored().get(user_id)
        if stored is None:
            raise ConfigurationError(
                f"user {user_id!r} has no Elasticsearch API key; an administrator runs "
                f"`atlas-mcp users add {user_id}` (or sets [users.{user_id}] es_api_key)"
            )
        return stored.encoded

    def stored(self) -> dict[str, StoredKey]:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return {}
        if self._loaded is None or self._loaded[0] != mtime:
            self._loaded = (mtime, self._read())
        return self._loaded[1]

    def _read(self) -> dict[str, StoredKey]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return {uid: StoredKey(uid, **entry) for uid, entry in data.get("users", {}).items()}
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigurationError(f"cannot read the key file {self.path}: {exc}") from exc

    def save(self, user_id: str, api_key_id: str, encoded: str, at: datetime | None = None) -> StoredKey:
        entry = StoredKey(user_id, api_key_id, encoded, iso(at or utcnow()) or "")
        self._write({**self.stored(), user_id: entry})
        return entry

    def remove(self, user_id: str) -> StoredKey | None:
        keys = dict(self.stored())
        entry = keys.pop(user_id, None)
        if entry is not None:
            self._write(keys)
        return entry

    def _write(self, keys: dict[str, StoredKey]) -> None:
        """Atomic replace; the file is created 0600 and never exists with wider permissions."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "users": {
                u: {"id": k.id, "encoded": k.encoded, "created_at": k.created_at} for u, k in keys.items()
            }
        }
        with replaced(self.path) as out:
            out.write(json.dumps(data, indent=2, sort_keys=True).encode())
        self._loaded = None
