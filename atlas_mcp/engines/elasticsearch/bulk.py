"""Bulk writes as the writer credential, item by item.

A bulk request can succeed while some of its items fail. An item the cluster rejected (429 or
503: a full write queue, a shard not ready) was not applied, so it is sent again after a pause,
alone with the other rejected ones and with the same conditions (``if_seq_no``), up to
``[elasticsearch] max_retries`` times; what still fails is returned for the caller to undo or
report. The results come back one per item, in the order the items were given.
"""

from __future__ import annotations

from typing import Any

from ...errors import AtlasError, BackendUnavailable
from .failures import configuration_problem, innermost
from .transport import REJECTED, Cluster

Item = list[dict[str, Any]]  # an action line and, except for a delete, its body


def items(operations: list[dict[str, Any]]) -> list[Item]:
    """The flat operation list split into items (a delete has no body line)."""
    out: list[Item] = []
    for line in operations:
        if _is_action(line):
            out.append([line])
        else:
            out[-1].append(line)
    return out


def _is_action(line: dict[str, Any]) -> bool:
    if len(line) != 1:
        return False
    ((op, meta),) = line.items()
    return op in ("create", "index", "update", "delete") and isinstance(meta, dict) and "_index" in meta


def bulk(
    cluster: Cluster,
    what: str,
    operations: list[dict[str, Any]],
    *,
    refresh: str,
    retries: int | None = None,
) -> list[dict[str, Any]]:
    """Run ``operations``; one result per item. Rejected items are retried ``retries`` times
    (default ``[elasticsearch] max_retries``; ``0``: the caller handles rejections itself)."""
    pending = items(operations)
    results: list[dict[str, Any] | None] = [None] * len(pending)
    order = list(range(len(pending)))
    budget = cluster.config.max_retries if retries is None else retries
    for attempt in range(budget + 1):
        lines = [line for i in order for line in pending[i]]
        response = cluster.call(
            what, lambda es, ops=lines: es.bulk(operations=ops, refresh=refresh), idempotent=False
        )
        rejected = []
        for i, item in zip(order, response["items"], strict=True):
            results[i] = result = next(iter(item.values()))
            if result.get("status") in REJECTED:
                rejected.append(i)
        if not rejected or attempt == budget:
            break
        cluster.pause(attempt)
        order = rejected
    return [r for r in results if r is not None]


def ok(result: dict[str, Any]) -> bool:
    return 200 <= int(result.get("status", 500)) < 300


def conflict(result: dict[str, Any]) -> bool:
    return result.get("status") == 409


def reason(result: dict[str, Any]) -> str:
    kind, why = innermost(result.get("error"))
    return f"{result.get('status')} {kind}: {why}".strip()


def item_error(result: dict[str, Any], what: str) -> AtlasError:
    """A failed item as an atlas error: a configuration fix when a cause names one (missing
    indices, old indices, a licence), else the cluster's reason."""
    problem = configuration_problem(result.get("error"), "this change")
    if problem is not None:
        return type(problem)(f"{what}: {problem}")
    return BackendUnavailable(f"{what} ({reason(result)})")
