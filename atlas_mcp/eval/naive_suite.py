"""Naive-agent histories: does memory stay true when the agent is not careful?

Each persona of ``scenarios/naive.json`` (development split) and ``naive_holdout.json``
(held out: never tuned on) is one user. Their stories are written through the MCP tools, in
time order, the way a naive agent writes: the text only, never ``supersedes_id``, never
``about``, on top of the mixed suite's background memories. Then the user's questions are
asked with ``recall_memory`` (k = 10, ``min_relevance=0``: the rates below judge the order
facts about the same thing come in, not the relevance floor; ``under floor`` says how often
the current value came back below the default floor, which the tool's defaults would drop).

- *stale* (``update`` and ``correction`` stories): an outdated value ranks above the current
  one (the last write), or is returned while the current one is not, or the current one is
  marked probably outdated. ``missed``: neither is returned. ``under floor``: the current value
  is returned, but with a relevance under the default floor.
- *copies* (``repeat``): how many memories of the one repeated fact are in the top 5.
- *false merge* (``both-true``, per story): one of the look-alike facts was taken for a
  duplicate or an update of another at write time, ended superseded, is missing from the top
  5 of its own question or of an ``ask_all`` question, or is marked probably outdated there.
  Background facts marked outdated, taken for duplicates or superseded are counted apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp_types import TextContent

from ..mcp.server import build_server
from ..service import MemoryService
from .harness import ManualClock
from .mixed_suite import BACKGROUND, background_days_ago

SCENARIOS = Path(__file__).parent / "scenarios"
SPLITS = {"dev": SCENARIOS / "naive.json", "holdout": SCENARIOS / "naive_holdout.json"}
RECALL_K = 10
TOP = 5
UPDATES = ("update", "correction")
OUTDATED_FIELD = "probably_outdated_by"


@dataclass(frozen=True, slots=True)
class Returned:
    """One memory a recall returned: its id, whether it came marked as probably outdated, and
    whether its relevance clears the default floor (what the tool's defaults would return)."""

    id: str
    outdated: bool
    cleared: bool = True


@dataclass(frozen=True, slots=True)
class Question:
    persona: str
    language: str
    story: str
    kind: str
    query: str
    returned: tuple[Returned, ...]

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.returned]

    def position(self, memory_id: str) -> int | None:
        return next((i for i, r in enumerate(self.returned) if r.id == memory_id), None)

    def cleared(self, memory_id: str) -> bool:
        return any(r.id == memory_id and r.cleared for r in self.returned)

    def marked(self, memory_id: str) -> bool:
        return any(r.id == memory_id and r.outdated for r in self.returned)


