"""Reading an Elasticsearch error wherever in its tree the cluster put the cause.

A failure is rarely where the top of the error says: a compound retriever (``rrf``,
``text_similarity_reranker``) answers ``status_exception: [rrf] search failed - retrievers
'[standard]' returned errors`` with each child's error under ``suppressed``; a search whose
every shard failed is ``search_phase_execution_exception: all shards failed`` with the shard's
error under ``root_cause``/``failed_shards``; a document the mapping refuses has the reason under
``caused_by``. What to tell the user (a missing endpoint, a licence, old indices) is found by
looking at every cause, so the hint survives the wrapping.
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import AtlasError, ConfigurationError

MAX_CAUSES = 32  # real trees nest two or three levels; this only guards against a cyclic one
# Errors that only say "something below failed": the message quotes what is below instead.
WRAPPERS = frozenset({"status_exception", "search_phase_execution_exception", "exception"})
SUPPORTED_MAJOR = 9
# elastic/elasticsearch#128328: these releases run the reranker's inference as the searching
# user, which no read-only key may (fixed by #128327 and its backports, #128330 for 9.0).
RERANK_REFUSED_RELEASES = frozenset({"8.18.0", "8.18.1", "9.0.0", "9.0.1"})
OUTDATED_HINT = (
    "the atlas indices were made by an older atlas-mcp; stop the servers and run "
    "`atlas-mcp bootstrap --migrate`"
)
_LICENCE = re.compile(r"current license is non-compliant for \[([^\]]+)\]")
_UNMAPPED_SORT = re.compile(r"No mapping found for \[[^\]]+\] in order to sort on")
# elastic/elasticsearch#128328: on 8.18.0-8.18.1 and 9.0.0-9.0.1 the reranker calls this
# internal action as the searching user, which no read-only key may run.
_INTERNAL_INFERENCE = "cluster:internal/xpack/inference"


class Unauthenticated(ConfigurationError):
    """401: the cluster does not accept the credential (wrong, expired or invalidated)."""


class Forbidden(ConfigurationError):
    """403: the credential lacks a privilege the request needs."""


class RerankRefused(ConfigurationError):
    """The cluster refuses the reranker to a read-only key (a server bug, not a missing grant)."""


def causes(error: Any) -> list[dict[str, Any]]:
    """Every error object in the tree, outermost first."""
    out: list[dict[str, Any]] = []
    pending = [error]
    while pending and len(out) < MAX_CAUSES:
        node = pending.pop(0)
        if not isinstance(node, dict):
            continue
        out.append(node)
        pending += list(node.get("suppressed") or [])
        pending += [node.get("caused_by")]
        pending += list(node.get("root_cause") or [])
        pending += [
            shard.get("reason") for shard in node.get("failed_shards") or [] if isinstance(shard, dict)
        ]
    return out


def innermost(error: Any) -> tuple[str, str]:
    """(type, reason) of the most specific cause: the first one that is not a mere wrapper."""
    found = causes(error)
    if not found:
        return "", str(error or "")
    specific = [c for c in found if c.get("type") not in WRAPPERS] or found
    deepest = specific[0]
    return str(deepest.get("type") or ""), str(deepest.get("reason") or "")


def configuration_problem(error: Any, what: str) -> AtlasError | None:
    """The configuration fix this error calls for, if any cause names one (else None)."""
    found = causes(error)
    reasons = [str(c.get("reason") or "") for c in found]
    kinds = {str(c.get("type") or "") for c in found}
    for reason in reasons:
        if licence := _LICENCE.search(reason):
            return ConfigurationError(_licence_message(licence.group(1), what))
    for cause in found:
        reason = str(cause.get("reason") or "")
        if "inference" in reason.lower() and (
            "not found" in reason.lower() or cause.get("type") == "resource_not_found_exception"
        ):
            return ConfigurationError(
                f"inference endpoint missing: {reason}. Create it, or set [elasticsearch] "
                "embedding_inference_id / rerank_inference_id to an endpoint `GET _inference/_all` lists."
            )
    if any(_INTERNAL_INFERENCE in r for r in reasons):
        return RerankRefused(
            f"the cluster refuses the reranker to read-only keys while it runs {what} "
            "(elastic/elasticsearch#128328, Elasticsearch 8.18.0-8.18.1 and 9.0.0-9.0.1): upgrade to "
            '9.0.2 or later, or set [elasticsearch] rerank_inference_id = "" (atlas then reranks itself)'
        )
    if any(_UNMAPPED_SORT.search(r) for r in reasons) or "strict_dynamic_mapping_exception" in kinds:
        return ConfigurationError(f"{OUTDATED_HINT} ({what}: {innermost(error)[1][:200]})")
    if "index_not_found_exception" in kinds:
        return ConfigurationError(
            f"the atlas indices are missing ({innermost(error)[1]}); run `atlas-mcp bootstrap`"
        )
    if "media_type_header_exception" in kinds:
        return ConfigurationError(
            f"the cluster is not Elasticsearch {SUPPORTED_MAJOR}.x ({innermost(error)[1]}); atlas-mcp "
            f"needs a {SUPPORTED_MAJOR}.x cluster"
        )
    return None


def _licence_message(feature: str, what: str) -> str:
    if feature == "inference":
        return (
            f"the cluster's licence does not cover inference (needed for {what}): semantic_text "
            "ingest and the semantic query call the inference API, which needs Enterprise (or a trial) "
            "unless the endpoint is an Elastic Inference Service one (service `elastic`). Run `atlas-mcp doctor`."
        )
    return (
        f"the cluster's licence does not cover {feature} (needed for {what}); RRF, the reranker and "
        "inference need Enterprise (or a trial), DLS needs Platinum. Run `atlas-mcp doctor`."
    )
