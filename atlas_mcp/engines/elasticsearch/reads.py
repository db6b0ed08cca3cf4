"""Reading from the cluster: as whom, with which versions, and only complete answers.

Every read of memories runs with the caller's DLS key (``None``: the writer, for the shared
catalog and operator views), so the cluster itself hides other users' memories. A search the
cluster answers from only some of its shards (``_shards.failed``, or ``timed_out``) is not an
answer: a memory missing from it would look forgotten, and from an export it would be lost. It is
asked again after a pause, and if it stays partial, it fails with the cluster's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...domain.model import Memory, MemoryType
from ...errors import BackendUnavailable
from ...log import get_logger
from . import documents as docs
from . import requests as rq
from .failures import innermost
from .keys import KeyStore
from .layout import IndexLayout
from .transport import Cluster

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Stored:
    """A memory as read, with the version it was read at."""

    memory: Memory
    version: tuple[int, int] | None


class Reader:
    def __init__(self, cluster: Cluster, keys: KeyStore, layout: IndexLayout) -> None:
        self.cluster = cluster
        self.keys = keys
        self.layout = layout

    def client(self, user_id: str | None) -> Any:
        """``user_id``'s DLS key (``None``: the writer, for the shared catalog only)."""
        return None if user_id is None else self.cluster.as_user(self.keys.key_for(user_id))

    def search(self, client: Any, what: str, request: rq.SearchRequest) -> dict[str, Any]:
        """The response to ``request``, from every shard it addressed."""
        indices = list(request.indices) or None  # none: the point in time names them
        budget = self.cluster.config.max_retries
        for attempt in range(budget + 1):
            response: dict[str, Any] = self.cluster.call(
                what, lambda es: es.search(index=indices, body=request.body), client=client
            )
            gap = partial(response)
            if gap is None:
                return response
            log.warning("elasticsearch_partial_results", operation=what, attempt=attempt + 1, gap=gap)
            if attempt < budget:
                self.cluster.pause(attempt)
        raise incomplete(what, gap)

    def hits(self, user_id: str | None, what: str, request: rq.SearchRequest) -> list[dict[str, Any]]:
        return list(self.search(self.client(user_id), what, request)["hits"]["hits"])

    def stored(
        self,
        user_id: str | None,
        ids: Sequence[str],
        kinds: Sequence[MemoryType],
        what: str,
        *,
        retries: int | None = None,
    ) -> list[Stored]:
        """The caller's memories among ``ids``, read in real time with their versions."""
        if not ids:
            return []
        body = rq.mget_body(self.layout, ids, kinds)
        found = self.cluster.call(
            what, lambda es: es.mget(docs=body["docs"]), client=self.client(user_id), retries=retries
        )
        stored = [from_hit(d, user_id) for d in found["docs"] if d.get("found")]
        by_id = {s.memory.id: s for s in stored if s is not None}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]


def from_hit(hit: dict[str, Any], user_id: str | None) -> Stored | None:
    """A hit as a memory of ``user_id`` (or the catalog); None if it is anyone else's."""
    memory = docs.from_source(hit["_id"], hit["_source"])
    if memory.user_id not in (user_id, None):  # the DLS key should make this impossible
        log.error("elasticsearch_isolation_breach", index=hit.get("_index"), id=hit["_id"])
        return None
    version = (hit["_seq_no"], hit["_primary_term"]) if "_seq_no" in hit else None
    return Stored(memory, version)


def partial(response: dict[str, Any]) -> str | None:
    """How a search answer is incomplete (shards that failed, a timeout), or None if it is whole."""
    shards = response.get("_shards") or {}
    failed = int(shards.get("failed") or 0)
    if failed:
        failures = shards.get("failures") or [{}]
        _, reason = innermost(failures[0].get("reason"))
        return f"{failed} of {shards.get('total', '?')} shards failed ({reason or 'no reason given'})"
    if response.get("timed_out"):
        return "the search timed out on some shards"
    return None


def incomplete(what: str, gap: str | None) -> BackendUnavailable:
    return BackendUnavailable(
        f"Elasticsearch answered {what} only in part: {gap}. A partial answer would hide memories, so "
        "none is given; try again shortly (`atlas-mcp doctor` checks the indices)"
    )
