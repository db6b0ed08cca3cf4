"""Listings: an owner's memories in order, paged through one point in time.

A point in time is a snapshot: paged with ``search_after`` over a total order (when it happened,
when it was written, then ``_shard_doc``), a listing goes past ``index.max_result_window`` at
O(n) cost, and a write or a forget during it neither repeats nor drops a memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing
from typing import Any

from ...domain.model import USER_MEMORY_TYPES, Memory, MemoryType
from ...errors import AtlasError
from ...log import get_logger
from ..base import ListQuery
from . import requests as rq
from .reads import Reader, from_hit

log = get_logger(__name__)


class Listing:
    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.cluster = reader.cluster

    def list(self, query: ListQuery) -> list[Memory]:
        """One page: ``limit`` memories after the first ``offset``."""
        if query.limit <= 0:
            return []
        with closing(self._scan(query, min(rq.LIST_PAGE, query.offset + query.limit))) as memories:
            return list(itertools.islice(memories, query.offset, query.offset + query.limit))

    def scan(self, query: ListQuery) -> Iterator[Memory]:
        """Every memory ``query`` selects (``limit`` and ``offset`` aside), from one snapshot:
        what an export reads."""
        return self._scan(query, rq.LIST_PAGE)

    def _scan(self, query: ListQuery, first_page: int) -> Generator[Memory, None, None]:
        kinds = _kinds(query)
        if not kinds:
            return
        user_id, what = query.user_id, f"list for user {query.user_id or 'catalog'}"
        client = self.reader.client(user_id)
        aliases = self.reader.layout.aliases(tuple(kinds))
        opened = self.cluster.call(
            f"{what} (open a point in time)",
            lambda es: es.open_point_in_time(index=aliases, keep_alive=rq.PIT_KEEP_ALIVE),
            client=client,
        )
        pit_id, after, size = opened["id"], None, first_page
        try:
            while True:
                request = rq.list_page_request(
                    pit_id, user_id, query.include_superseded, size, query.since, query.oldest_first, after,
                    query.about, query.expired_by,
                )  # fmt: skip
                response = self.reader.search(client, what, request)
                hits = response["hits"]["hits"]
                pit_id = response.get("pit_id", pit_id)
                for hit in hits:
                    stored = from_hit(hit, user_id)
                    if stored is not None:
                        yield stored.memory
                if len(hits) < size:
                    return
                after, size = hits[-1]["sort"], rq.LIST_PAGE
        finally:
            self._close(client, pit_id)

    def _close(self, client: Any, pit_id: str) -> None:
        try:  # it expires by itself after keep_alive; closing early frees the cluster's resources
            self.cluster.call(
                "close a point in time", lambda es: es.close_point_in_time(id=pit_id), client=client
            )
        except AtlasError:
            log.warning("elasticsearch_pit_not_closed")


def _kinds(query: ListQuery) -> Sequence[MemoryType]:
    if query.user_id is None:
        return [MemoryType.CATALOG]
    return [k for k in USER_MEMORY_TYPES if query.memory_types is None or k in query.memory_types]
