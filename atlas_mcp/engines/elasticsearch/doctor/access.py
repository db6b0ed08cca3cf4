"""Doctor's checks of who may do what: the writer's privileges and each user's key."""

from __future__ import annotations

from typing import Any

from ....errors import AtlasError
from ..keys import KeyStore
from ..layout import ALL_TYPES, IndexLayout
from ..transport import Cluster
from .report import FAIL, OK, WARN, Check, Grants

WRITER_PRIVILEGES = ["read", "create_doc", "index", "delete"]
# Privileges only doctor's own probes use: without them a probe is skipped (warn), never failed.
PROBE_CLUSTER = ["monitor", "monitor_inference"]
PROBE_INDEX = ["view_index_metadata"]


def read_grants(cluster: Cluster, layout: IndexLayout) -> Grants:
    names = [*(p for k in ALL_TYPES for p in layout.patterns(k)), f"{layout.state_alias}*"]
    result = cluster.call(
        "check writer privileges",
        lambda es: es.security.has_privileges(
            cluster=PROBE_CLUSTER, index=[{"names": names, "privileges": [*WRITER_PRIVILEGES, *PROBE_INDEX]}]
        ),
    )
    held = frozenset(p for p, ok in result.get("cluster", {}).items() if ok)
    index = result.get("index", {})
    missing = tuple(
        f"{p} on {name}"
        for name, privileges in index.items()
        for p, ok in privileges.items()
        if not ok and p in WRITER_PRIVILEGES
    )
    view = all(privileges.get("view_index_metadata") for privileges in index.values())
    return Grants(held, missing, view)


def writer(grants: Grants) -> list[Check]:
    missing = grants.missing_index
    return [
        Check(
            "writer privileges",
            FAIL if missing else OK,
            f"missing {', '.join(missing)}" if missing else "read/create/index/delete on the atlas indices",
            "grant the writer's role these index privileges" if missing else "",
        )
    ]


def user_keys(cluster: Cluster, layout: IndexLayout, keys: KeyStore) -> list[Check]:
    names = [p for k in ALL_TYPES for p in layout.patterns(k)]
    users = sorted(set(keys.stored()) | set(keys.configured_users()))
    if not users:
        return [Check("user keys", WARN, "no user has a key yet", "`atlas-mcp users add <id>`")]
    out = []
    for user_id in users:
        try:
            as_user = cluster.as_user(keys.key_for(user_id))
            result = cluster.call(
                f"check the key of user {user_id}",
                lambda es: es.security.has_privileges(
                    cluster=["monitor_inference"], index=[{"names": names, "privileges": ["read"]}]
                ),
                client=as_user,
            )
        except AtlasError as exc:
            out.append(
                Check(f"key of {user_id}", FAIL, str(exc), f"`atlas-mcp users add {user_id}` mints a new one")
            )
            continue
        missing = _missing(result)
        out.append(
            Check(
                f"key of {user_id}",
                FAIL if missing else OK,
                f"missing {', '.join(missing)}" if missing else "read (DLS) + monitor_inference",
                (
                    "a key can do no more than the administrator who minted it: grant the "
                    f"administrator's role {' and '.join(missing)}, then `atlas-mcp users add {user_id}`"
                )
                if missing
                else "",
            )
        )
    return out


def _missing(result: dict[str, Any]) -> list[str]:
    missing = [p for p, ok in result.get("cluster", {}).items() if not ok]
    for index, privileges in result.get("index", {}).items():
        missing += [f"{p} on {index}" for p, ok in privileges.items() if not ok]
    return missing
