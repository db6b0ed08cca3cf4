"""The audit trail in Elasticsearch, appended and read: entries live in the writer-only state index (no DLS key
reads it), as documents with ``key = "audit"``, the entry as JSON and its time as ``updated_at``,
so the index and its mapping stay as bootstrap made them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...domain.audit import AuditEntry, from_record
from ...domain.model import iso
from ...errors import AtlasError
from ...log import get_logger
from ..base import AuditQuery
from . import requests as rq
from .layout import IndexLayout
from .transport import Cluster

KEY = "audit"

log = get_logger(__name__)


def operations(layout: IndexLayout, entries: Sequence[AuditEntry]) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for seq, entry in enumerate(entries):
        record = entry.to_record() | {"seq": seq}
        value = json.dumps(record, ensure_ascii=False, sort_keys=True)
        doc_id = hashlib.sha256(value.encode()).hexdigest()  # the same entry twice is one document
        source = {"user_id": entry.user_id, "key": KEY, "value": value, "updated_at": iso(entry.at)}
        ops += rq.bulk_index(layout.state_alias, doc_id, source)
    return ops


def read(cluster: Cluster, layout: IndexLayout, query: AuditQuery) -> list[AuditEntry]:
    """An owner's entries, oldest first, paged through one point in time."""
    what = f"read the audit trail of {query.user_id or 'the catalog'}"
    opened = cluster.call(
        f"{what} (open a point in time)",
        lambda es: es.open_point_in_time(index=layout.state_alias, keep_alive=rq.PIT_KEEP_ALIVE),
    )
    pit_id, after = opened["id"], None
    hits: list[dict[str, Any]] = []
    try:
        while len(hits) < query.limit:
            size = min(rq.LIST_PAGE, query.limit - len(hits))
            body = page_body(query, pit_id, size, after)
            response = cluster.call(what, lambda es, body=body: es.search(body=body))
            page = response["hits"]["hits"]
            pit_id = response.get("pit_id", pit_id)
            hits += page
            if len(page) < size:
                break
            after = page[-1]["sort"]
    finally:
        try:  # it expires by itself after keep_alive; closing early frees the cluster's resources
            cluster.call("close a point in time", lambda es: es.close_point_in_time(id=pit_id))
        except AtlasError:
            log.warning("elasticsearch_pit_not_closed")
    return entries(hits, query)


def page_body(query: AuditQuery, pit_id: str, size: int, after: list[Any] | None) -> dict[str, Any]:
    """One page of an owner's entries through a point in time: ``_shard_doc`` breaks ties of
    time, so ``search_after`` never skips or repeats an entry (a write and its supersessions
    share one instant)."""
    owner = (
        {"term": {"user_id": query.user_id}}
        if query.user_id is not None
        else {"bool": {"must_not": [{"exists": {"field": "user_id"}}]}}
    )
    filters: list[dict[str, Any]] = [{"term": {"key": KEY}}, owner]
    if query.since is not None:  # dates hold milliseconds: from that millisecond, the rest below
        since = query.since.replace(microsecond=query.since.microsecond // 1000 * 1000)
        filters.append({"range": {"updated_at": {"gte": iso(since)}}})
    body: dict[str, Any] = {
        "query": {"bool": {"filter": filters}},
        "sort": [{"updated_at": {"order": "asc"}}, {"_shard_doc": {"order": "asc"}}],
        "size": size,
        "_source": ["value"],
        "pit": {"id": pit_id, "keep_alive": rq.PIT_KEEP_ALIVE},
    }
    if after is not None:
        body["search_after"] = list(after)
    return body


def entries(hits: list[dict[str, Any]], query: AuditQuery) -> list[AuditEntry]:
    """The hits as entries, in time order (ties in the order they were recorded)."""
    records = [json.loads(hit["_source"]["value"]) for hit in hits]
    records.sort(key=lambda r: (datetime.fromisoformat(r["at"]), r.get("seq", 0)))
    found = [from_record(r) for r in records]
    return [e for e in found if e.user_id == query.user_id and (query.since is None or e.at > query.since)]
