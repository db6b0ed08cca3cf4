"""The multipliers as a Painless script: with a rerank endpoint, each retrieval branch scores
its candidates with them (``function_score``), so the reranker's window is chosen under the
same priors that order the results after it (``domain.multipliers``, applied by the service).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...domain.multipliers import SECONDS_PER_DAY
from ...domain.scoring import ScoringPolicy
from .layout import ALL_TYPES, IndexLayout

MS_PER_DAY = SECONDS_PER_DAY * 1000.0

# Mirrors ``domain.multipliers.multipliers``: decay (events on occurred_at, facts on last_used_at
# else created_at), use boost (facts, playbooks), track record (playbooks), catalog prior.
# They choose which fused candidates reach the reranker's window: without them, memories
# decayed to a fraction of their match would take window places from recent ones that the
# multipliers, applied after the reranker, put above them.
# Every doc[...] is guarded: a multi-index search sees fields unmapped in some indices.
# ``dated`` is its own flag: epoch millis are negative before 1970, so no value can mean "none".
PRIORS_SCRIPT = """
String index = doc['_index'].value;
boolean episodic = index.startsWith(params.episodic);
boolean semantic = index.startsWith(params.semantic);
boolean procedural = index.startsWith(params.procedural);
boolean dated = false;
long ref = 0L;
if (episodic && doc.containsKey('occurred_at') && doc['occurred_at'].size() > 0) {
  ref = doc['occurred_at'].value.toInstant().toEpochMilli();
  dated = true;
} else if (semantic && doc.containsKey('last_used_at') && doc['last_used_at'].size() > 0) {
  ref = doc['last_used_at'].value.toInstant().toEpochMilli();
  dated = true;
} else if ((episodic || semantic) && doc.containsKey('created_at') && doc['created_at'].size() > 0) {
  ref = doc['created_at'].value.toInstant().toEpochMilli();
  dated = true;
}
double factor = 1.0;
if (dated) {
  double effective = (double) (params.now_ms - ref) - params.decay_offset_ms;
  if (effective > 0.0) {
    double sigmaSq = params.decay_scale_ms * params.decay_scale_ms / (2.0 * Math.log(1.0 / params.decay_value));
    factor *= Math.exp(-(effective * effective) / (2.0 * sigmaSq));
  }
}
if (semantic || procedural) {
  long uses = 0L;
  if (doc.containsKey('use_count') && doc['use_count'].size() > 0) { uses = doc['use_count'].value; }
  factor *= 1.0 + params.use_count_weight * (1.0 - Math.exp(-Math.max(uses, 0L) / params.use_saturation));
}
if (procedural) {
  long wins = 0L;
  long losses = 0L;
  if (doc.containsKey('success_count') && doc['success_count'].size() > 0) { wins = doc['success_count'].value; }
  if (doc.containsKey('failure_count') && doc['failure_count'].size() > 0) { losses = doc['failure_count'].value; }
  double rate = (wins + params.track_record_prior / 2.0) / (wins + losses + params.track_record_prior);
  factor *= 1.0 + params.track_record_weight * (2.0 * rate - 1.0);
}
if (index.startsWith(params.catalog)) { factor *= params.catalog_prior; }
return factor;
""".strip()


# Each factor of ``domain.multipliers.Multipliers``: the script parameters that compute it, or
# why a per-document script cannot (a test fails until every factor is one or the other).
PRIORS_FACTORS: dict[str, tuple[str, ...]] = {
    "decay": ("decay_offset_ms", "decay_scale_ms", "decay_value", "now_ms"),
    "use_boost": ("use_count_weight", "use_saturation"),
    "catalog_prior": ("catalog_prior",),
    "track_record": ("track_record_prior", "track_record_weight"),
}
PRIORS_LEAVE_OUT: dict[str, str] = {
    "time_fit": "a period counts only when some candidate falls in it, and 'most recent' compares "
    "the best matches: both read the whole pool, so they apply after the reranker only",
}


def priors_params(layout: IndexLayout, scoring: ScoringPolicy, now: datetime) -> dict[str, Any]:
    """The script's inputs: every constant from the one ``ScoringPolicy``."""
    policy = scoring.multipliers
    return {
        "now_ms": int(now.timestamp() * 1000),
        "decay_offset_ms": policy.decay_offset_days * MS_PER_DAY,
        "decay_scale_ms": policy.decay_scale_days * MS_PER_DAY,
        "decay_value": policy.decay_value,
        "use_count_weight": policy.use_count_weight,
        "use_saturation": policy.use_saturation,
        "catalog_prior": policy.catalog_prior,
        "track_record_prior": policy.track_record_prior,
        "track_record_weight": policy.track_record_weight,
        **{kind.value: layout.stem(kind) for kind in ALL_TYPES},
    }
