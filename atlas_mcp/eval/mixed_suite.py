"""The mixed suite: recall on the memory agents really keep, not on one benchmark's shape.

Two users (``scenarios/mixed.json``), each on top of the same 162 background memories
(``scenarios/mixed_background.json``): short facts and long notes, events old and new,
near-duplicates that differ by one number or name, playbooks with track records, chit-chat
turns and a shared catalog. The clock is the suite's fixed ``now``, so "last weekend" always
means the same days.

Each question is asked twice, as the service's defaults would serve an agent:

- *ranking*: ``min_relevance=0`` and no use recorded, for Hit@1, Hit@5 and MRR; a question
  breaks (scores as a miss) if a ``forbid``den memory or type shows, or its first expected
  memory does not outrank those it ``outranks``;
- *as an agent*: the defaults (relevance floor, use recorded), for ``kept`` (the answer is
  still among the first 5 returned) and, for no-answer questions and small talk, ``empty``
  (nothing cleared the floor).

Between questions the agent makes small talk (recalled as it would be on every turn). After
the last question every question is ranked, each user makes 200 more small-talk recalls, and
every question is ranked again: ``drift`` counts questions whose top 5 changed (use counts
must be earned, and small talk earns nothing).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..domain.calibration import Features
from ..domain.ranking import Hit
from ..service import MemoryService
from .harness import ManualClock
from .metrics import Ranked, hit_at, reciprocal_rank
from .scenario_suite import broken_rule, questions, write

SCENARIOS = Path(__file__).parent / "scenarios"
MIXED = SCENARIOS / "mixed.json"
BACKGROUND = SCENARIOS / "mixed_background.json"
RANK_K = 20
KEPT_DEPTH = 5
SMALL_TALK_BETWEEN = 3  # small-talk recalls before each question
SMALL_TALK_AFTER = 200
NO_ANSWER = "no-answer"
SMALL_TALK = "small-talk"


@dataclass(frozen=True, slots=True)
class Answer:
    """One question's outcome."""

    user: str
    kind: str
    query: str
    expect: tuple[str, ...]
    ranked: tuple[str, ...]  # keys, best first, no floor
    relevance: tuple[float, ...]  # of ``ranked``
    returned: tuple[str, ...]  # keys served with the defaults that clear the relevance floor
    broken: str | None = None  # the rule it broke, if any
    features: tuple[Features, ...] = ()  # of ``ranked``: what calibration refits from
    scores: tuple[float, ...] = ()  # of ``ranked``: the final (ordering) score

    def lead(self, key: str, other: str) -> float:
        """How many times ``other``'s score ``key`` scores (both must be ranked)."""
        return self.scores[self.ranked.index(key)] / self.scores[self.ranked.index(other)]

    def standing(self) -> str:
        """Where the first expected memory stands against the first result, and why: its rank,
        its score as a share of the first's, both cosines and its relevance (what a miss is
        diagnosed from: a weak cosine, or words a false friend shares)."""
        key = self.expect[0]
        if key not in self.ranked:
            return f"{key} not in the top {len(self.ranked)}"
        at = self.ranked.index(key)
        share = (
            f"score {self.scores[at] / self.scores[0]:.2f} of the first's, "
            if self.scores and self.scores[0]
            else ""
        )
        cosines = (
            f"cosine {self.features[at].cosine:.2f} (first {self.features[0].cosine:.2f}), "
            if self.features
            else ""
        )
        return f"{key} at #{at + 1}: {share}{cosines}relevance {self.relevance[at]:.3f}"

    @property
    def answerable(self) -> bool:
        return bool(self.expect)

    @property
    def hit(self) -> tuple[str, ...]:
        """The ranking metrics read: a broken rule counts as a miss."""
        return () if self.broken else self.ranked

    @property
    def kept(self) -> bool:
        return not self.broken and bool(set(self.expect) & set(self.returned[:KEPT_DEPTH]))


@dataclass(frozen=True, slots=True)
class MixedResult:
    answers: tuple[Answer, ...]
    small_talk_empty: float  # share of small-talk recalls that returned nothing above the floor
    small_talk_recalls: int
    drift: tuple[str, ...]  # questions whose top 5 changed after the small-talk run
    playbook_before: tuple[Answer, ...]  # playbook questions asked before their outcomes

    def groups(self) -> dict[str, dict[str, float]]:
        return summarise(self.answers)


def load(path: Path = MIXED, background: Path = BACKGROUND) -> dict[str, Any]:
    suite: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    suite["background"] = json.loads(Path(background).read_text(encoding="utf-8"))["memories"]
    return suite


