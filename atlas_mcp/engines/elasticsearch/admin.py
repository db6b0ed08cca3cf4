"""Administration: create the indices, mint and revoke per-user DLS keys.

Each operation has a *plan* (the exact requests, printable without a cluster: ``--dry-run``)
and an *apply* step that sends it. Keys are minted with the user credential from
``[elasticsearch] username/password``, because an API key cannot mint keys with privileges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...errors import InvalidInput
from .keys import KeyStore, StoredKey, create_key_body, invalidate_body
from .layout import IndexLayout
from .mappings import all_index_bodies
from .transport import Cluster

_USER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,63}$")


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    method: str
    path: str
    body: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path, "body": self.body}


def check_user_id(user_id: str) -> str:
    if not _USER_ID.match(user_id):
        raise InvalidInput("user ids are 1-64 letters, digits, '_', '.', '@', '-' (starting with a letter or digit)")
    return user_id


def bootstrap_plan(layout: IndexLayout, inference_id: str) -> list[PlannedRequest]:
    return [PlannedRequest("PUT", f"/{name}", body) for name, body in all_index_bodies(layout, inference_id).items()]


def bootstrap(cluster: Cluster, layout: IndexLayout, inference_id: str) -> list[str]:
    """Create every missing index (with its alias); existing ones are left as they are."""
    report = []
    for request in bootstrap_plan(layout, inference_id):
        (alias,) = request.body["aliases"]
        if cluster.call(f"check alias {alias}", lambda es, a=alias: bool(es.indices.exists_alias(name=a))):
            report.append(f"exists   {alias}")
            continue
        name = request.path.lstrip("/")
        cluster.call(f"create index {name}", lambda es, n=name, b=request.body: es.indices.create(index=n, **b),
                     idempotent=False)
        report.append(f"created  {name} (alias {alias})")
    return report


def user_key_plan(layout: IndexLayout, user_id: str, expiration: str | None) -> PlannedRequest:
    return PlannedRequest("POST", "/_security/api_key", create_key_body(layout, check_user_id(user_id), expiration))


def add_user(admin: Cluster, keys: KeyStore, layout: IndexLayout, user_id: str, expiration: str | None) -> StoredKey:
    """Mint a DLS key for ``user_id`` and store it; a previous key of that user is invalidated."""
    body = user_key_plan(layout, user_id, expiration).body
    created = admin.call(f"mint a key for user {user_id}", lambda es: es.security.create_api_key(**body),
                         idempotent=False)
    previous = keys.stored().get(user_id)
    stored = keys.save(user_id, created["id"], created["encoded"])
    if previous is not None and previous.id != stored.id:
        admin.call(f"invalidate the old key of user {user_id}",
                   lambda es: es.security.invalidate_api_key(ids=[previous.id]))
    return stored


def revoke_user(admin: Cluster, keys: KeyStore, user_id: str) -> int:
    """Invalidate every key minted for ``user_id`` and forget the stored one; how many were invalidated."""
    body = invalidate_body(check_user_id(user_id))
    try:
        result = admin.call(f"revoke the keys of user {user_id}", lambda es: es.security.invalidate_api_key(**body))
    finally:
        keys.remove(user_id)
    return len(result.get("invalidated_api_keys") or [])

