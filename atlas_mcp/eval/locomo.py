"""LoCoMo (Maharana et al., ACL 2024) read as a retrieval benchmark for agent memory.

The data set is CC BY-NC: it is read from wherever the caller points, never shipped. This module
only parses it into plain objects and normalises the evidence quirks the protocol names:
several ids packed in one string (``"D8:6; D9:17"``), malformed ids (``"D:11:26"``,
``"D30:05"``), ids that name no turn (dropped) and questions left with no evidence (skipped).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ANSWERABLE = (1, 2, 3, 4)  # category 5 asks about things the conversation never says

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE_ID = re.compile(r"D:?(\d+):0*(\d+)")
_SESSION_TIME = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    session: int
    occurred_at: datetime
    text: str  # "<speaker>: <text>" plus the image caption, as the protocol writes it


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def load(path: Path) -> list[Conversation]:
    with Path(path).open(encoding="utf-8") as fh:
        return [_conversation(raw) for raw in json.load(fh)]


def session_time(text: str) -> datetime:
    return datetime.strptime(text.strip(), _SESSION_TIME).replace(tzinfo=UTC)


def turn_text(raw: dict[str, Any]) -> str:
    text = f"{raw['speaker']}: {raw['text']}"
    if raw.get("blip_caption"):
        text += f" [shares an image: {raw['blip_caption']}]"
    return text


def evidence_ids(raw: list[str], known: set[str]) -> tuple[str, ...]:
    """Normalised evidence ids in order, without duplicates or ids that name no turn."""
    found = (f"D{s}:{i}" for item in raw for s, i in _EVIDENCE_ID.findall(item))
    return tuple(dict.fromkeys(d for d in found if d in known))


def _conversation(raw: dict[str, Any]) -> Conversation:
    body = raw["conversation"]
    turns = []
    # Sessions in numeric order; some date keys have no session (a quirk of conv-26): skip them.
    for number in sorted(int(m.group(1)) for key in body if (m := _SESSION_KEY.match(key))):
        when = session_time(body[f"session_{number}_date_time"])
        turns += [Turn(t["dia_id"], number, when, turn_text(t)) for t in body[f"session_{number}"]]
    known = {t.dia_id for t in turns}
    questions = []
    for qa in raw["qa"]:
        evidence = evidence_ids(qa.get("evidence") or [], known)
        if evidence:
            questions.append(Question(str(qa["question"]), int(qa["category"]), evidence))
    return Conversation(raw["sample_id"], tuple(turns), tuple(questions))
