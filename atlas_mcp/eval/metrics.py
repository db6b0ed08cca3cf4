"""Retrieval metrics over ranked id lists: R@k, Hit@k, MRR, grouped and averaged."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def recall_at(gold: Iterable[str], ranked: Sequence[str], k: int) -> float:
    """|gold ∩ top-k| / |gold|."""
    wanted = set(gold)
    return len(wanted.intersection(ranked[:k])) / len(wanted) if wanted else 0.0


def hit_at(gold: Iterable[str], ranked: Sequence[str], k: int) -> float:
    return 1.0 if set(gold).intersection(ranked[:k]) else 0.0


def reciprocal_rank(gold: Iterable[str], ranked: Sequence[str]) -> float:
    wanted = set(gold)
    return next((1.0 / rank for rank, i in enumerate(ranked, start=1) if i in wanted), 0.0)


@dataclass(frozen=True, slots=True)
class Ranked:
    """One question's outcome: its group, its gold ids and what recall returned, best first."""

    group: str
    gold: tuple[str, ...]
    ranked: tuple[str, ...]


def summarise(results: Sequence[Ranked], ks: Sequence[int]) -> dict[str, float]:
    """Macro averages over ``results``: n, R@k and Hit@k for each k, and MRR."""
    n = len(results)
    out: dict[str, float] = {"n": n}
    for k in ks:
        out[f"R@{k}"] = sum(recall_at(r.gold, r.ranked, k) for r in results) / n if n else 0.0
        out[f"Hit@{k}"] = sum(hit_at(r.gold, r.ranked, k) for r in results) / n if n else 0.0
    out["MRR"] = sum(reciprocal_rank(r.gold, r.ranked) for r in results) / n if n else 0.0
    return out


def by_group(
    results: Sequence[Ranked], ks: Sequence[int], groups: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    """``groups`` maps a row name to the result groups it pools, e.g. answerable → 4 categories."""
    return {
        name: summarise([r for r in results if r.group in members], ks) for name, members in groups.items()
    }


def table(rows: dict[str, dict[str, float]], columns: Sequence[str]) -> str:
    """A Markdown table: one row per group, n first, then ``columns`` to three decimals ("—"
    where a group does not measure that column)."""
    head = ["group", "n", *columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in rows.items():
        cells = [name, str(int(row["n"])), *(f"{row[c]:.3f}" if c in row else "—" for c in columns)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