def background_days_ago(position: int) -> int:
    """Spread over 14 months, never in the last 18 days (the time questions' windows)."""
    return 20 + (37 * position) % 430


def populate(
    service: MemoryService, clock: ManualClock, suite: dict[str, Any], now: datetime
) -> dict[str, str]:
    """Load the catalog, then write every user's memories oldest first; returns id → key."""
    clock.set(now)
    service.load_catalog(
        [{"id": e["key"]} | {k: v for k, v in e.items() if k != "key"} for e in suite["catalog"]]
    )
    keys = {e["key"]: e["key"] for e in suite["catalog"]}
    pending = []
    for user, tenant in suite["tenants"].items():
        for position, entry in enumerate(suite["background"]):
            pending.append(
                (user, {"key": f"bg-{position}", "days_ago": background_days_ago(position)} | entry)
            )
        pending += [(user, entry) for entry in tenant["memories"]]
    ids: dict[str, dict[str, str]] = {user: {} for user in suite["tenants"]}
    for user, entry in sorted(pending, key=lambda p: -p[1].get("days_ago", 0)):
        clock.set(now - timedelta(days=entry.get("days_ago", 0)))
        memory_id = write(service, user, entry, ids[user])
        ids[user][entry["key"]] = memory_id
        keys[memory_id] = entry["key"]
    return keys


def run(service: MemoryService, clock: ManualClock, suite: dict[str, Any] | None = None) -> MixedResult:
    suite = suite or load()
    now = datetime.fromisoformat(suite["now"])
    keys = populate(service, clock, suite, now)
    ids = {user: {k: i for i, k in keys.items()} for user in suite["tenants"]}
    asker = _Asker(service, clock, now, keys)
    answers, before = [], []
    for user, question in questions(suite):
        asker.small_talk(user, suite["small_talk"], SMALL_TALK_BETWEEN)
        if question.get("outcomes"):
            before.append(asker.ask(user, question, record_use=False))
            for report in question["outcomes"]:
                _report_outcome(service, clock, now, user, report, ids[user])
        answers.append(asker.ask(user, question))
    settled = [asker.ask(user, question, record_use=False) for user, question in questions(suite)]
    for user in suite["tenants"]:
        asker.small_talk(user, suite["small_talk"], SMALL_TALK_AFTER)
    drift = []
    for first, (user, question) in zip(settled, questions(suite), strict=True):
        again = asker.ask(user, question, record_use=False)
        if question["expect"] and again.ranked[:KEPT_DEPTH] != first.ranked[:KEPT_DEPTH]:
            drift.append(f"{user}: {question['query']!r}")
    empty = asker.small_talk_empty / asker.small_talk_recalls if asker.small_talk_recalls else 0.0
    return MixedResult(tuple(answers), empty, asker.small_talk_recalls, tuple(drift), tuple(before))


class _Asker:
    """Asks as one user would through ``recall_memory``, and keeps the small-talk tally."""

    def __init__(self, service: MemoryService, clock: ManualClock, now: datetime, keys: dict[str, str]):
        self.service, self.clock, self.now, self.keys = service, clock, now, keys
        self.small_talk_recalls = 0
        self.small_talk_empty = 0

    def ask(self, user: str, question: dict[str, Any], record_use: bool = True) -> Answer:
        self.clock.set(self.now)
        options = {
            "memory_types": question.get("memory_types"),
            "include_superseded": question.get("include_superseded", False),
        }
        ranking = self.service.recall(
            user, question["query"], RANK_K, min_relevance=0.0, touch=False, **options
        )
        served = self.service.recall(user, question["query"], RANK_K, touch=record_use, **options)
        ranked = tuple(self.keys.get(h.memory.id, h.memory.id) for h in ranking)
        return Answer(
            user=user,
            kind=question["kind"],
            query=question["query"],
            expect=tuple(question["expect"]),
            ranked=ranked,
            relevance=tuple(h.relevance for h in ranking),
            returned=tuple(self.keys.get(h.memory.id, h.memory.id) for h in self.service.likely(served)),
            broken=_broken_rule(question, ranked, [h.memory.memory_type.value for h in ranking]),
            features=ranking_features(ranking),
            scores=tuple(h.score for h in ranking),
        )

    def small_talk(self, user: str, lines: Sequence[str], count: int) -> None:
        for i in range(count):
            self.clock.set(self.now)
            served = self.service.recall(user, lines[(self.small_talk_recalls + i) % len(lines)], RANK_K)
            self.small_talk_empty += not self.service.likely(served)
        self.small_talk_recalls += count


