"""ElasticsearchEngine: the ``Engine`` protocol over a cluster, with cluster-enforced isolation.

Reads run with the caller's DLS API key (``reads``), so the cluster itself hides other users'
memories; the code-level ``user_id`` filter in every body is defence in depth. Writes,
supersession and usage statistics go through the server's writer credential (``bulk``), which
stamps ``user_id`` from the caller's identity; before it changes an existing memory, the engine
proves ownership by reading that memory with the caller's key (real-time ``_mget``, so no
refresh is needed) and pins the version it read, so a concurrent change fails instead of being
overwritten. Recall is ``recall``; listings and exports are ``listing``.
"""

from __future__ import annotations

import builtins  # ElasticsearchEngine.list shadows the type in the annotations after it
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ...config import Settings
from ...config_tables import ElasticsearchSettings
from ...domain.audit import AuditEntry
from ...domain.model import USAGE_TYPES, USER_MEMORY_TYPES, Memory, MemoryType, iso, utcnow
from ...domain.scoring import ScoringPolicy
from ...domain.supersession import changed_meanwhile
from ...errors import AtlasError, BackendUnavailable, Conflict
from ...log import get_logger
from ..base import AuditQuery, Candidate, Engine, EngineInfo, ListQuery, RecallPlan, StoreStats, TypeCount
from . import audit_trail
from . import documents as docs
from . import requests as rq
from .bulk import bulk, conflict, item_error, ok, reason
from .keys import KeyStore
from .layout import ALL_TYPES, IndexLayout
from .listing import Listing
from .reads import Reader, Stored
from .recall import Recall
from .transport import REJECTED, Cluster

log = get_logger(__name__)
STATS_ATTEMPTS = 3  # rounds of read-then-conditional-update when recalls race on use_count
# What a recall may wait for its usage bookkeeping, in all: a finished recall is never held up
# for long by a best-effort counter (each call is tried once, without the retry budget).
TOUCH_WAIT_S = 0.5


