"""A real-text corpus: LoCoMo's conversations as one user's memories, replicated to any size.

The template corpus (``corpus.py``) is short and regular; real conversational text has a long
vocabulary tail and many common words, which is what makes FTS5 postings and the reranker
expensive. Every text of the LoCoMo dev split becomes a memory (dialogue turns and session
summaries as episodic, the per-session observations as semantic facts); past its ~4k texts
the corpus is replicated with variation: each replica renames the speakers (so the lexical
index sees new names next to the same common words) and shifts the dates.

Replicas reuse their original's vectors (a renamed speaker moves a vector very little):
the bench measures latency, not quality, and this keeps seeding 100k memories to one pass
over ~4k texts. The data set is CC BY-NC: it is read from ``../shared`` and never copied.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from ..domain.model import FactType, MemoryType
from ..eval.locomo import ANSWERABLE, load, session_time, turn_text
from .corpus import EPOCH, MemorySpec

DEFAULT_PATH = Path("../shared/eval/data/locomo/locomo10-dev.json")
NAMES = (
    "Maya", "Tom", "Priya", "Jonas", "Aiko", "Lucas", "Fatima", "Sven", "Elena", "Kwame", "Olga",
    "Diego", "Hannah", "Ravi", "Chloe", "Mateo", "Ingrid", "Yusuf", "Nora", "Ben", "Amara", "Felix",
    "Leila", "Hugo", "Mei", "Oscar", "Zara", "Tariq", "Ines", "Pavel", "Sofia", "Kenji",
)  # fmt: skip
REPLICA_SHIFT_DAYS = 37


@dataclass(frozen=True, slots=True)
class RealText:
    base: list[MemorySpec]  # every LoCoMo text once, as a memory
    speakers: list[tuple[str, ...]]  # per base item, the names a replica renames
    questions: list[str]
    turns: list[int]  # the base items that are dialogue turns, in conversation order


def default_path() -> Path | None:
    """The dev split next to the checkout, if it is there (the bench skips the corpus if not)."""
    return DEFAULT_PATH.resolve() if DEFAULT_PATH.exists() else None


def read(path: Path) -> RealText:
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    base: list[MemorySpec] = []
    speakers: list[tuple[str, ...]] = []
    turns: list[int] = []
    for conversation in raw:
        body = conversation["conversation"]
        names = (body["speaker_a"], body["speaker_b"])
        for key, session in body.items():
            if (m := re.fullmatch(r"session_(\d+)", key)) and session:
                age = _age_days(body[f"session_{m.group(1)}_date_time"])
                turns += range(len(base), len(base) + len(session))
                base += [MemorySpec(MemoryType.EPISODIC, turn_text(t), age) for t in session]
        for key, by_speaker in conversation.get("observation", {}).items():
            age = _age_days(body[key.replace("_observation", "_date_time")])
            for facts in by_speaker.values():
                base += [
                    MemorySpec(MemoryType.SEMANTIC, f[0], age, fact_type=FactType.WORLD.value) for f in facts
                ]
        for key, summary in conversation.get("session_summary", {}).items():
            age = _age_days(body[key.replace("_summary", "_date_time")])
            base.append(MemorySpec(MemoryType.EPISODIC, summary, age))
        speakers += [names] * (len(base) - len(speakers))
    questions = [q.text for c in load(path) for q in c.questions if q.category in ANSWERABLE]
    return RealText(base, speakers, questions, turns)


def _age_days(when: str) -> float:
    return (EPOCH - session_time(when)).total_seconds() / 86_400


def specs(corpus: RealText, count: int) -> tuple[list[MemorySpec], list[int]]:
    """``count`` memories and, per memory, the index of the base text it varies (for its vector)."""
    out: list[MemorySpec] = []
    origin: list[int] = []
    replica = 0
    while len(out) < count:
        for index, (spec, names) in enumerate(zip(corpus.base, corpus.speakers, strict=True)):
            if len(out) == count:
                break
            text = _rename(spec.text, names, replica) if replica else spec.text
            age = spec.age_days + replica * REPLICA_SHIFT_DAYS
            out.append(MemorySpec(spec.kind, text, age, fact_type=spec.fact_type))
            origin.append(index)
        replica += 1
    return out, origin


CHAT_TURN_SECONDS = 5  # one long chat: a turn every few seconds, all one episode


def one_chat(corpus: RealText, count: int) -> tuple[list[MemorySpec], list[int]]:
    """``count`` dialogue turns as an agent logs one long chat: episodic, dated when written
    (a few seconds apart, so the whole log is one episode), replicas with renamed speakers."""
    out: list[MemorySpec] = []
    origin: list[int] = []
    replica = 0
    while len(out) < count:
        for index in corpus.turns[: count - len(out)]:
            spec, names = corpus.base[index], corpus.speakers[index]
            text = _rename(spec.text, names, replica) if replica else spec.text
            out.append(MemorySpec(MemoryType.EPISODIC, text, 0.0))
            origin.append(index)
        replica += 1
    step = CHAT_TURN_SECONDS / 86_400
    return [MemorySpec(s.kind, s.text, (count - n) * step) for n, s in enumerate(out)], origin


def queries(corpus: RealText, count: int, seed: int) -> list[str]:
    r = random.Random(seed)
    return [r.choice(corpus.questions) for _ in range(count)]


def _rename(text: str, names: tuple[str, ...], replica: int) -> str:
    """The same speaker gets the same new name throughout one replica."""
    for name in names:
        new = random.Random(f"{replica}:{name}").choice(NAMES)
        text = re.sub(rf"\b{re.escape(name)}\b", new, text)
    return text
