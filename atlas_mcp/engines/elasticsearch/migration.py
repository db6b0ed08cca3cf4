"""Moving a deployment's indices to this version's mappings (``atlas-mcp bootstrap --migrate``).

A mapping change ships as a new concrete index (``<prefix>-<type>-v<N>``) behind the same
alias. Migrating an alias that still points at an older index creates the new one, copies every
document into it (re-encoded by ``documents``, so derived fields such as the microsecond keys are
filled in; ``semantic_text`` runs inference again on the copy), checks the count, and then swaps
the alias in one atomic ``_aliases`` request. The old index is kept, unserved, for the operator
to delete once satisfied. A half-done copy is never served: running again starts it afresh.

The servers should be stopped while it runs: a write to the old index after its documents were
copied is not carried over (the count check then fails, and nothing is swapped).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...domain.model import MemoryType
from ...errors import AtlasError, BackendUnavailable
from ...log import get_logger
from . import documents as docs
from .layout import ALL_TYPES, IndexLayout
from .mappings import SEMANTIC, all_index_bodies
from .transport import Cluster

log = get_logger(__name__)
COPY_PAGE = 500
KEEP_ALIVE = "5m"  # between two pages of one copy (each page also re-encodes and bulk-writes)


@dataclass(frozen=True, slots=True)
class Outdated:
    """An alias served by an index of an older atlas version."""

    alias: str
    current: str  # the concrete index the alias points at now
    target: str  # this version's concrete index for it
    kind: MemoryType | None  # None: the state index

    def describe(self) -> str:
        return f"{self.alias} is served by {self.current}; this atlas-mcp uses {self.target}"


def aliased(cluster: Cluster, alias: str) -> str | None:
    """The concrete index behind ``alias`` (its write index), or None if there is no such alias."""
    found = cluster.call(
        f"read alias {alias}", lambda es: es.options(ignore_status=404).indices.get_alias(name=alias)
    )
    if getattr(found, "meta", None) is not None and found.meta.status == 404:
        return None
    named = {index: entry.get("aliases", {}).get(alias) for index, entry in dict(found).items()}
    names: list[str] = sorted(index for index, spec in named.items() if spec is not None)
    writers = [index for index in names if (named[index] or {}).get("is_write_index")]
    return next(iter(writers or names), None)


def targets(layout: IndexLayout) -> list[tuple[str, str, MemoryType | None]]:
    """(alias, this version's concrete index, kind) for every index a deployment has."""
    out: list[tuple[str, str, MemoryType | None]] = [
        (layout.alias(k), layout.concrete(k), k) for k in ALL_TYPES
    ]
    return [*out, (layout.state_alias, layout.state_concrete, None)]


def outdated(cluster: Cluster, layout: IndexLayout) -> list[Outdated]:
    out = []
    for alias, target, kind in targets(layout):
        current = aliased(cluster, alias)
        if current is not None and current != target:
            out.append(Outdated(alias, current, target, kind))
    return out


def migration_plan(layout: IndexLayout, inference_id: str) -> list[dict[str, Any]]:
    """What ``migrate`` sends for each alias still served by an older index (``--dry-run``:
    which ones are is only known to the cluster, so the old index is named ``<current>``)."""
    bodies = all_index_bodies(layout, inference_id)
    plan: list[dict[str, Any]] = []
    for alias, target, _ in targets(layout):
        body = {k: v for k, v in bodies[target].items() if k != "aliases"}
        actions = [
            {"add": {"index": target, "alias": alias, "is_write_index": True}},
            {"remove": {"index": "<current>", "alias": alias}},
        ]
        plan += [
            {"method": "PUT", "path": f"/{target}", "body": body},
            {
                "method": "POST",
                "path": "/_bulk",
                "body": f"every document of <current> (the index {alias} names), re-encoded",
            },
            {"method": "POST", "path": "/_aliases", "body": {"actions": actions}},
        ]
    return plan


def migrate(cluster: Cluster, layout: IndexLayout, inference_id: str) -> list[str]:
    """Migrate every outdated alias; one report line each (none: nothing to do)."""
    bodies = all_index_bodies(layout, inference_id)
    report = []
    for old in outdated(cluster, layout):
        copied = _migrate_one(cluster, old, {k: v for k, v in bodies[old.target].items() if k != "aliases"})
        report.append(
            f"migrated {old.alias}: {old.current} -> {old.target}, {copied} document(s) copied; "
            f"{old.current} is kept, unserved (delete it once satisfied: DELETE /{old.current})"
        )
    return report


def _migrate_one(cluster: Cluster, old: Outdated, body: dict[str, Any]) -> int:
    new = old.target
    exists = cluster.call(f"check index {new}", lambda es: bool(es.indices.exists(index=new)))
    if exists:  # a copy an earlier run left half-done: never served (the alias is elsewhere)
        cluster.call(f"delete the unfinished copy {new}", lambda es: es.indices.delete(index=new))
    cluster.call(f"create index {new}", lambda es: es.indices.create(index=new, **body), idempotent=False)
    copied = 0
    for page in _pages(cluster, old.current):
        _copy(cluster, new, page, old.kind)
        copied += len(page)
    cluster.call(f"refresh {new}", lambda es: es.indices.refresh(index=new))
    have = _count(cluster, old.current)
    got = _count(cluster, new)
    if not have == got == copied:
        raise BackendUnavailable(
            f"migrating {old.alias} copied {copied} document(s) but {old.current} holds {have} and {new} "
            f"{got}; was a server still writing? Stop every atlas-mcp server and run "
            "`atlas-mcp bootstrap --migrate` again (nothing was swapped)"
        )
    actions = [
        {"add": {"index": new, "alias": old.alias, "is_write_index": True}},
        {"remove": {"index": old.current, "alias": old.alias}},
    ]
    cluster.call(
        f"point {old.alias} at {new}", lambda es: es.indices.update_aliases(actions=actions), idempotent=False
    )
    log.info("elasticsearch_migrated", alias=old.alias, old=old.current, new=new, documents=copied)
    return copied


def _pages(cluster: Cluster, index: str) -> Iterator[list[dict[str, Any]]]:
    """Every document of ``index``, a page at a time, through one point in time."""
    opened = cluster.call(
        f"open a point in time on {index}",
        lambda es: es.open_point_in_time(index=index, keep_alive=KEEP_ALIVE),
    )
    pit_id, after = opened["id"], None
    try:
        while True:
            body: dict[str, Any] = {
                "size": COPY_PAGE,
                "sort": [{"_shard_doc": {"order": "asc"}}],
                "_source": {"excludes": [SEMANTIC]},
                "pit": {"id": pit_id, "keep_alive": KEEP_ALIVE},
                "track_total_hits": False,
            }
            if after is not None:
                body["search_after"] = after
            found = cluster.call(f"read {index}", lambda es, b=body: es.search(body=b))
            pit_id = found.get("pit_id", pit_id)
            hits = found["hits"]["hits"]
            if hits:
                yield hits
            if len(hits) < COPY_PAGE:
                return
            after = hits[-1]["sort"]
    finally:
        try:  # it expires by itself after keep_alive; closing early frees the cluster's resources
            cluster.call("close a point in time", lambda es: es.close_point_in_time(id=pit_id))
        except AtlasError:
            log.warning("elasticsearch_pit_not_closed")


def _copy(cluster: Cluster, index: str, hits: list[dict[str, Any]], kind: MemoryType | None) -> None:
    operations: list[dict[str, Any]] = []
    for hit in hits:
        source = (
            hit["_source"] if kind is None else docs.to_source(docs.from_source(hit["_id"], hit["_source"]))
        )
        operations += [{"index": {"_index": index, "_id": hit["_id"]}}, source]
    result = cluster.call(
        f"copy into {index}", lambda es: es.bulk(operations=operations, refresh="false"), idempotent=True
    )
    failed = [
        i for item in result["items"] for i in item.values() if not 200 <= int(i.get("status", 500)) < 300
    ]
    if failed:
        first = failed[0].get("error", {})
        raise BackendUnavailable(
            f"copying into {index} failed for {len(failed)} document(s) (first: {failed[0].get('_id')}: "
            f"{first.get('type', '')} {first.get('reason', '')}); nothing was swapped, run it again"
        )


def _count(cluster: Cluster, index: str) -> int:
    return int(cluster.call(f"count {index}", lambda es: es.count(index=index))["count"])
