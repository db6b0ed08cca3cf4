"""The multilingual scenario set: one household's memories in en, de, es, fr and ja, asked in
paraphrase, with product names inside the language, and across languages.

Each language is its own tenant in one store, so the English column is every scenario's twin:
the same facts and questions, measured in the same run. ``scenarios/multilingual.json`` says
how the set is built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..service import MemoryService
from .harness import ManualClock
from .metrics import Ranked, summarise

SCENARIOS = Path(__file__).parent / "scenarios" / "multilingual.json"
KS = (1, 3)
COLUMNS = ("R@1", "R@3", "MRR", "kept", "unknown")


@dataclass(frozen=True, slots=True)
class MultilingualResult:
    groups: dict[str, dict[str, float]]  # "<lang>" and "<lang> <kind>" → metrics
    failures: tuple[str, ...]


def _unknown_without_the_answer(
    service: MemoryService, clock: ManualClock, scenarios: dict[str, Any], language: str
) -> float:
    """Each question asked of a household that holds every memory but its answer: the share
    where nothing clears the relevance floor, i.e. recall says nothing stored is about it.
    With ``kept`` (the answer stored, on top and above the floor) it shows whether the floor
    means the same in every language."""
    unknown = []
    for number, question in enumerate(scenarios["questions"]):
        tenant = f"household-{language}-without-{number}"
        for position, text in enumerate(scenarios["memories"][language]):
            if position != question["gold"]:
                service.write(tenant, text, "semantic")
        clock()
        hits = service.recall(
            tenant, question[language], 1, include_catalog=False, touch=False, min_relevance=0.0
        )
        unknown.append(not service.likely(hits))
    return sum(unknown) / len(unknown)


def load(path: Path = SCENARIOS) -> dict[str, Any]:
    scenarios: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return scenarios


def run(
    service: MemoryService, clock: ManualClock, scenarios: dict[str, Any] | None = None
) -> MultilingualResult:
    scenarios = scenarios or load()
    results: list[Ranked] = []
    failures = []
    kept: dict[str, list[bool]] = {language: [] for language in scenarios["languages"]}
    for language in scenarios["languages"]:
        tenant = f"household-{language}"
        ids = [service.write(tenant, text, "semantic").id for text in scenarios["memories"][language]]
        clock()
        for question in scenarios["questions"]:
            # R@k measures the ranking (no floor); ``kept``: the top hit is right and clears the floor.
            hits = service.recall(
                tenant, question[language], max(KS), include_catalog=False, touch=False, min_relevance=0.0
            )
            gold = ids[question["gold"]]
            ranked = tuple(h.memory.id for h in hits)
            results.append(Ranked(f"{language} {question['kind']}", (gold,), ranked))
            kept[language].append(any(h.memory.id == gold for h in service.likely(hits[:1])))
            if ranked[:1] != (gold,):
                failures.append(
                    f"[{language}] {question[language]!r} → {hits[0].memory.text if hits else None!r}"
                )
    groups = {}
    for language in scenarios["languages"]:
        groups[language] = summarise([r for r in results if r.group.split()[0] == language], KS)
        groups[language]["kept"] = sum(kept[language]) / len(kept[language])
        groups[language]["unknown"] = _unknown_without_the_answer(service, clock, scenarios, language)
        for kind in sorted({q["kind"] for q in scenarios["questions"]}):
            group = f"{language} {kind}"
            groups[group] = summarise([r for r in results if r.group == group], KS)
    return MultilingualResult(groups, tuple(failures))
