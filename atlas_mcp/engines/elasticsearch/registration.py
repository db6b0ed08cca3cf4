"""Keys atlas cannot mint, registered: made in Kibana where an API key administers (Serverless).

An API key cannot mint a key that carries privileges, and Serverless has no passwords, so
there a user's DLS key is made in Kibana with the role descriptor ``users add --dry-run``
prints, and registered with ``users add <id> --api-key <encoded>``. Registration checks the key
before storing it: that the cluster accepts it, that it may read the atlas indices, and (when
the administrator credential may read it: ``manage_api_key``) that its role descriptor is the
one atlas would mint, DLS query included. It then takes the place of the user's other keys as a
rotation does.
"""

from __future__ import annotations

from ...errors import AtlasError, ConfigurationError
from .admin import check_user_id, rotate
from .failures import Forbidden
from .keys import KeyStore, StoredKey, descriptor_problems
from .layout import ALL_TYPES, IndexLayout
from .transport import Cluster


def register_key(
    cluster: Cluster, admin: Cluster | None, keys: KeyStore, layout: IndexLayout, user_id: str, encoded: str
) -> tuple[StoredKey, list[str]]:
    """Check ``encoded`` as ``user_id``'s key and store it; (the stored key, warnings)."""
    check_user_id(user_id)
    as_key = cluster.as_user(encoded)
    try:
        who = cluster.call("authenticate the key", lambda es: es.security.authenticate(), client=as_key)
    except AtlasError as exc:
        raise ConfigurationError(f"the cluster does not accept this key ({exc})") from exc
    key_id = str((who.get("api_key") or {}).get("id") or "")
    if not key_id:
        raise ConfigurationError("this credential is not an API key; register the encoded API key")
    names = [p for kind in ALL_TYPES for p in layout.patterns(kind)]
    held = cluster.call(
        "check what the key may read",
        lambda es: es.security.has_privileges(index=[{"names": names, "privileges": ["read"]}]),
        client=as_key,
    )
    unreadable = [n for n, p in held.get("index", {}).items() if not p.get("read")]
    if unreadable:
        raise ConfigurationError(f"key {key_id} may not read {', '.join(unreadable)}; give it `read` on them")
    warnings = _descriptor_warnings(admin, layout, user_id, key_id)
    stored = (
        rotate(admin, keys, layout, user_id, {"id": key_id, "encoded": encoded}, withdraw=False)
        if admin
        else keys.save(user_id, key_id, encoded)
    )
    return stored, warnings


def _descriptor_warnings(admin: Cluster | None, layout: IndexLayout, user_id: str, key_id: str) -> list[str]:
    """Refuse a key whose role descriptor is not atlas's; warn when it cannot be read."""
    unchecked = (
        f"the role descriptor of key {key_id} could not be read (the administrator credential needs "
        "`manage_api_key`): make sure it is the one `users add --dry-run` prints, DLS query included"
    )
    if admin is None:
        return [unchecked]
    try:
        found = admin.call(
            f"read key {key_id}", lambda es: es.security.get_api_key(id=key_id, with_limited_by=False)
        )
    except Forbidden:
        return [unchecked]
    (info, *_) = found.get("api_keys") or [{}]
    problems = descriptor_problems(info.get("role_descriptors") or {}, layout, user_id)
    if problems:
        raise ConfigurationError(
            f"key {key_id} is not a read-only key of {user_id} for these indices: {'; '.join(problems)}. "
            "Make it with the body `atlas-mcp users add --dry-run` prints."
        )
    return []
