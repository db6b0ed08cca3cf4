"""Recall on the cluster: the candidates for a ``RecallPlan``, read with the caller's key.

With a rerank endpoint, one search (``requests.recall_request``) lets the cluster fuse and
rerank; the reranker's scores are read on the endpoint's scale (``scores``). Without one (or on
a release that refuses the reranker to read-only keys, elastic/elasticsearch#128328), the
BM25 and dense branches go out in one ``_msearch`` and are fused by ``domain.fusion`` exactly as
the embedded engine fuses its own, so the service's own rerank ranks both engines alike. A
branch the cluster rejected (429, 503) is asked again alone after a pause; a branch answered by
only some shards is no answer (``reads``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from ...config_tables import ElasticsearchSettings
from ...domain.fusion import candidates_from_fused, reciprocal_rank_fusion
from ...domain.model import Memory
from ...domain.scoring import ScoringPolicy
from ...errors import AtlasError, BackendUnavailable
from ...log import get_logger
from ..base import Candidate, RecallPlan
from . import requests as rq
from .endpoints import Endpoints
from .failures import RerankRefused, configuration_problem, innermost
from .reads import Reader, from_hit, incomplete, partial
from .scores import Endpoint, rerank_relevance
from .transport import REJECTED

log = get_logger(__name__)
Branch = dict[str, tuple[Memory, float]]  # id -> (memory, score), best first


class Recall:
    def __init__(
        self,
        reader: Reader,
        policy: ScoringPolicy,
        inference: rq.Inference,
        clock: Callable[[], datetime],
    ) -> None:
        self.reader = reader
        self.cluster = reader.cluster
        self.config: ElasticsearchSettings = reader.cluster.config
        self.policy = policy
        self.inference = inference
        self.clock = clock
        self.endpoints = Endpoints(reader.cluster)
        # The cluster refused the reranker to a read-only key (elastic/elasticsearch#128328):
        # from then on recall fuses the branches and atlas reranks.
        self._rerank_refused = False

    def request(self, plan: RecallPlan) -> rq.SearchRequest:
        return rq.recall_request(plan, self.reader.layout, self.policy, self.inference, self.clock())

    @property
    def reranks_server_side(self) -> bool:
        return self.inference.rerank_id is not None and not self._rerank_refused

    def candidates(self, plan: RecallPlan) -> list[Candidate]:
        client = self.reader.client(plan.user_id)
        if not self.reranks_server_side or not plan.dense:
            return self._fused(plan, client)
        try:
            return self._reranked(plan, client)
        except RerankRefused as refused:  # 8.18.0-8.18.1, 9.0.0-9.0.1: fuse and let atlas rerank
            self._rerank_refused = True
            log.warning(
                "elasticsearch_rerank_refused",
                consequence="recall fuses the branches itself and atlas reranks, for the life of the process",
                fix='upgrade Elasticsearch to 9.0.2 or later, or set [elasticsearch] rerank_inference_id = ""',
                reason=str(refused)[:300],
            )
            return self._fused(plan, client)

    def _reranked(self, plan: RecallPlan, client: Any) -> list[Candidate]:
        what = f"recall for user {plan.user_id}"
        hits = self.reader.search(client, what, self.request(plan))["hits"]["hits"]
        kept = [(h, s) for h in hits if (s := from_hit(h, plan.user_id))]
        scores = [float(h.get("_score") or 0.0) for h, _ in kept]
        relevance = rerank_relevance(scores, self.rerank_scale(client))
        return [
            Candidate(s.memory, rrf_score=None, rerank_score=r, engine_score=score)
            for (_, s), score, r in zip(kept, scores, relevance, strict=True)
        ]

    def _fused(self, plan: RecallPlan, client: Any) -> list[Candidate]:
        """Both branches in one ``_msearch``, fused by ``domain.fusion`` as the embedded engine does."""
        what = f"recall for user {plan.user_id}"
        responses = self._branches(client, what, rq.branch_requests(plan, self.reader.layout))
        # a lexical-only plan (``dense=False``, a write's look for what it repeats) has one branch
        lexical, dense = [*(self._branch_hits(r, plan.user_id, what) for r in responses), {}][:2]
        fused = reciprocal_rank_fusion([list(lexical), list(dense)], plan.rank_constant, plan.window)
        memories = {i: m for branch in (lexical, dense) for i, (m, _) in branch.items()}
        similarity = self.similarity(client)
        return candidates_from_fused(
            fused,
            memories,
            {i: s for i, (_, s) in lexical.items()},
            {i: similarity(s) for i, (_, s) in dense.items()},
        )

    def _branches(self, client: Any, what: str, requests: list[rq.SearchRequest]) -> list[dict[str, Any]]:
        """One response per request; a rejected or partial branch is asked again, alone."""
        responses: list[dict[str, Any]] = [{} for _ in requests]
        pending = list(range(len(requests)))
        budget = self.config.max_retries
        for attempt in range(budget + 1):
            searches: list[dict[str, Any]] = []
            for i in pending:
                searches += [{"index": list(requests[i].indices)}, requests[i].body]
            found = self.cluster.call(what, lambda es, s=searches: es.msearch(searches=s), client=client)
            again = []
            for i, response in zip(pending, found["responses"], strict=True):
                responses[i] = response
                if _retriable(response):
                    again.append(i)
            if not again or attempt == budget:
                break
            self.cluster.pause(attempt)
            pending = again
        return responses

    def _branch_hits(self, response: dict[str, Any], user_id: str, what: str) -> Branch:
        """One branch's hits, best first: id -> (memory, score)."""
        if "error" in response:
            raise _branch_error(response, what)
        gap = partial(response)
        if gap is not None:
            raise incomplete(what, gap)
        out: Branch = {}
        for hit in response["hits"]["hits"]:
            stored = from_hit(hit, user_id)
            if stored is not None:
                out.setdefault(stored.memory.id, (stored.memory, float(hit.get("_score") or 0.0)))
        return out

    def rerank_scale(self, client: Any) -> str:
        """``[elasticsearch] rerank_score_scale``, or (``auto``) what the endpoint's service returns."""
        if self.config.rerank_score_scale != "auto":
            return self.config.rerank_score_scale
        endpoint = self.endpoints.get(self.inference.rerank_id or "", client)
        return endpoint.rerank_scale if endpoint is not None else "probability"

    def similarity(self, client: Any) -> Callable[[float], float]:
        """A dense ``semantic`` score as the cosine the embedded engine reports, by the endpoint's
        vector similarity; a sparse endpoint's score (a weighted term overlap) as it is."""
        endpoint = self.endpoints.get(self.inference.embedding_id, client)
        return (endpoint or Endpoint("text_embedding", "?", "?")).cosine()


def _retriable(response: dict[str, Any]) -> bool:
    """A branch the cluster did not answer (429, 503) or answered only in part."""
    if "error" in response:
        return response.get("status") in REJECTED
    return partial(response) is not None


def _branch_error(response: dict[str, Any], what: str) -> AtlasError:
    problem = configuration_problem(response["error"], what)
    if problem is not None:
        return problem
    kind, reason = innermost(response["error"])
    if response.get("status") in REJECTED:
        return BackendUnavailable(
            f"Elasticsearch is overloaded ({response['status']}) and refused {what}; try again shortly"
        )
    return BackendUnavailable(
        f"Elasticsearch {what} failed ({response.get('status')} {kind}: {reason[:300]})"
    )