@dataclass(slots=True)
class Story:
    persona: str
    language: str
    spec: dict[str, Any]
    ids: list[str] = field(default_factory=list)  # per write (or fact), the id the write returned
    results: list[dict[str, Any]] = field(default_factory=list)  # the write results
    questions: list[Question] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.persona}/{self.spec['key']}"

    @property
    def kind(self) -> str:
        kind: str = self.spec["kind"]
        return kind

    def writes(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.spec["facts"] if self.kind == "both-true" else self.spec["writes"]
        return found


@dataclass(frozen=True, slots=True)
class Verdict:
    story: str
    kind: str
    language: str
    query: str
    failed: bool
    detail: str = ""
    value: float = 0.0  # copies for a repeat question


@dataclass(frozen=True, slots=True)
class NaiveResult:
    split: str
    verdicts: tuple[Verdict, ...]
    background_merged: tuple[str, ...]  # background memories taken for another or marked outdated
    background_facts: int = 0  # background facts written (all personas)

    @property
    def background_merge_rate(self) -> float:
        return len(self.background_merged) / self.background_facts if self.background_facts else 0.0

    def rows(self) -> dict[str, dict[str, float]]:
        return summarise(self.verdicts)

    def failures(self) -> list[str]:
        """Every question that failed, and every update question that found no value at all."""
        return [f"{v.kind} {v.story}: {v.query!r} {v.detail}" for v in self.verdicts if v.failed or v.detail]


def load(split: str = "dev") -> dict[str, Any]:
    suite: dict[str, Any] = json.loads(SPLITS[split].read_text(encoding="utf-8"))
    suite["background"] = json.loads(BACKGROUND.read_text(encoding="utf-8"))["memories"]
    return suite


def run(
    service: MemoryService, clock: ManualClock, split: str = "dev", suite: dict[str, Any] | None = None
) -> NaiveResult:
    suite = suite or load(split)
    return anyio.run(_run, service, clock, split, suite)


async def _run(service: MemoryService, clock: ManualClock, split: str, suite: dict[str, Any]) -> NaiveResult:
    now = datetime.fromisoformat(suite["now"])
    stories, background = [], []
    for persona, spec in suite["personas"].items():
        mine = [Story(persona, spec["language"], s) for s in spec["stories"]]
        stories += mine
        # A persona's own story wins over a background fact about the same thing.
        skip = set(spec.get("without_background", ()))
        floor = service.policy.calibration.default_min_relevance
        async with Client(build_server(service, persona)) as client:
            background += await _write_history(client, clock, now, suite["background"], mine, skip)
            clock.set(now)
            for story in mine:
                for query in _queries(story):
                    story.questions.append(await _ask(client, story, query, floor))
    verdicts = [v for s in stories for v in judge(s, _live(service, s))]
    facts = sum(1 for _, result in background if result["memory_type"] == "semantic")
    merged = tuple(_background_merged(service, stories, background))
    return NaiveResult(split, tuple(verdicts), merged, facts)


async def _write_history(
    client: Client,
    clock: ManualClock,
    now: datetime,
    background: list[dict[str, Any]],
    stories: list[Story],
    skip: set[str],
) -> list[tuple[str, dict[str, Any]]]:
    """Every write of the persona, oldest first; returns the background writes' (id, result)."""
    pending: list[tuple[int, Story | None, dict[str, Any]]] = [
        (background_days_ago(position), None, entry)
        for position, entry in enumerate(background)
        if entry["text"] not in skip
    ]
    pending += [(w["days"], story, w) for story in stories for w in story.writes()]
    written = []
    for days, story, entry in sorted(pending, key=lambda p: -p[0]):
        clock.set(now - timedelta(days=days))
        result = await _tool(client, "write_memory", _arguments(entry))
        if story is None:
            written.append((result["id"], result))
        else:
            story.ids.append(result["id"])
            story.results.append(result)
    return written


def _arguments(entry: dict[str, Any]) -> dict[str, Any]:
    """What a naive agent sends: the text and, for background playbooks, their steps."""
    arguments: dict[str, Any] = {"text": entry["text"], "memory_type": entry.get("type", "semantic")}
    if entry.get("steps"):
        arguments["steps"] = entry["steps"]
    return arguments


def _queries(story: Story) -> Iterator[str]:
    if story.kind == "both-true":
        for fact in story.spec["facts"]:
            yield from fact.get("ask", [])
        yield from story.spec.get("ask_all", [])
    else:
        yield from story.spec["ask"]


async def _ask(client: Client, story: Story, query: str, floor: float) -> Question:
    found = await _tool(client, "recall_memory", {"query": query, "k": RECALL_K, "min_relevance": 0})
    returned = tuple(
        Returned(m["id"], bool(m.get(OUTDATED_FIELD)), m.get("relevance", 0.0) >= floor)
        for m in found["memories"]
    )
    return Question(story.persona, story.language, story.key, story.kind, query, returned)


async def _tool(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    if result.is_error:
        first = result.content[0]
        raise RuntimeError(f"{name} failed: {first.text if isinstance(first, TextContent) else first}")
    payload: dict[str, Any] = result.structured_content
    return payload


def _live(service: MemoryService, story: Story) -> set[str]:
    """The story's memories that are still live (not superseded) in the store."""
    return {m.id for m in service.get_many(story.persona, sorted(set(story.ids))) if not m.is_superseded}


def judge(story: Story, live: set[str]) -> Iterator[Verdict]:
    if story.kind in UPDATES:
        yield from _judge_update(story)
    elif story.kind == "repeat":
        yield from _judge_repeat(story)
    else:
        yield from _judge_both_true(story, live)


def _verdict(story: Story, query: str, failed: bool, detail: str = "", value: float = 0.0) -> Verdict:
    return Verdict(story.key, story.kind, story.language, query, failed, detail, value)


def _judge_update(story: Story) -> Iterator[Verdict]:
    current = story.ids[-1]
    outdated = [i for i in dict.fromkeys(story.ids[:-1]) if i != current]
    for q in story.questions:
        at = q.position(current)
        shown = {i: p for i in outdated if (p := q.position(i)) is not None}
        above = [i for i, p in shown.items() if at is None or p < at]
        if q.marked(current):
            yield _verdict(story, q.query, True, "stale: the current value is marked outdated")
        elif above:
            where = [story.ids.index(i) for i in above]
            yield _verdict(story, q.query, True, f"stale: write(s) {where} above the current (at {at})")
        elif at is None:
            yield _verdict(story, q.query, False, "missed: the current value is not returned")
        elif not q.cleared(current):
            yield _verdict(story, q.query, False, f"under floor: the current value (at {at}) is below it")
        else:
            yield _verdict(story, q.query, False)


def _judge_repeat(story: Story) -> Iterator[Verdict]:
    copies_of = set(story.ids)
    for q in story.questions:
        copies = sum(i in copies_of for i in q.ids[:TOP])
        detail = f"{copies} copies in the top {TOP}" if copies != 1 else ""
        yield _verdict(story, q.query, copies > 1, detail, float(copies))


def _judge_both_true(story: Story, live: set[str]) -> Iterator[Verdict]:
    facts = story.spec["facts"]
    problems = []
    if len(set(story.ids)) < len(facts):
        problems.append("two facts stored as one")
    problems += [f"fact {n} superseded" for n, i in enumerate(story.ids) if i not in live]
    problems += [f"fact {n} taken for a duplicate" for n, r in enumerate(story.results) if r.get("duplicate")]
    asked = 0
    for n, fact in enumerate(facts):
        for query in fact.get("ask", []):
            q = story.questions[asked]
            asked += 1
            problems += _lost(q, [story.ids[n]])
    for q in story.questions[asked:]:
        problems += _lost(q, story.ids)
    problems += [  # a true fact shown as outdated misleads, whatever was asked
        f"{q.query!r} marks fact {n} outdated"
        for q in story.questions
        for n, i in enumerate(story.ids)
        if q.marked(i)
    ]
    yield _verdict(story, "(every question of the pair)", bool(problems), "; ".join(problems))


def _lost(q: Question, wanted: list[str]) -> list[str]:
    return [f"{q.query!r} does not return it in the top {TOP}" for i in wanted if i not in q.ids[:TOP]]


def _background_merged(
    service: MemoryService, stories: list[Story], background: list[tuple[str, dict[str, Any]]]
) -> Iterator[str]:
    ids = {i for i, _ in background}
    for memory_id, result in background:
        if result.get("duplicate") or result.get("superseded"):
            yield f"{memory_id}: write result {result}"
    marked = {r.id for s in stories for q in s.questions for r in q.returned if r.outdated and r.id in ids}
    yield from (f"{memory_id}: marked outdated" for memory_id in sorted(marked))


def summarise(verdicts: tuple[Verdict, ...] | list[Verdict]) -> dict[str, dict[str, float]]:
    """The three rates overall and per language: stale, copies in the top 5, false merges."""
    rows = {"all": _row(verdicts)}
    for language in sorted({v.language for v in verdicts}):
        rows[language] = _row([v for v in verdicts if v.language == language])
    return rows


def _row(verdicts: list[Verdict] | tuple[Verdict, ...]) -> dict[str, float]:
    updates = [v for v in verdicts if v.kind in UPDATES]
    repeats = [v for v in verdicts if v.kind == "repeat"]
    pairs = [v for v in verdicts if v.kind == "both-true"]
    row: dict[str, float] = {"update questions": len(updates), "repeat questions": len(repeats)}
    if updates:
        row["stale"] = sum(v.failed for v in updates) / len(updates)
        row["missed"] = sum(v.detail.startswith("missed") for v in updates) / len(updates)
        row["under floor"] = sum(v.detail.startswith("under floor") for v in updates) / len(updates)
    if repeats:
        row["copies (mean)"] = sum(v.value for v in repeats) / len(repeats)
        row["copies (max)"] = max(v.value for v in repeats)
        row["repeat missed"] = sum(v.value == 0 for v in repeats) / len(repeats)
    row["look-alike stories"] = len(pairs)
    if pairs:
        row["false merges"] = sum(v.failed for v in pairs) / len(pairs)
    return row


COLUMNS = (
    "update questions",
    "stale",
    "missed",
    "under floor",
    "repeat questions",
    "copies (mean)",
    "copies (max)",
    "look-alike stories",
    "false merges",
)


def table(result: NaiveResult) -> str:
    lines = ["| group | " + " | ".join(COLUMNS) + " |", "|---|" + "---|" * len(COLUMNS)]
    for name, row in result.rows().items():
        cells = [_cell(row.get(c)) for c in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    if value is None:
        return "—"
    return str(int(value)) if float(value).is_integer() and value >= 1 else f"{value:.3f}"


def to_json(result: NaiveResult) -> dict[str, Any]:
    return {
        "split": result.split,
        "rows": result.rows(),
        "failures": result.failures(),
        "background_merged": list(result.background_merged),
        "background_facts": result.background_facts,
    }
