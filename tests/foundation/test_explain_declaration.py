"""One explain declaration: every surface that shows a recall's breakdown reads the labelled
fields of ``Multipliers`` and ``Explanation``, so a new factor cannot be left out of one."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime

from atlas_mcp.cli.recall import EXPLAIN_HEADERS
from atlas_mcp.domain.explain import declared
from atlas_mcp.domain.multipliers import FACTORS, Multipliers
from atlas_mcp.domain.ranking import COLUMNS, FORMULA, Explanation
from atlas_mcp.mcp.results import ExplainOut, MultipliersOut
from atlas_mcp.views import explanation_view

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _explanation(**factors: float) -> Explanation:
    return Explanation(
        bm25_rank=1, dense_rank=None, rrf_score=0.03, dense_similarity=0.7, match=0.9, reranker="context",
        multipliers=Multipliers(decay_reference=T0, **factors), score=0.9 * math.prod(factors.values()),
    )  # fmt: skip


def test_every_factor_is_in_the_product_the_formula_and_every_table():
    labels = {f.name: s.label for f, s in declared(Multipliers)}
    distinct = {name: 1.0 + 0.1 * (position + 1) for position, name in enumerate(FACTORS)}
    assert Multipliers(**distinct).product == math.prod(distinct.values())
    for name in FACTORS:
        assert f"× {labels[name]}" in FORMULA
        assert labels[name] in EXPLAIN_HEADERS
        assert ("multipliers", name) in [c.path for c in COLUMNS]
        assert name in MultipliersOut.model_fields
    assert {"decay", "use_boost", "catalog_prior", "track_record", "time_fit"} <= set(FACTORS)


def test_the_view_and_the_result_model_carry_the_same_fields():
    why = _explanation(decay=0.5, time_fit=0.25)
    view = explanation_view(why)
    assert ExplainOut.model_validate(view).model_dump(exclude_unset=True) == view
    rare = {f.name for f, s in declared(Explanation) if s.only_when_set}
    assert rare == {"embedding_pending", "copies"}
    assert set(view) == set(ExplainOut.model_fields) - rare
    assert view["multipliers"]["decay_reference"] == T0.isoformat()
    assert view["relevance"] == view["match"] == 0.9  # the match's earlier name, still emitted
    product = math.prod(view["multipliers"][name] for name in FACTORS)
    assert view["score"] == round(view["match"] * product, 6)
    assert "features" not in view  # kept for calibration, not shown
    pending = explanation_view(dataclasses.replace(why, embedding_pending=True))
    assert pending["embedding_pending"] is True and "embedding_pending" not in view
    folded = explanation_view(dataclasses.replace(why, copies=("m2", "m3")))
    assert ExplainOut.model_validate(folded).model_dump(mode="json", exclude_unset=True)["copies"] == [
        "m2",
        "m3",
    ]
