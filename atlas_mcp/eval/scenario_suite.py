"""The multi-tenant scenario suite: three smart-home users, a shared catalog, known answers.

The data is ``scenarios/smart_home.json`` (readable, hand-written). Memories are written
through the service in time order (``days_ago`` sets the clock), supersessions and all; then
each question is asked as its user. A question passes on the memories it ``expect``s; it fails
outright if a ``forbid``den memory shows in the top 5 (a superseded fact leaking into current
answers) or if its first expected memory does not rank above those it ``outranks`` (decay).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..service import MemoryService
from .harness import ManualClock
from .metrics import Ranked, by_group

SMART_HOME = Path(__file__).parent / "scenarios" / "smart_home.json"
FORBID_DEPTH = 5
RECALL_K = 10
COLUMNS = ("R@1", "Hit@1", "R@5", "MRR")


@dataclass(frozen=True, slots=True)
class StoredMemory:
    key: str
    user_id: str | None  # None: a catalog entry
    id: str
    text: str
    paraphrase: str


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    groups: dict[str, dict[str, float]]
    questions: tuple[Ranked, ...]
    failures: tuple[str, ...]  # one line per question that missed or broke a rule


def load(path: Path = SMART_HOME) -> dict[str, Any]:
    with Path(path).open(encoding="utf-8") as fh:
        suite: dict[str, Any] = json.load(fh)
    return suite


def populate(
    service: MemoryService, clock: ManualClock, suite: dict[str, Any], now: datetime
) -> list[StoredMemory]:
    """Load the catalog and write every user's memories, oldest first."""
    clock.set(now)
    service.load_catalog([{"id": e["key"]} | _without(e, "key") for e in suite["catalog"]])
    stored = [StoredMemory(e["key"], None, e["key"], e["text"], e["title"]) for e in suite["catalog"]]
    ids: dict[str, str] = {}
    pending = [(user, m) for user, tenant in suite["tenants"].items() for m in tenant["memories"]]
    for user, entry in sorted(pending, key=lambda p: -p[1].get("days_ago", 0)):
        clock.set(now - timedelta(days=entry.get("days_ago", 0)))
        ids[entry["key"]] = write(service, user, entry, ids)
        stored.append(StoredMemory(entry["key"], user, ids[entry["key"]], entry["text"], entry["paraphrase"]))
    return stored


def write(service: MemoryService, user: str, entry: dict[str, Any], ids: dict[str, str]) -> str:
    kind = entry["type"]
    result = service.write(
        user,
        entry["text"],
        kind,
        supersedes_id=[ids[k] for k in entry.get("supersedes", [])] or None,
        occurred_at=service.clock() if kind == "episodic" else None,
        fact_type=entry.get("fact_type"),
        steps=entry.get("steps"),
        name=entry.get("name"),
    )
    return result.id


def ask(
    service: MemoryService,
    clock: ManualClock,
    suite: dict[str, Any],
    stored: list[StoredMemory],
    now: datetime,
) -> tuple[list[Ranked], list[str]]:
    clock.set(now)
    keys = {m.id: m.key for m in stored}
    ids = {m.key: m.id for m in stored}
    results: list[Ranked] = []
    failures: list[str] = []
    for user, question in questions(suite):
        if "write" in question:  # same turn: write, then recall at once
            ids[question["write"]["key"]] = write(service, user, question["write"], ids)
            keys[ids[question["write"]["key"]]] = question["write"]["key"]
        hits = service.recall(  # touch=False: asking must not refresh what it measures (decay)
            user,
            question["query"],
            RECALL_K,
            include_superseded=question.get("include_superseded", False),
            min_relevance=0.0,
            touch=False,  # a ranking measure: the floor is the mixed suite's
        )
        ranked = tuple(keys.get(h.memory.id, h.memory.id) for h in hits)
        broken = broken_rule(question, ranked)
        results.append(Ranked(question["kind"], tuple(question["expect"]), () if broken else ranked))
        if broken or not set(question["expect"]) <= set(ranked[:FORBID_DEPTH]):
            failures.append(f"{user}: {question['query']!r} → {list(ranked[:FORBID_DEPTH])} {broken or ''}")
    return results, failures


def run(service: MemoryService, clock: ManualClock, suite: dict[str, Any] | None = None) -> ScenarioResult:
    suite = suite or load()
    # The suite's fixed clock where it has one: an event's stored text starts with its date and
    # time, so the wall-clock time would change what is embedded, and near ties, run to run.
    now = datetime.fromisoformat(suite["now"]) if "now" in suite else clock()
    clock.set(now)
    stored = populate(service, clock, suite, now)
    results, failures = ask(service, clock, suite, stored, now)
    kinds = sorted({r.group for r in results})
    groups = by_group(results, (1, 5), {"all": tuple(kinds)} | {k: (k,) for k in kinds})
    return ScenarioResult(groups, tuple(results), tuple(failures))


def broken_rule(question: dict[str, Any], ranked: tuple[str, ...]) -> str | None:
    shown = [k for k in question.get("forbid", []) if k in ranked[:FORBID_DEPTH]]
    if shown:
        return f"(forbidden {shown} shown)"
    first = question["expect"][0]
    position = {k: i for i, k in reversed(list(enumerate(ranked)))}
    for other in question.get("outranks", []):
        if other in position and position.get(first, len(ranked)) > position[other]:
            return f"({other} ranked above {first})"
    return None


def questions(suite: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for user, tenant in suite["tenants"].items():
        for question in tenant["questions"]:
            yield user, question


def _without(entry: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in names}