def _report_outcome(
    service: MemoryService,
    clock: ManualClock,
    now: datetime,
    user: str,
    report: dict[str, Any],
    ids: dict[str, str],
) -> None:
    """The agent tells memory how a playbook went: an event, linked to the playbook."""
    clock.set(now - timedelta(hours=1))
    service.write(
        user, report["text"], "episodic", playbook_id=ids[report["playbook"]], outcome=report["outcome"]
    )


def _broken_rule(question: dict[str, Any], ranked: tuple[str, ...], types: list[str]) -> str | None:
    wrong = sorted(set(types) & set(question.get("forbid_types", [])))
    if wrong:
        return f"type {wrong} returned"
    return broken_rule(question, ranked) if question["expect"] else None


def summarise(answers: Iterable[Answer]) -> dict[str, dict[str, float]]:
    """Per kind and overall: ranking metrics for answerable kinds, ``empty`` for no-answer."""
    answers = list(answers)
    kinds = sorted({a.kind for a in answers}, key=lambda k: (k == NO_ANSWER, k))
    rows = {"answerable": _row([a for a in answers if a.answerable])}
    rows |= {kind: _row([a for a in answers if a.kind == kind]) for kind in kinds}
    return rows


def _row(answers: Sequence[Answer]) -> dict[str, float]:
    n = len(answers)
    if not n:
        return {"n": 0}
    if not answers[0].answerable:
        return {"n": n, "empty": sum(not a.returned for a in answers) / n}
    rankings = [Ranked(a.kind, a.expect, a.hit) for a in answers]
    return {
        "n": n,
        "Hit@1": sum(hit_at(r.gold, r.ranked, 1) for r in rankings) / n,
        "Hit@5": sum(hit_at(r.gold, r.ranked, 5) for r in rankings) / n,
        "MRR": sum(reciprocal_rank(r.gold, r.ranked) for r in rankings) / n,
        "kept": sum(a.kept for a in answers) / n,
    }


def table(result: MixedResult) -> str:
    lines = ["| group | n | Hit@1 | Hit@5 | MRR | kept at the floor | empty at the floor |", "|" + "---|" * 7]
    for name, row in result.groups().items():
        cells = [f"{row[c]:.3f}" if c in row else "" for c in ("Hit@1", "Hit@5", "MRR", "kept", "empty")]
        lines.append(f"| {name} | {int(row['n'])} | " + " | ".join(cells) + " |")
    lines.append(
        f"| {SMALL_TALK} | {result.small_talk_recalls} |  |  |  |  | {result.small_talk_empty:.3f} |"
    )
    return "\n".join(lines)


def misses(result: MixedResult) -> list[str]:
    """One line per question that missed, broke a rule, or (no-answer) returned something."""
    out = []
    for a in result.answers:
        if a.answerable and (a.broken or not set(a.expect) & set(a.ranked[:KEPT_DEPTH])):
            out.append(
                f"miss {a.user}: {a.query!r} → {list(a.ranked[:KEPT_DEPTH])} {a.broken or ''}; {a.standing()}"
            )
        elif a.answerable and not a.kept:
            out.append(
                f"floored {a.user}: {a.query!r} → returned {list(a.returned[:KEPT_DEPTH])}; {a.standing()}"
            )
        elif not a.answerable and a.returned:
            out.append(f"not empty {a.user}: {a.query!r} → {list(a.returned[:3])} ({a.relevance[0]:.2f})")
    return out


def ablation_table(
    full: dict[str, dict[str, float]], variants: dict[str, dict[str, dict[str, float]]]
) -> str:
    """Answerable Hit@1 / Hit@5 / kept and no-answer empty: the full system, then each ablation."""

    def cells(groups: dict[str, dict[str, float]]) -> list[float]:
        answerable, empty = groups["answerable"], groups.get(NO_ANSWER, {})
        return [
            answerable["Hit@1"],
            answerable["Hit@5"],
            answerable["kept"],
            empty.get("empty", float("nan")),
        ]

    base = cells(full)
    lines = ["| switched off | Hit@1 | Hit@5 | kept | no-answer empty |", "|---|---|---|---|---|"]
    lines.append("| nothing (full) | " + " | ".join(f"{v:.3f}" for v in base) + " |")
    for name, groups in variants.items():
        lines.append(
            f"| {name} | "
            + " | ".join(f"{v - b:+.3f}" for v, b in zip(cells(groups), base, strict=True))
            + " |"
        )
    return "\n".join(lines)


def ranking_features(hits: Iterable[Hit]) -> tuple[Features, ...]:
    """What calibrated each hit's relevance, in rank order (recall computes it for every hit)."""
    found = []
    for hit in hits:
        if hit.explanation.features is None:
            raise ValueError(f"memory {hit.memory.id} was ranked without calibration features")
        found.append(hit.explanation.features)
    return tuple(found)
