"""The audit trail in Elasticsearch: entries live in the writer-only state index (no DLS key
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
from ..base import AuditQuery
from . import requests as rq
from .layout import IndexLayout

KEY = "audit"


def operations(layout: IndexLayout, entries: Sequence[AuditEntry]) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for seq, entry in enumerate(entries):
        record = entry.to_record() | {"seq": seq}
        value = json.dumps(record, ensure_ascii=False, sort_keys=True)
        doc_id = hashlib.sha256(value.encode()).hexdigest()  # the same entry twice is one document
        source = {"user_id": entry.user_id, "key": KEY, "value": value, "updated_at": iso(entry.at)}
        ops += rq.bulk_index(layout.state_alias, doc_id, source)
    return ops


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
