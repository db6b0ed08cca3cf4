"""Administration: create the indices, mint and revoke per-user DLS keys.

Each operation has a *plan* (the exact requests, printable without a cluster: ``--dry-run``)
and an *apply* step that sends it. Keys are minted with the user credential from
``[elasticsearch] username/password``, because an API key cannot mint keys with privileges.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ...config_tables import ElasticsearchSettings
from ...errors import AtlasError, BackendUnavailable, ConfigurationError, InvalidInput
from ...log import get_logger
from .failures import Unauthenticated
from .keys import (
    KeyStore,
    StoredKey,
    create_key_body,
    invalidate_body,
    key_metadata,
    key_name,
    live_keys_body,
)
from .layout import ALL_TYPES, IndexLayout
from .mappings import all_index_bodies
from .migration import aliased
from .transport import Cluster, admin_is_api_key

log = get_logger(__name__)
MINT_NEEDS_A_USER = (
    "an API key cannot mint keys that carry privileges, and the administrator credential here is "
    "one ([elasticsearch] admin_api_key; Serverless has no passwords). Create {user}'s key in Kibana "
    "(Stack Management > API keys) with the role descriptor and metadata `atlas-mcp users add {user} "
    "--dry-run` prints, then register it: `atlas-mcp users add {user} --api-key <encoded key>`"
)
VERIFY_ATTEMPTS = 3  # checks that a revoked key is turned away, a short pause apart
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
        raise InvalidInput(
            "user ids are 1-64 letters, digits, '_', '.', '@', '-' (starting with a letter or digit)"
        )
    return user_id


def bootstrap_plan(layout: IndexLayout, inference_id: str) -> list[PlannedRequest]:
    return [
        PlannedRequest("PUT", f"/{name}", body)
        for name, body in all_index_bodies(layout, inference_id).items()
    ]


def bootstrap(cluster: Cluster, layout: IndexLayout, inference_id: str) -> list[str]:
    """Create every missing index (with its alias); existing ones are left as they are, and one
    still served by an index of an older version is named with the command that migrates it."""
    plan = bootstrap_plan(layout, inference_id)
    require_manage(cluster, [n for r in plan for n in (r.path.lstrip("/"), *r.body["aliases"])])
    report = []
    for request in plan:
        (alias,) = request.body["aliases"]
        name = request.path.lstrip("/")
        current = aliased(cluster, alias)
        if current == name:
            report.append(f"exists   {alias}")
            continue
        if current is not None:
            report.append(
                f"outdated {alias} ({current}; this version uses {name}): run `atlas-mcp bootstrap --migrate`"
            )
            continue
        cluster.call(
            f"create index {name}",
            lambda es, n=name, b=request.body: es.indices.create(index=n, **b),
            idempotent=False,
        )
        report.append(f"created  {name} (alias {alias})")
    return report


def require_manage(cluster: Cluster, names: list[str]) -> None:
    """``bootstrap`` creates each index with its alias (and reads aliases to find what exists):
    that needs ``manage`` on both names, ``create_index`` alone is refused."""
    held = cluster.call(
        "check the privileges bootstrap needs",
        lambda es: es.security.has_privileges(index=[{"names": names, "privileges": ["manage"]}]),
    )
    lacking = [name for name, privileges in held.get("index", {}).items() if not privileges.get("manage")]
    if lacking:
        raise ConfigurationError(
            f"bootstrap needs `manage` on {', '.join(lacking)}: each index is created with its alias, "
            "which needs `manage` on both names (`create_index` is not enough). Grant `manage` on "
            "the atlas indices (<prefix>-*) to the administrator's role."
        )


def user_key_plan(layout: IndexLayout, user_id: str, expiration: str | None) -> PlannedRequest:
    return PlannedRequest(
        "POST", "/_security/api_key", create_key_body(layout, check_user_id(user_id), expiration)
    )


def minter_gaps(admin: Cluster, layout: IndexLayout) -> list[str]:
    """What a key this administrator mints would lack: a key can do no more than its minter
    (its rights are the intersection of its role descriptor and the minter's roles). Without
    ``read`` the key could read nothing: refused. Without ``monitor_inference`` it cannot read
    the inference endpoints, and atlas then reads rerank scores by their range: a warning."""
    names = [p for k in ALL_TYPES for p in layout.patterns(k)]
    held = admin.call(
        "check the administrator's privileges",
        lambda es: es.security.has_privileges(
            cluster=["monitor_inference"], index=[{"names": names, "privileges": ["read"]}]
        ),
    )
    unreadable = [name for name, privileges in held.get("index", {}).items() if not privileges.get("read")]
    if unreadable:
        raise ConfigurationError(
            f"the administrator credential lacks `read` on {', '.join(unreadable)}, so a key it mints "
            "could read nothing (a key can do no more than the user who mints it); grant it `read` on "
            f"{layout.prefix}-* and try again"
        )
    if not held.get("cluster", {}).get("monitor_inference"):
        gap = (
            "the administrator credential lacks `monitor_inference`, so the key cannot read the "
            "inference endpoints (a key can do no more than the user who mints it): atlas then reads "
            "rerank scores by their range and takes the embedding endpoint as dense. Grant "
            "`monitor_inference` to the administrator's role and run `users add` again."
        )
        return [gap]
    return []


def add_user(
    admin: Cluster, keys: KeyStore, layout: IndexLayout, user_id: str, expiration: str | None
) -> StoredKey:
    """Mint a DLS key for ``user_id``, invalidate the user's other keys under this prefix (the
    stored one included), then store the new one. If an old key cannot be invalidated (or stays
    valid: another credential owns it), the new key is invalidated again and the stored key stays
    as it was: a rotation either happens whole or not at all."""
    if admin_is_api_key(admin.config):
        raise ConfigurationError(MINT_NEEDS_A_USER.format(user=user_id))
    body = user_key_plan(layout, user_id, expiration).body
    created = admin.call(
        f"mint a key for user {user_id}", lambda es: es.security.create_api_key(**body), idempotent=False
    )
    return rotate(admin, keys, layout, user_id, created)


def rotate(
    admin: Cluster,
    keys: KeyStore,
    layout: IndexLayout,
    user_id: str,
    created: dict[str, Any],
    *,
    withdraw: bool = True,
) -> StoredKey:
    """Store the ``created`` key once the user's other keys are invalidated (and turned away);
    else (``withdraw``) invalidate it again, and leave the stored key as it was."""
    previous = keys.stored().get(user_id)
    try:
        stale = [k for k in live_key_ids(admin, layout, user_id) if k != created["id"]]
        if previous is not None and previous.id not in stale:
            stale.append(previous.id)
        invalidate(admin, stale, f"invalidate the old keys of user {user_id}")
        if previous is not None:
            require_invalid(admin, previous)
    except AtlasError:
        if not withdraw:
            raise
        try:
            invalidate(admin, [created["id"]], f"withdraw the new key of user {user_id}")
        except AtlasError:
            log.error("elasticsearch_orphan_key", user_id=user_id, key_id=created["id"])
        raise
    return keys.save(user_id, created["id"], created["encoded"])


def revoke_user(admin: Cluster, keys: KeyStore, layout: IndexLayout, user_id: str) -> int:
    """Invalidate the user's keys minted for this index prefix (and the stored one), check that
    the stored one no longer works, then forget it; how many were invalidated. On failure, or if
    the stored key still works, the record is kept, since the key is still live."""
    ids = live_key_ids(admin, layout, check_user_id(user_id))
    stored = keys.stored().get(user_id)
    if stored is not None and stored.id not in ids:
        ids.append(stored.id)
    count = invalidate(admin, ids, f"revoke the keys of user {user_id}")
    if stored is not None:
        require_invalid(admin, stored)
    keys.remove(user_id)
    return count


def manages_every_key(admin: Cluster) -> bool:
    """Whether the administrator holds ``manage_api_key`` (any key by id) or only its own keys."""
    held = admin.call(
        "check the administrator's key privileges",
        lambda es: es.security.has_privileges(cluster=["manage_api_key"]),
    )
    return bool(held.get("cluster", {}).get("manage_api_key"))


def require_invalid(admin: Cluster, key: StoredKey) -> None:
    """Raise unless ``key`` is refused by the cluster now. An invalidation answers with an empty
    success for a key the caller does not own (``owner: true`` looks up the caller's own keys
    only), so the only proof is the key itself being turned away (``_authenticate`` needs no
    privilege; a few short pauses allow for the nodes' authentication caches)."""
    for attempt in range(VERIFY_ATTEMPTS):
        try:
            admin.call(
                f"check that key {key.id} of user {key.user_id} no longer works",
                lambda es: es.security.authenticate(),
                client=admin.as_user(key.encoded),
                retries=0,
            )
        except Unauthenticated:
            return
        if attempt + 1 < VERIFY_ATTEMPTS:
            admin.pause(attempt)
    raise ConfigurationError(
        f"key {key.id} of user {key.user_id} is still valid: another credential owns it (another "
        "administrator, or it was made in Kibana), and the cluster answers an invalidation of someone "
        "else's key with an empty success. Its record is kept. Invalidate it with its owner's "
        f'credential, in Kibana (Stack Management > API keys) or with DELETE /_security/api_key {{"ids": ["{key.id}"]}} '
        "and the `manage_api_key` privilege, then run this command again."
    )


def live_key_ids(admin: Cluster, layout: IndexLayout, user_id: str) -> list[str]:
    body = live_keys_body(layout, user_id)
    found = admin.call(f"list the keys of user {user_id}", lambda es: es.security.query_api_keys(**body))
    return [k["id"] for k in found.get("api_keys") or []]


def invalidate(admin: Cluster, ids: list[str], what: str) -> int:
    """Invalidate ``ids``: any of them with ``manage_api_key``, else the caller's own (``owner``);
    an error per key is an error for all."""
    if not ids:
        return 0
    body = invalidate_body(ids, owner=not manages_every_key(admin))
    result = admin.call(what, lambda es: es.security.invalidate_api_key(**body))
    if result.get("error_count"):
        reasons = "; ".join(str(e.get("reason", e)) for e in result.get("error_details") or [])
        raise BackendUnavailable(f"could not {what}: {reasons}")
    return len(result.get("invalidated_api_keys") or [])


def derive_key(admin: Cluster, layout: IndexLayout, user_id: str) -> dict[str, Any]:
    """A key derived from the administrator's API key, for an evaluation's throw-away user where
    an API key administers (Serverless): the only key an API key may create has no role
    descriptor and its parent's rights, so no DLS; the code-level owner filter keeps the users
    apart, which changes no ranking (DLS filters hits, not scores)."""
    body = {
        "name": key_name(layout, user_id),
        "metadata": key_metadata(layout, user_id),
        "expiration": "1d",
        "role_descriptors": {},
    }
    log.warning("elasticsearch_eval_key_without_dls", user_id=user_id, index_prefix=layout.prefix)
    return admin.call(
        f"derive a key for user {user_id}", lambda es: es.security.create_api_key(**body), idempotent=False
    )


@contextmanager
def scratch_deployment(config: ElasticsearchSettings, keys: KeyStore) -> Iterator[Callable[[str], StoredKey]]:
    """A throw-away deployment under ``config.index_prefix`` (evaluations): bootstrapped first,
    a user's key minted when first asked for (``KeyStore.minter``), every minted key revoked at
    the end. The indices stay, for inspection. Needs the admin credential, as ``users add`` does."""
    from .transport import connect

    cluster = Cluster(connect(config, admin=True), config)
    layout = IndexLayout(config.index_prefix)
    minted: list[str] = []

    def mint(user_id: str) -> StoredKey:
        if admin_is_api_key(config):
            stored = rotate(cluster, keys, layout, user_id, derive_key(cluster, layout, user_id))
        else:
            stored = add_user(cluster, keys, layout, user_id, "1d")
        minted.append(user_id)
        return stored

    try:
        bootstrap(cluster, layout, config.embedding_inference_id)
        for gap in [] if admin_is_api_key(config) else minter_gaps(cluster, layout):
            log.warning("elasticsearch_minter_gap", detail=gap)
        yield mint
    finally:
        for user_id in minted:
            try:
                revoke_user(cluster, keys, layout, user_id)
            except AtlasError:
                log.error("elasticsearch_scratch_key_left", user_id=user_id, index_prefix=layout.prefix)
        cluster.close()
