"""R@k, Hit@k and MRR on hand-computed cases."""

from __future__ import annotations

import pytest

from atlas_mcp.eval.metrics import Ranked, by_group, hit_at, recall_at, reciprocal_rank, summarise


def test_recall_hit_and_reciprocal_rank():
    ranked = ["a", "x", "b", "y", "c"]
    assert recall_at(["a", "b", "c", "d"], ranked, 3) == 0.5
    assert hit_at(["d", "b"], ranked, 2) == 0.0
    assert hit_at(["d", "b"], ranked, 3) == 1.0
    assert reciprocal_rank(["b", "c"], ranked) == pytest.approx(1 / 3)
    assert reciprocal_rank(["z"], ranked) == 0.0


def test_groups_pool_their_members_and_average_per_question():
    results = [
        Ranked("single", ("a",), ("a", "b")),
        Ranked("multi", ("a", "b"), ("a", "z")),
        Ranked("adv", ("q",), ("z",)),
    ]
    groups = by_group(results, (1, 2), {"answerable": ("single", "multi"), "adv": ("adv",)})
    assert groups["answerable"]["n"] == 2
    assert groups["answerable"]["R@1"] == pytest.approx((1.0 + 0.5) / 2)
    assert groups["answerable"]["Hit@2"] == 1.0
    assert groups["adv"]["R@2"] == 0.0
    assert summarise([], (5,))["R@5"] == 0.0
