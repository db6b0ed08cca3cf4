"""What the configured inference endpoints are, as ``GET _inference`` tells it, kept per process.

The answer decides how scores are read (``scores``): the reranker's scale, the embedding's
vector similarity. A successful read is kept; a failed one stands for ``RETRY_S`` and is then
asked again, so a passing error does not pin the fallback for the life of the process. The
caller's key reads it (its ``monitor_inference``), else the writer. When neither may, atlas
says so once per retry period, with the fix: a key can do no more than the administrator who
minted it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ...errors import AtlasError
from ...log import get_logger
from .failures import Forbidden
from .scores import Endpoint, describe_endpoint
from .transport import Cluster

log = get_logger(__name__)
RETRY_S = 300.0  # how long a failed read stands before the endpoint is asked again


class Endpoints:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._known: dict[str, tuple[Endpoint | None, float]] = {}  # id -> (endpoint, retry at)

    def get(self, endpoint_id: str, client: Any) -> Endpoint | None:
        """The endpoint, or None while it cannot be read."""
        known, retry_at = self._known.get(endpoint_id, (None, 0.0))
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
            self._known[endpoint_id] = (endpoint, 0.0)
            return endpoint
        self._known[endpoint_id] = (None, time.monotonic() + RETRY_S)
        log.warning(
            "elasticsearch_endpoint_unreadable",
            endpoint=endpoint_id,
            consequence=(
                "rerank scores are read by their range; the embedding endpoint is taken as dense "
                "with cosine similarity"
            ),
            fix=_fix(failures),
            retry_in_s=RETRY_S,
            reason=str(failures[0])[:300],
        )
        return None

    def forget(self) -> None:
        self._known.clear()


def _fix(failures: Sequence[AtlasError]) -> str:
    if any(isinstance(f, Forbidden) for f in failures):
        return (
            "grant `monitor_inference` to the administrator that mints user keys (a key can do no "
            "more than its minter) and run `atlas-mcp users add <id>` again, or set "
            "[elasticsearch] rerank_score_scale"
        )
    return "check the endpoint with `atlas-mcp doctor`"
