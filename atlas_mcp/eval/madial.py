"""MADial-Bench retrieval in English and Chinese: the same dialogues and memories, two languages.

Protocol (``../shared/eval/data/madial_bench/README.md``): tenant = user; every memory of the
archive is written as an episodic memory dated its ``time``; the query is the user's last line
before the test turn, verbatim; R@k = |gold ∩ top-k| / |gold|. Comparing R@10 in Chinese with
R@10 in English on the same content measures what recall loses in another language.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..service import MemoryService
from .harness import ManualClock
from .metrics import Ranked, summarise

LANGUAGES = ("en", "zh")
_SPEAKER_LINE = re.compile(r'^<(?P<speaker>[^>]+)>:\s*"?(?P<text>.*?)"?\s*$', re.DOTALL)
ASKED_AFTER_LAST_MEMORY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Episode:
    memory_id: str
    user: str
    text: str
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class Question:
    user: str
    text: str
    gold: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Split:
    language: str
    episodes: tuple[Episode, ...]
    questions: tuple[Question, ...]


@dataclass(frozen=True, slots=True)
class LanguageResult:
    language: str
    metrics: dict[str, float]
    recall_latencies_ms: tuple[float, ...]


def load(folder: Path, language: str) -> Split:
    """One language of the dev split; English memories take their user from the Chinese file."""
    users = {
        key: str(value["user-id"])
        for key, value in _memory_lines(folder / "MADial-Bench-zh-memory.json")
        if "user-id" in value
    }
    episodes = tuple(
        Episode(key, users[key], value["event"], _date(value["time"]))
        for key, value in _memory_lines(folder / f"MADial-Bench-{language}-memory.json")
        if key in users
    )
    questions = []
    with (folder / f"MADial-Bench-{language}-dialogue-dev.json").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                dialogue = json.loads(line)
                questions.append(
                    Question(
                        str(dialogue["user-id"]),
                        _last_user_line(dialogue["dialogue"], dialogue["test-turn"][0]),
                        tuple(str(i) for i in dialogue["relevant-id"]),
                    )
                )
    return Split(language, episodes, tuple(questions))


def run(
    service: MemoryService,
    clock: ManualClock,
    split: Split,
    ks: Sequence[int] = (5, 10),
    progress: Callable[[int], None] = lambda _: None,
) -> LanguageResult:
    """Write every memory as its user, then ask every question; tenants are prefixed by language."""
    ids: dict[str, str] = {}
    for episode in sorted(split.episodes, key=lambda e: e.occurred_at):
        clock.set(episode.occurred_at)
        written = service.write(
            _tenant(split, episode.user), episode.text, "episodic", occurred_at=episode.occurred_at
        )
        ids[written.id] = episode.memory_id
        progress(1)
    clock.set(max(e.occurred_at for e in split.episodes) + ASKED_AFTER_LAST_MEMORY)
    ranked, latencies = [], []
    for question in split.questions:
        started = time.perf_counter()
        hits = service.recall(  # R@k measures the ranking: no relevance floor
            _tenant(split, question.user), question.text, max(ks), touch=False, min_relevance=0.0
        )
        latencies.append((time.perf_counter() - started) * 1000)
        ranked.append(Ranked(split.language, question.gold, tuple(ids.get(h.memory.id, "?") for h in hits)))
        progress(1)
    return LanguageResult(split.language, summarise(ranked, ks), tuple(latencies))


def _tenant(split: Split, user: str) -> str:
    return f"madial-{split.language}-{user}"


def _memory_lines(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield from json.loads(line).items()


def _date(value: str) -> datetime:
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def _last_user_line(lines: Sequence[str], test_turn: int) -> str:
    """The last non-assistant line before the test turn, without its speaker tag and quotes."""
    for line in reversed(lines[:test_turn]):
        match = _SPEAKER_LINE.match(line.strip())
        if match and match["speaker"] != "Assistant":
            return match["text"].strip()
    raise ValueError(f"no user line before turn {test_turn}")
