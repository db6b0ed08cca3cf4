"""ElasticsearchEngine: the ``Engine`` protocol over a cluster, with cluster-enforced isolation.

Reads run with the caller's DLS API key, so the cluster itself hides other users' memories;
the code-level ``user_id`` filter in every body is defence in depth. Writes, supersession and
usage statistics go through the server's writer credential, which stamps ``user_id`` from the
caller's identity; before it changes an existing memory, the engine proves ownership by
reading that memory with the caller's key (real-time ``_mget``, so no refresh is needed) and
pins the version it read, so a concurrent change fails instead of being overwritten.

Recall either lets the cluster rerank (one search; the scores are read on the endpoint's
scale) or, without a rerank endpoint, fetches the two branches and fuses them exactly as the
embedded engine does, so the service's own rerank ranks both engines alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ...config import ElasticsearchSettings, Settings
from ...domain.fusion import candidates_from_fused, reciprocal_rank_fusion
from ...domain.model import Memory, MemoryType, iso, utcnow
from ...domain.scoring import ScoringPolicy
from ...domain.supersession import changed_meanwhile
from ...errors import AtlasError, BackendUnavailable, Conflict
from ...log import get_logger
from ..base import Candidate, Engine, EngineInfo, ListQuery, RecallPlan, StoreStats, TypeCount
from . import documents as docs
from . import requests as rq
from .failures import Forbidden, configuration_problem, innermost
from .keys import KeyStore
from .layout import ALL_TYPES, IndexLayout
from .scores import Endpoint, describe_endpoint, rerank_relevance
from .transport import REJECTED, Cluster

log = get_logger(__name__)
ENDPOINT_RETRY_S = 300.0  # how long a failed GET _inference stands before it is asked again
STATS_ATTEMPTS = 3  # rounds of read-then-conditional-update when recalls race on use_count
TRACKED = (MemoryType.SEMANTIC, MemoryType.PROCEDURAL)  # the types whose use is counted


@dataclass(frozen=True, slots=True)
class Stored:
    """A memory as read, with the version it was read at."""

    memory: Memory
    version: tuple[int, int] | None


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
        # GET _inference per endpoint: (what it is, or None until when a failed read is not retried)
        self._endpoints: dict[str, tuple[Endpoint | None, float]] = {}
        self.info = EngineInfo(
            name="elasticsearch",
            reranks_server_side=self.inference.rerank_id is not None,
            embedding_model=config.embedding_inference_id,
        )

    # -- plumbing ----------------------------------------------------------------------

    def _client(self, user_id: str | None) -> Any:
        """``user_id``'s DLS key (``None``: the writer, for the shared catalog only)."""
        return None if user_id is None else self.cluster.as_user(self.keys.key_for(user_id))

    def _search_as(self, user_id: str | None, what: str, request: rq.SearchRequest) -> list[dict[str, Any]]:
        return list(self._search_response(self._client(user_id), what, request)["hits"]["hits"])

    def _search_response(self, client: Any, what: str, request: rq.SearchRequest) -> dict[str, Any]:
        indices = list(request.indices) or None  # none: the point in time names them
        return self.cluster.call(what, lambda es: es.search(index=indices, body=request.body), client=client)

    def _bulk(
        self, what: str, operations: list[dict[str, Any]], *, refresh: str | None = None
    ) -> list[dict[str, Any]]:
        """Run a bulk request as the writer; one result per action, in order (never a user key)."""
        flag = refresh or self._config.refresh
        response = self.cluster.call(
            what, lambda es: es.bulk(operations=operations, refresh=flag), idempotent=False
        )
        return [next(iter(item.values())) for item in response["items"]]

    def _stored(
        self, user_id: str | None, ids: Sequence[str], kinds: Sequence[MemoryType], what: str
    ) -> list[Stored]:
        """The caller's memories among ``ids``, read in real time with their versions."""
        if not ids:
            return []
        body = rq.mget_body(self.layout, ids, kinds)
        found = self.cluster.call(what, lambda es: es.mget(docs=body["docs"]), client=self._client(user_id))
        stored = [self._from_hit(d, user_id) for d in found["docs"] if d.get("found")]
        by_id = {s.memory.id: s for s in stored if s is not None}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    def _from_hit(self, hit: dict[str, Any], user_id: str | None) -> Stored | None:
        memory = docs.from_source(hit["_id"], hit["_source"])
        if memory.user_id not in (user_id, None):  # the DLS key should make this impossible
            log.error("elasticsearch_isolation_breach", index=hit.get("_index"), id=hit["_id"])
            return None
        version = (hit["_seq_no"], hit["_primary_term"]) if "_seq_no" in hit else None
        return Stored(memory, version)

    def _alias(self, memory: Memory) -> str:
        return self.layout.alias(memory.memory_type)

    # -- writes ------------------------------------------------------------------------

    def write(self, memory: Memory, *, supersede: Sequence[str] = ()) -> None:
        if memory.is_catalog:
            self._write_catalog(memory)
            return
        targets = self._supersede_targets(memory, supersede)
        ops = rq.bulk_create(self.layout.alias(memory.memory_type), memory.id, docs.to_source(memory))
        for target in targets:
            ops += rq.bulk_update(
                self._alias(target.memory),
                target.memory.id,
                docs.superseded_doc(memory.id, memory.created_at),
                target.version,
            )
        results = self._bulk(f"write for user {memory.user_id}", ops)
        failed = [r for r in results if not _ok(r)]
        if failed:
            self._roll_back(memory, results)
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

    def _roll_back(self, memory: Memory, results: list[dict[str, Any]]) -> None:
        """Undo the parts of a failed supersession write that did apply, so none of it stays."""
        undo: list[dict[str, Any]] = []
        created, *updates = results
        alias = self._alias(memory)  # a supersession target is always of the memory's own type
        if _ok(created):
            undo += rq.bulk_delete(alias, memory.id)
        for result in updates:
            if _ok(result):
                version = (result["_seq_no"], result["_primary_term"])
                undo += rq.bulk_update(alias, result["_id"], docs.unsuperseded_doc(), version)
        if not undo:
            return
        try:
            undone = self._bulk(f"roll back write for user {memory.user_id}", undo)
        except AtlasError as exc:  # Cluster.call maps every failure to one
            undone, reason = [], str(exc)
        else:
            reason = "; ".join(_reason(r) for r in undone if not _ok(r))
        if not undone or not all(_ok(r) for r in undone):
            log.error(
                "elasticsearch_partial_write", memory_id=memory.id, user_id=memory.user_id, reason=reason
            )
            raise BackendUnavailable(
                f"writing memory {memory.id!r} failed half-way and could not be rolled back ({reason}); "
                f"check memory {memory.id!r} and the ids it supersedes ({', '.join(memory.supersedes)})"
            )

    def _write_catalog(self, memory: Memory) -> None:
        taken = self._writer_ids([memory.id], [k for k in ALL_TYPES if k is not MemoryType.CATALOG])
        if taken:
            raise Conflict(f"id {memory.id!r} is taken by a user memory; give the catalog entry another id")
        ops = rq.bulk_index(self.layout.alias(MemoryType.CATALOG), memory.id, docs.to_source(memory))
        (result,) = self._bulk("catalog write", ops)
        if not _ok(result):
            raise _item_error(result, f"catalog entry {memory.id!r} was not written")

    def _writer_ids(self, ids: Sequence[str], kinds: Sequence[MemoryType]) -> list[str]:
        """Which of ``ids`` exist in ``kinds`` at all (an admin check, writer credential)."""
        body = {"size": len(ids), "query": {"ids": {"values": list(ids)}}, "_source": False}
        request = rq.SearchRequest(tuple(self.layout.aliases(tuple(kinds))), body)
        return [h["_id"] for h in self._search_as(None, "id check", request)]

    def touch(self, user_id: str, ids: Sequence[str], at: datetime) -> None:
        """Bump usage, best effort: a failure is logged, never a recall's failure.

        Conditional partial updates without a refresh (the next read is a real-time ``_mget``,
        so it sees them anyway); a lost race re-reads and retries, a rejected item (429) is
        retried after a backoff.
        """
        try:
            self._touch(user_id, list(dict.fromkeys(ids)), at)
        except AtlasError as exc:
            log.warning(
                "elasticsearch_usage_not_saved", user_id=user_id, ids=list(ids), reason=str(exc)[:300]
            )

    def _touch(self, user_id: str, pending: list[str], at: datetime) -> None:
        for attempt in range(STATS_ATTEMPTS):
            stored = self._stored(user_id, pending, TRACKED, f"usage read for user {user_id}")
            if not stored:
                return
            ops: list[dict[str, Any]] = []
            for s in stored:
                ops += rq.bulk_update(
                    self._alias(s.memory), s.memory.id, docs.used_doc(s.memory, at), s.version
                )
            results = self._bulk(f"usage update for user {user_id}", ops, refresh="false")
            pending = [r["_id"] for r in results if _conflict(r) or r.get("status") in REJECTED]
            failed = [r for r in results if not _ok(r) and r["_id"] not in pending]
            if failed:
                log.warning(
                    "elasticsearch_usage_not_saved",
                    user_id=user_id,
                    reason=_reason(failed[0]),
                    ids=[r["_id"] for r in failed],
                )
            if not pending:
                return
            if any(r.get("status") in REJECTED for r in results):
                self.cluster.pause(attempt)
        log.warning("elasticsearch_usage_contended", user_id=user_id, ids=pending)

    def update(self, user_id: str, memory: Memory) -> None:
        found = self._stored(user_id, [memory.id], rq.USER_TYPES, f"update read for user {user_id}")
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
        if _conflict(result):
            raise Conflict(f"memory {memory.id!r} changed while it was being updated; try again")
        if not _ok(result):
            raise _item_error(result, f"memory {memory.id!r} was not updated")

    def forget(self, user_id: str, memory_id: str) -> bool:
        found = self._stored(user_id, [memory_id], rq.USER_TYPES, f"forget read for user {user_id}")
        if not found or found[0].memory.user_id != user_id:
            return False
        (result,) = self._bulk(
            f"forget for user {user_id}", rq.bulk_delete(self._alias(found[0].memory), memory_id)
        )
        if result.get("status") == 404 and result.get("result") == "not_found":
            return False
        if not _ok(result):
            raise _item_error(result, f"memory {memory_id!r} was not deleted")
        return True

    # -- reads -------------------------------------------------------------------------

    def get(self, user_id: str, ids: Sequence[str], *, include_catalog: bool = False) -> list[Memory]:
        kinds = ALL_TYPES if include_catalog else rq.USER_TYPES
        return [s.memory for s in self._stored(user_id, ids, kinds, f"read for user {user_id}")]

    def list(self, query: ListQuery) -> list[Memory]:
        user_id, wanted = query.user_id, query.memory_types
        if user_id is None:
            kinds: Sequence[MemoryType] = [MemoryType.CATALOG]
        else:
            kinds = [k for k in rq.USER_TYPES if wanted is None or k in wanted]
        if not kinds or query.limit <= 0:
            return []
        return self._listed(
            user_id,
            kinds,
            query.include_superseded,
            query.limit,
            query.offset,
            query.since,
            query.oldest_first,
        )

    def _listed(
        self,
        user_id: str | None,
        kinds: Sequence[MemoryType],
        include_superseded: bool,
        limit: int,
        offset: int,
        since: datetime | None,
        oldest_first: bool,
    ) -> list[Memory]:
        """Page through a point in time with ``search_after``: any depth, no result window."""
        client, what = self._client(user_id), f"list for user {user_id or 'catalog'}"
        aliases = self.layout.aliases(tuple(kinds))
        opened = self.cluster.call(
            f"{what} (open a point in time)",
            lambda es: es.open_point_in_time(index=aliases, keep_alive=rq.PIT_KEEP_ALIVE),
            client=client,
        )
        pit_id, after, skip, out = opened["id"], None, offset, []
        try:
            while len(out) < limit:
                size = min(rq.LIST_PAGE, skip + limit - len(out))
                request = rq.list_page_request(
                    pit_id, user_id, include_superseded, size, since, oldest_first, after
                )
                response = self._search_response(client, what, request)
                hits = response["hits"]["hits"]
                pit_id = response.get("pit_id", pit_id)
                out += [s.memory for h in hits[skip:] if (s := self._from_hit(h, user_id)) is not None]
                skip = max(skip - len(hits), 0)
                if len(hits) < size:
                    break
                after = hits[-1]["sort"]
        finally:
            self._close_pit(client, pit_id)
        return out[:limit]

    def _close_pit(self, client: Any, pit_id: str) -> None:
        try:  # it expires by itself after keep_alive; closing early frees the cluster's resources
            self.cluster.call(
                "close a point in time", lambda es: es.close_point_in_time(id=pit_id), client=client
            )
        except AtlasError:
            log.warning("elasticsearch_pit_not_closed")

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
        if not _ok(result) and result.get("result") != "not_found":
            raise _item_error(result, f"state {key!r} of user {user_id!r} was not saved")

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
                TypeCount(u["key"], kind, u["doc_count"], u["superseded"]["doc_count"])
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
        return found.get("_all", {}).get("total", {}).get("store", {}).get("size_in_bytes")

    def _location(self) -> str:
        config = self._config
        where = config.url.split("@")[-1] if config.url else f"cloud:{(config.cloud_id or '').split(':')[0]}"
        return f"{where} ({self.layout.prefix}-*)"

    def recall_request(self, plan: RecallPlan) -> rq.SearchRequest:
        return rq.recall_request(plan, self.layout, self.policy, self.inference, self._clock())

    def candidates(self, plan: RecallPlan) -> list[Candidate]:
        client = self._client(plan.user_id)
        if self.inference.rerank_id is None:
            return self._fused(plan, client)
        request = self.recall_request(plan)
        hits = self._search_response(client, f"recall for user {plan.user_id}", request)["hits"]["hits"]
        kept = [(h, s) for h in hits if (s := self._from_hit(h, plan.user_id))]
        scores = [float(h.get("_score") or 0.0) for h, _ in kept]
        relevance = rerank_relevance(scores, self._rerank_scale(client))
        return [
            Candidate(s.memory, rrf_score=None, rerank_score=r, engine_score=score)
            for (_, s), score, r in zip(kept, scores, relevance, strict=True)
        ]

    def _fused(self, plan: RecallPlan, client: Any) -> list[Candidate]:
        """Both branches in one ``_msearch``, fused by ``domain.fusion`` as the embedded engine does."""
        requests = rq.branch_requests(plan, self.layout)
        searches: list[dict[str, Any]] = []
        for request in requests:
            searches += [{"index": list(request.indices)}, request.body]
        found = self.cluster.call(
            f"recall for user {plan.user_id}", lambda es: es.msearch(searches=searches), client=client
        )
        lexical, dense = (self._branch_hits(r, plan.user_id) for r in found["responses"])
        fused = reciprocal_rank_fusion([list(lexical), list(dense)], plan.rank_constant, plan.window)
        memories = {i: m for branch in (lexical, dense) for i, (m, _) in branch.items()}
        similarity = self._similarity(client)
        return candidates_from_fused(
            fused,
            memories,
            {i: s for i, (_, s) in lexical.items()},
            {i: similarity(s) for i, (_, s) in dense.items()},
        )

    def cosines(self, plan: RecallPlan, text: str, ids: Sequence[str]) -> dict[str, float]:
        """Nothing measured: the cluster embeds and scores server-side, and a reworded query
        would be a second semantic search per recall (recall then reads the query as asked)."""
        return {}

    def _branch_hits(self, response: dict[str, Any], user_id: str) -> dict[str, tuple[Memory, float]]:
        """One branch's hits, best first: id → (memory, score)."""
        if "error" in response:
            raise BackendUnavailable(
                f"a recall branch failed: {response['error'].get('reason', response['error'])}"
            )
        out: dict[str, tuple[Memory, float]] = {}
        for hit in response["hits"]["hits"]:
            stored = self._from_hit(hit, user_id)
            if stored is not None:
                out.setdefault(stored.memory.id, (stored.memory, float(hit.get("_score") or 0.0)))
        return out

    def _endpoint(self, endpoint_id: str, client: Any) -> Endpoint | None:
        """What the endpoint is (service, model, task, similarity): read once it is read, asked
        again ``ENDPOINT_RETRY_S`` after a failure (a passing error must not pin the fallback).
        The user's key reads it (its ``monitor_inference``), else the writer."""
        known, retry_at = self._endpoints.get(endpoint_id, (None, 0.0))
        if known is not None or time.monotonic() < retry_at:
            return known
        failures: list[AtlasError] = []
        for credential in (client, None):
            try:
                found = self.cluster.call(
                    f"read inference endpoint {endpoint_id}",
                    lambda es: es.inference.get(inference_id=endpoint_id),
                    client=credential,
                    retries=0,
                )
            except AtlasError as exc:
                failures.append(exc)
                continue
            endpoint = describe_endpoint(found)
            self._endpoints[endpoint_id] = (endpoint, 0.0)
            return endpoint
        self._endpoints[endpoint_id] = (None, time.monotonic() + ENDPOINT_RETRY_S)
        log.warning(
            "elasticsearch_endpoint_unreadable",
            endpoint=endpoint_id,
            consequence="rerank scores are read by their range; the embedding endpoint is taken as dense with cosine similarity",
            fix=_endpoint_fix(failures),
            retry_in_s=ENDPOINT_RETRY_S,
            reason=str(failures[0])[:300],
        )
        return None

    def _rerank_scale(self, client: Any) -> str:
        """``[elasticsearch] rerank_score_scale``, or (``auto``) what the endpoint's service returns."""
        if self._config.rerank_score_scale != "auto":
            return self._config.rerank_score_scale
        endpoint = self._endpoint(self.inference.rerank_id or "", client)
        return endpoint.rerank_scale if endpoint is not None else "probability"

    def _similarity(self, client: Any) -> Callable[[float], float]:
        """A dense ``semantic`` score as the cosine the embedded engine reports, by the endpoint's
        vector similarity; a sparse endpoint's score (a weighted term overlap) as it is."""
        endpoint = self._endpoint(self.inference.embedding_id, client)
        return (endpoint or Endpoint("text_embedding", "?", "?")).cosine()

    def close(self) -> None:
        self.cluster.close()