class ElasticsearchEngine(Engine):
    def __init__(
        self,
        cluster: Cluster,
        keys: KeyStore,
        policy: ScoringPolicy | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        config = cluster.config
        self.cluster = cluster
        self.keys = keys
        self.policy = policy or ScoringPolicy()
        self.layout = IndexLayout(config.index_prefix)
        self.inference = rq.Inference.from_config(config)
        self._config: ElasticsearchSettings = config
        self._clock = clock
        self.reader = Reader(cluster, keys, self.layout)
        self.recall = Recall(self.reader, self.policy, self.inference, clock)
        self.listing = Listing(self.reader)
        self.info = EngineInfo(
            name="elasticsearch",
            reranks_server_side=self.inference.rerank_id is not None,
            embedding_model=config.embedding_inference_id,
        )

    def _bulk(
        self,
        what: str,
        operations: list[dict[str, Any]],
        *,
        refresh: str | None = None,
        retries: int | None = None,
    ) -> list[dict[str, Any]]:
        """Run a bulk request as the writer; one result per item, in order (never a user key)."""
        return bulk(self.cluster, what, operations, refresh=refresh or self._config.refresh, retries=retries)

    def _stored(
        self, user_id: str | None, ids: Sequence[str], kinds: Sequence[MemoryType], what: str
    ) -> list[Stored]:
        return self.reader.stored(user_id, ids, kinds, what)

    def _alias(self, memory: Memory) -> str:
        return self.layout.alias(memory.memory_type)

    # -- writes ------------------------------------------------------------------------

    def write(
        self, memory: Memory, *, supersede: Sequence[str] = (), trail: Sequence[AuditEntry] = ()
    ) -> None:
        self._write(memory, supersede)
        self.record(trail)  # no transactions across indices: the trail follows the write

    def _write(self, memory: Memory, supersede: Sequence[str]) -> None:
        if memory.is_catalog:
            self._write_catalog(memory)
            return
        targets = self._supersede_targets(memory, supersede)
        ops = rq.bulk_create(self.layout.alias(memory.memory_type), memory.id, docs.to_source(memory))
        for target in targets:
            ops += rq.bulk_update(
                self._alias(target.memory),
                target.memory.id,
                docs.superseded_doc(memory, target.memory),
                target.version,
            )
        results = self._bulk(f"write for user {memory.user_id}", ops)
        failed = [r for r in results if not ok(r)]
        if failed:
            self._roll_back(memory, results, targets)
            raise _write_failure(memory, failed)

    def _supersede_targets(self, memory: Memory, ids: Sequence[str]) -> list[Stored]:
        """The targets' versions, read with the caller's key, to make the write conditional on.

        The service has checked the supersession rules; a target that is gone, superseded or of
        another type now was changed by another writer since.
        """
        if not ids:
            return []
        found = self._stored(
            memory.user_id, ids, [memory.memory_type], f"supersede check for user {memory.user_id}"
        )
        by_id = {
            s.memory.id: s for s in found if s.memory.user_id == memory.user_id and not s.memory.is_superseded
        }
        lost = [i for i in ids if i not in by_id]
        if lost:
            raise changed_meanwhile(lost)
        return [by_id[i] for i in ids]

    def _roll_back(self, memory: Memory, results: list[dict[str, Any]], targets: list[Stored]) -> None:
        """Undo the parts of a failed supersession write that did apply, so none of it stays."""
        undo: list[dict[str, Any]] = []
        created, *updates = results
        alias = self._alias(memory)  # a supersession target is always of the memory's own type
        before = {t.memory.id: t.memory for t in targets}
        if ok(created):
            undo += rq.bulk_delete(alias, memory.id)
        for result in updates:
            if ok(result):
                version = (result["_seq_no"], result["_primary_term"])
                restored = docs.unsuperseded_doc(before[result["_id"]])
                undo += rq.bulk_update(alias, result["_id"], restored, version)
        if not undo:
            return
        try:
            undone = self._bulk(f"roll back write for user {memory.user_id}", undo)
        except AtlasError as exc:  # Cluster.call maps every failure to one
            undone, why = [], str(exc)
        else:
            why = "; ".join(reason(r) for r in undone if not ok(r))
        if not undone or not all(ok(r) for r in undone):
            log.error("elasticsearch_partial_write", memory_id=memory.id, user_id=memory.user_id, reason=why)
            raise BackendUnavailable(
                f"writing memory {memory.id!r} failed half-way and could not be rolled back ({why}); "
                f"check memory {memory.id!r} and the ids it supersedes ({', '.join(memory.supersedes)})"
            )

    def _write_catalog(self, memory: Memory) -> None:
        taken = self._writer_ids([memory.id], USER_MEMORY_TYPES)
        if taken:
            raise Conflict(f"id {memory.id!r} is taken by a user memory; give the catalog entry another id")
        ops = rq.bulk_index(self.layout.alias(MemoryType.CATALOG), memory.id, docs.to_source(memory))
        (result,) = self._bulk("catalog write", ops)
        if not ok(result):
            raise item_error(result, f"catalog entry {memory.id!r} was not written")

    def _writer_ids(self, ids: Sequence[str], kinds: Sequence[MemoryType]) -> list[str]:
        """Which of ``ids`` exist in ``kinds`` at all (an admin check, writer credential)."""
        body = {"size": len(ids), "query": {"ids": {"values": list(ids)}}, "_source": False}
        request = rq.SearchRequest(tuple(self.layout.aliases(tuple(kinds))), body)
        return [h["_id"] for h in self.reader.hits(None, "id check", request)]

    def touch(self, user_id: str, ids: Sequence[str], at: datetime) -> None:
        """Bump usage, best effort: a failure is logged, never a recall's failure.

        Conditional partial updates without a refresh (the next read is a real-time ``_mget``,
        so it sees them anyway); a lost race re-reads and retries, a rejected item (429) is
        retried after a short pause. The recall has its answer already, so each call is tried
        once (no ``Retry-After`` waits) and all pauses together stay under ``TOUCH_WAIT_S``.
        """
        try:
            self._touch(user_id, list(dict.fromkeys(ids)), at)
        except AtlasError as exc:
            log.warning(
                "elasticsearch_usage_not_saved", user_id=user_id, ids=list(ids), reason=str(exc)[:300]
            )

    def _touch(self, user_id: str, pending: list[str], at: datetime) -> None:
        waited = 0.0
        for attempt in range(STATS_ATTEMPTS):
            stored = self.reader.stored(
                user_id, pending, USAGE_TYPES, f"usage read for user {user_id}", retries=0
            )
            if not stored:
                return
            ops: list[dict[str, Any]] = []
            for s in stored:
                ops += rq.bulk_update(
                    self._alias(s.memory), s.memory.id, docs.used_doc(s.memory, at), s.version
                )
            results = self._bulk(f"usage update for user {user_id}", ops, refresh="false", retries=0)
            pending = [r["_id"] for r in results if conflict(r) or r.get("status") in REJECTED]
            failed = [r for r in results if not ok(r) and r["_id"] not in pending]
            if failed:
                log.warning(
                    "elasticsearch_usage_not_saved",
                    user_id=user_id,
                    reason=reason(failed[0]),
                    ids=[r["_id"] for r in failed],
                )
            if not pending:
                return
            if any(r.get("status") in REJECTED for r in results):
                if waited >= TOUCH_WAIT_S:
                    break
                waited += self.cluster.pause(attempt, at_most=TOUCH_WAIT_S - waited)
        log.warning("elasticsearch_usage_contended", user_id=user_id, ids=pending)

    def update(self, user_id: str, memory: Memory) -> None:
        found = self._stored(user_id, [memory.id], USER_MEMORY_TYPES, f"update read for user {user_id}")
        if not found or found[0].memory.user_id != user_id:
            raise Conflict(f"memory {memory.id!r} not found for this user")
        stored = found[0]
        doc = docs.changed_doc(stored.memory, memory)
        if not doc:
            return
        wanted = docs.to_source(memory)
        if rq.as_merged(docs.to_source(stored.memory), doc) == wanted:
            ops = rq.bulk_update(self._alias(memory), memory.id, doc, stored.version)
        else:  # the cluster deep-merges a partial doc: a removed (nested) key needs the whole document
            ops = rq.bulk_index(self._alias(memory), memory.id, wanted, stored.version)
        (result,) = self._bulk(f"update for user {user_id}", ops)
        if conflict(result):
            raise Conflict(f"memory {memory.id!r} changed while it was being updated; try again")
        if not ok(result):
            raise item_error(result, f"memory {memory.id!r} was not updated")

    def forget(self, user_id: str, memory_id: str) -> bool:
        found = self._stored(user_id, [memory_id], USER_MEMORY_TYPES, f"forget read for user {user_id}")
        if not found or found[0].memory.user_id != user_id:
            return False
        (result,) = self._bulk(
            f"forget for user {user_id}", rq.bulk_delete(self._alias(found[0].memory), memory_id)
        )
        if result.get("status") == 404 and result.get("result") == "not_found":
            return False
        if not ok(result):
            raise item_error(result, f"memory {memory_id!r} was not deleted")
        return True

    # -- reads -------------------------------------------------------------------------

    def get(self, user_id: str, ids: Sequence[str], *, include_catalog: bool = False) -> list[Memory]:
        kinds = ALL_TYPES if include_catalog else USER_MEMORY_TYPES
        return [s.memory for s in self._stored(user_id, ids, kinds, f"read for user {user_id}")]

    def list(self, query: ListQuery) -> list[Memory]:
        return self.listing.list(query)

    def scan(self, query: ListQuery) -> Iterator[Memory]:
        """Every memory ``query`` selects, from one point in time (``limit``/``offset`` aside)."""
        return self.listing.scan(query)

    def recall_request(self, plan: RecallPlan) -> rq.SearchRequest:
        return self.recall.request(plan)

    def candidates(self, plan: RecallPlan) -> builtins.list[Candidate]:
        found = self.recall.candidates(plan)
        if self.info.reranks_server_side != self.recall.reranks_server_side:  # the cluster refused it
            self.info = replace(self.info, reranks_server_side=self.recall.reranks_server_side)
        return found

    def cosines(self, plan: RecallPlan, text: str, ids: Sequence[str]) -> dict[str, float]:
        """Nothing measured: the cluster embeds and scores server-side, and a reworded query
        would be a second semantic search per recall (recall then reads the query as asked)."""
        return {}

    def likeness(self, plan: RecallPlan, texts: Sequence[str]) -> builtins.list[float] | None:
        """None: the cluster embeds the query, this process never sees its vector."""
        return None

    # -- bookkeeping and operator views (writer credential: not memory, no DLS key reads it) --

    def get_state(self, user_id: str, key: str) -> str | None:
        alias, doc_id = self.layout.state_alias, state_id(user_id, key)
        found = self.cluster.call(
            f"read state {key} of user {user_id}",
            lambda es: es.options(ignore_status=404).get(index=alias, id=doc_id),
        )
        source = found.get("_source") if found.get("found") else None
        return source.get("value") if source and source.get("user_id") == user_id else None

    def set_state(self, user_id: str, key: str, value: str | None) -> None:
        alias, doc_id = self.layout.state_alias, state_id(user_id, key)
        if value is None:
            ops = rq.bulk_delete(alias, doc_id)
        else:
            source = {"user_id": user_id, "key": key, "value": value, "updated_at": iso(self._clock())}
            ops = rq.bulk_index(alias, doc_id, source)
        (result,) = self._bulk(f"save state {key} of user {user_id}", ops)
        if not ok(result) and result.get("result") != "not_found":
            raise item_error(result, f"state {key!r} of user {user_id!r} was not saved")

    def record(self, entries: Sequence[AuditEntry]) -> None:
        if not entries:
            return
        # Not refreshed: the change it records was; ``audit`` readers are operators, and see an
        # entry within the state index's refresh interval (1 s by default).
        results = self._bulk(
            "append to the audit trail", audit_trail.operations(self.layout, entries), refresh="false"
        )
        failed = [r for r in results if not ok(r)]
        if failed:
            raise item_error(failed[0], "the audit trail was not written")

    def audit(self, query: AuditQuery) -> builtins.list[AuditEntry]:
        return audit_trail.read(self.cluster, self.layout, query)

    def stats(self) -> StoreStats:
        request = rq.stats_request(self.layout)
        response = self.cluster.call(
            "count memories", lambda es: es.search(index=list(request.indices), body=request.body)
        )
        counts = []
        for bucket in response["aggregations"]["types"]["buckets"]:
            kind = MemoryType(bucket["key"])
            if kind is MemoryType.CATALOG:
                counts.append(TypeCount(None, kind, bucket["doc_count"]))
                continue
            counts += [
                TypeCount(
                    u["key"], kind, u["doc_count"], u["superseded"]["doc_count"], u["expiring"]["doc_count"]
                )
                for u in bucket["users"]["buckets"]
            ]
        counts.sort(key=lambda c: (c.user_id is not None, c.user_id or "", c.memory_type.value))
        return StoreStats(tuple(counts), self._size_bytes(), self._location())

    def _size_bytes(self) -> int | None:
        names = [*self.layout.aliases(ALL_TYPES), self.layout.state_alias]
        try:
            found = self.cluster.call(
                "read index sizes", lambda es: es.indices.stats(index=names, metric="store")
            )
        except AtlasError:  # Serverless has no index stats; the size is optional
            return None
        size: int | None = found.get("_all", {}).get("total", {}).get("store", {}).get("size_in_bytes")
        return size

    def _location(self) -> str:
        config = self._config
        where = config.url.split("@")[-1] if config.url else f"cloud:{(config.cloud_id or '').split(':')[0]}"
        return f"{where} ({self.layout.prefix}-*)"

    def close(self) -> None:
        self.cluster.close()


def state_id(user_id: str, key: str) -> str:
    return f"{user_id}\u001f{key}"  # unit separator: neither a user id nor a key contains it


def _write_failure(memory: Memory, failed: list[dict[str, Any]]) -> Exception:
    if all(conflict(r) for r in failed):
        return changed_meanwhile([r.get("_id", "?") for r in failed])
    return item_error(failed[0], "memory was not written; nothing was changed")


def secrets_path(settings: Settings) -> Path:
    """Where ``users add`` keeps minted keys: ``[elasticsearch] secrets_file`` or the data dir."""
    return settings.elasticsearch.secrets_file or settings.data_dir / "es-keys.json"


def key_store(settings: Settings) -> KeyStore:
    configured = {uid: u.es_api_key for uid, u in settings.users.items() if u.es_api_key}
    return KeyStore(secrets_path(settings), configured)


def open_elasticsearch_engine(settings: Settings) -> ElasticsearchEngine:
    """The engine ``backend = "elasticsearch"`` selects."""
    from .transport import connect

    cluster = Cluster(connect(settings.elasticsearch), settings.elasticsearch)
    return ElasticsearchEngine(cluster, key_store(settings), settings.scoring)
