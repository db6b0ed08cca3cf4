"""Calibrate the duplicate threshold for an embedding model.

    python -m atlas_mcp.consolidation.calibrate PAIRS.jsonl [--config FILE]

PAIRS.jsonl holds ``{"a": fact, "b": fact, "duplicate": true|false}`` per line; use
paraphrases as duplicates and contradictions / related-but-distinct facts as the rest. The
report lists, per threshold, how many duplicates the guard catches and how many distinct
pairs it would wrongly merge; pick the lowest threshold with no wrong merge and set it as
``[consolidation] duplicate_similarity`` (or add it to ``CALIBRATED_DUPLICATE_SIMILARITY``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from .. import jsonl
from .guards import is_duplicate


@dataclass(frozen=True, slots=True)
class Pair:
    a: str
    b: str
    duplicate: bool


@dataclass(frozen=True, slots=True)
class Row:
    threshold: float
    caught: int  # duplicates recognised
    wrong: int  # distinct pairs taken for duplicates


def read_pairs(path: Path) -> list[Pair]:
    return [Pair(**pair) for _, pair in jsonl.objects(path)]


def sweep(
    pairs: Sequence[Pair], cosine: Callable[[str, str], float], thresholds: Sequence[float]
) -> list[Row]:
    scored = [(p, cosine(p.a, p.b)) for p in pairs]
    rows = []
    for t in thresholds:
        verdicts = [(p.duplicate, is_duplicate(p.b, p.a, s, t)) for p, s in scored]
        rows.append(Row(t, sum(d and v for d, v in verdicts), sum(v and not d for d, v in verdicts)))
    return rows


def lowest_safe(rows: Sequence[Row]) -> Row | None:
    return next((r for r in sorted(rows, key=lambda r: r.threshold) if r.wrong == 0), None)


def default_thresholds() -> list[float]:
    return [round(0.70 + 0.01 * i, 2) for i in range(30)]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        click.echo(__doc__, err=True)
        return 2
    from ..config import load_settings
    from ..domain.similarity import on_reference_scale
    from ..inference.embedder import embed_one, open_models

    config = args[args.index("--config") + 1] if "--config" in args else None
    settings = load_settings(config)
    models = open_models(settings.embedding.model, settings.embedding.threads)

    def cosine(new: str, old: str) -> float:
        """As recall reports it: in the stored text's space, on MiniLM's scale."""
        embedder = models.embedder(models.model_for(old))
        raw = embed_one(embedder, new) @ embed_one(embedder, old)
        return float(on_reference_scale(raw, embedder.cosine_background))

    pairs = read_pairs(Path(args[0]))
    rows = sweep(pairs, cosine, default_thresholds())
    total = sum(p.duplicate for p in pairs)
    click.echo(f"model {models.choice_id}: {total} duplicate pairs, {len(pairs) - total} distinct pairs")
    for row in rows:
        click.echo(f"  {row.threshold:.2f}  caught {row.caught:3d}/{total}  wrongly merged {row.wrong}")
    best = lowest_safe(rows)
    click.echo(f"lowest threshold with no wrong merge: {best.threshold:.2f}" if best else "no safe threshold")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