def state_id(user_id: str, key: str) -> str:
    return f"{user_id}\u001f{key}"  # unit separator: neither a user id nor a key contains it


def _ok(result: dict[str, Any]) -> bool:
    return 200 <= int(result.get("status", 500)) < 300


def _conflict(result: dict[str, Any]) -> bool:
    return result.get("status") == 409


def _reason(result: dict[str, Any]) -> str:
    kind, reason = innermost(result.get("error"))
    return f"{result.get('status')} {kind}: {reason}".strip()


def _write_failure(memory: Memory, failed: list[dict[str, Any]]) -> Exception:
    if all(_conflict(r) for r in failed):
        return changed_meanwhile([r.get("_id", "?") for r in failed])
    return _item_error(failed[0], "memory was not written; nothing was changed")


def _item_error(result: dict[str, Any], what: str) -> AtlasError:
    """A failed bulk item as an atlas error: a configuration fix when a cause names one
    (missing indices, old indices, a licence), else the cluster's reason."""
    problem = configuration_problem(result.get("error"), "this change")
    if problem is not None:
        return type(problem)(f"{what}: {problem}")
    return BackendUnavailable(f"{what} ({_reason(result)})")


def _endpoint_fix(failures: Sequence[AtlasError]) -> str:
    if any(isinstance(f, Forbidden) for f in failures):
        return (
            "grant `monitor_inference` to the administrator that mints user keys (a key can do no "
            "more than its minter) and run `atlas-mcp users add <id>` again, or set "
            "[elasticsearch] rerank_score_scale"
        )
    return "check the endpoint with `atlas-mcp doctor`"


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
