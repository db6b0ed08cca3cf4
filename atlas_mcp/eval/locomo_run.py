"""The LoCoMo retrieval protocol, run against the real service (``reference/locomo.md``).

Tenant = conversation. Each turn is written as one episodic memory through
``MemoryService.write`` — the path ``write_memory`` takes — in order, with ``occurred_at`` =
its session's date-time and the clock at that moment, so ``created_at`` follows the
conversation. Questions are then asked verbatim as that tenant through
``MemoryService.recall``, with the clock just after the last session: the agent is asked right
after the conversation, as it would be in use.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..service import MemoryService
from .harness import ManualClock
from .locomo import ANSWERABLE, CATEGORIES, Conversation
from .metrics import Ranked, by_group

ASKED_AFTER_LAST_SESSION = timedelta(days=1)
GROUPS: dict[str, tuple[str, ...]] = {
    **{CATEGORIES[c]: (CATEGORIES[c],) for c in (4, 1, 2, 3)},
    "answerable (1-4)": tuple(CATEGORIES[c] for c in ANSWERABLE),
    "adversarial (5)": (CATEGORIES[5],),
}


@dataclass(frozen=True, slots=True)
class LocomoResult:
    ks: tuple[int, ...]
    groups: dict[str, dict[str, float]]
    questions: tuple[Ranked, ...]
    ingest_seconds: float
    recall_latencies_ms: tuple[float, ...]
    dia_ids: dict[str, dict[str, str]]  # tenant → memory id → dia_id
    floored: tuple[Ranked, ...] = ()  # the same rankings with the default relevance floor applied


def ingest(service: MemoryService, clock: ManualClock, conversation: Conversation) -> dict[str, str]:
    """Write every turn as the conversation's tenant; returns memory id → dia_id."""
    ids, session = {}, None
    for turn in conversation.turns:
        if turn.session != session:  # a session starts at its date-time; its turns tick on
            session = turn.session
            clock.set(turn.occurred_at)
        written = service.write(conversation.sample_id, turn.text, "episodic", occurred_at=turn.occurred_at)
        ids[written.id] = turn.dia_id
    return ids


def ask(
    service: MemoryService,
    clock: ManualClock,
    conversation: Conversation,
    ids: dict[str, str],
    k: int,
    latencies_ms: list[float] | None = None,
    floored: list[Ranked] | None = None,
) -> list[Ranked]:
    """Every question of the conversation, verbatim, as its tenant; top-k mapped to dia_ids.

    R@k measures the ranking, so nothing is held back (``min_relevance=0``); ``floored``, if
    given, receives the same rankings cut at the default relevance floor.
    """
    clock.set(max(t.occurred_at for t in conversation.turns) + ASKED_AFTER_LAST_SESSION)
    out = []
    for question in conversation.questions:
        started = time.perf_counter()
        # touch=False: asking must not change what is measured (use counts, last use).
        hits = service.recall(conversation.sample_id, question.text, k, min_relevance=0.0, touch=False)
        if latencies_ms is not None:
            latencies_ms.append((time.perf_counter() - started) * 1000)
        ranked = tuple(ids.get(h.memory.id, "?") for h in hits)
        out.append(Ranked(CATEGORIES[question.category], question.evidence, ranked))
        if floored is not None:
            kept = tuple(ids.get(h.memory.id, "?") for h in service.likely(hits))
            floored.append(Ranked(CATEGORIES[question.category], question.evidence, kept))
    return out


def run(
    service: MemoryService,
    clock: ManualClock,
    conversations: Sequence[Conversation],
    ks: Sequence[int] = (5, 10),
    progress: Callable[[int], None] = lambda _: None,
) -> LocomoResult:
    """Ingest every conversation, then ask every question; ``progress`` is told each step.

    All tenants are in the store before the first question, as in real use: BM25 statistics
    are store-wide, and every ablation rescored on the same store then sees the same state.
    """
    questions: list[Ranked] = []
    floored: list[Ranked] = []
    latencies: list[float] = []
    dia_ids: dict[str, dict[str, str]] = {}
    started = time.perf_counter()
    for conversation in conversations:
        dia_ids[conversation.sample_id] = ingest(service, clock, conversation)
        progress(len(conversation.turns))
    ingest_seconds = time.perf_counter() - started
    for conversation in conversations:
        questions += ask(
            service, clock, conversation, dia_ids[conversation.sample_id], max(ks), latencies, floored
        )
        progress(len(conversation.questions))
    groups = by_group(questions, ks, GROUPS)
    return LocomoResult(
        tuple(ks), groups, tuple(questions), ingest_seconds, tuple(latencies), dia_ids, tuple(floored)
    )


def floor_line(result: LocomoResult, floor: float) -> str:
    """How many answerable questions keep an answer in their top 5 if the floor is a filter."""
    answerable = GROUPS["answerable (1-4)"]
    before = by_group(result.questions, (5,), {"a": answerable})["a"]["Hit@5"]
    after = by_group(result.floored, (5,), {"a": answerable})["a"]["Hit@5"]
    adversarial = [q for q in result.floored if q.group == CATEGORIES[5]]
    empty = sum(not q.ranked for q in adversarial) / len(adversarial) if adversarial else float("nan")
    return (
        f"with the relevance floor ({floor}) as a filter: answerable Hit@5 {after:.3f} (ranking alone {before:.3f}); "
        f"adversarial questions left empty {empty:.3f}"
    )


def rescore(
    service: MemoryService,
    clock: ManualClock,
    conversations: Sequence[Conversation],
    ingested: LocomoResult,
    ks: Sequence[int],
) -> dict[str, dict[str, float]]:
    """Ask again with another service over the store ``ingested`` filled; grouped metrics."""
    questions = [
        q for c in conversations for q in ask(service, clock, c, ingested.dia_ids[c.sample_id], max(ks))
    ]
    return by_group(questions, ks, GROUPS)


def ablation_table(full: LocomoResult, variants: dict[str, dict[str, Any]], ks: Sequence[int]) -> str:
    """R@k per category: the full system, then each ablation's value and its change."""
    k = max(ks)
    head = ["variant", *full.groups]
    lines = [
        f"R@{k} with one technique switched off",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines.append("| full | " + " | ".join(f"{g[f'R@{k}']:.3f}" for g in full.groups.values()) + " |")
    for name, groups in variants.items():
        cells = [
            f"{groups[g][f'R@{k}']:.3f} ({groups[g][f'R@{k}'] - full.groups[g][f'R@{k}']:+.3f})"
            for g in full.groups
        ]
        lines.append(f"| −{name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def to_json(result: LocomoResult, variants: dict[str, dict[str, Any]], ablated: list[str]) -> dict[str, Any]:
    latencies = sorted(result.recall_latencies_ms)
    return {
        "protocol": "LoCoMo turn-level retrieval (docs/quality.md)",
        "ablated": ablated,
        "ks": list(result.ks),
        "groups": result.groups,
        "ablations": variants,
        "ingest_seconds": round(result.ingest_seconds, 2),
        "recall_ms": {"p50": latencies[len(latencies) // 2], "p95": latencies[int(0.95 * len(latencies))]}
        if latencies
        else {},
        "questions": [
            {"category": q.group, "gold": list(q.gold), "ranked": list(q.ranked)} for q in result.questions
        ],
    }
