"""How a memory's text opens: a transcript turn's speaker and head, or the name a fact starts
with as its subject ("Nora has moved") or as an owner ("Nora's car is ...").

Recall reads these of every candidate (``domain.perspective`` finds the user's name and the
speakers' turns by them; ``domain.context_rerank`` lifts the turns of a speaker the query
names). No query changes them, so they are worked out once per memory with its other ranking
facts (``pool.RowFacts``) and a recall only gathers them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .model import Memory, MemoryType

_SPEAKER = re.compile(r"^([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s")
# A sentence that starts with a name followed by a verb is about that person ("Nora has
# moved"); one that starts with "Nora's brother" is about the brother. A word counts as a name
# only if it is also written capitalised inside a sentence, so "Went" or "Prefers" never do.
NAME = re.compile(r"^[A-Z][a-z\u00df-\u00ff]+$")
POSSESSIVE = re.compile(r"['’]s?$")
NOT_NAMES = frozenset(
    "The A An I We My Our He She They It This That These Those His Her Their Your You Me Us "
    "When Before After Once On In At For If Then Today Yesterday Tomorrow".split()
)
_FIRST_WORD = re.compile(r"\s*([^\W\d_][\w'’-]*)")


def speaker(text: str) -> str | None:
    """The speaker of a transcript-style memory ("Name: what they said"), if it has one."""
    match = _SPEAKER.match(text)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class Opening:
    """What ``perspective.user_name`` reads of one text."""

    turn: bool  # a transcript turn ("Name: ..."): its speaker is not the user
    subject: str | None = None  # the name it starts with as its subject
    owner: str | None = None  # the name it starts with as an owner ("Nora's car")


TURN = Opening(turn=True)
PLAIN = Opening(turn=False)


def opening(text: str) -> Opening:
    """How ``text`` opens: a turn, a name as subject or as owner, or none of these."""
    if speaker(text):
        return TURN
    first = _FIRST_WORD.match(text)
    if first is None:
        return PLAIN
    word = first.group(1)
    if NAME.match(word) and word not in NOT_NAMES:
        return Opening(turn=False, subject=word)  # "Nora's brother" reads as "Nora's": not a subject
    owner = POSSESSIVE.sub("", word)
    return Opening(turn=False, owner=owner) if owner != word else PLAIN


def written_inside(name: str, joined: str) -> bool:
    """Is ``name`` written in ``joined`` (texts, one per line) other than at the start of a
    text or a line, with no letter or digit either side (a proper noun, not a capitalised
    first word such as "Went")? One search in C: the name, then what stands before it."""
    escaped = re.escape(name)
    found = re.search(rf"{escaped}(?<=[^\w\n]{escaped}|_{escaped})(?![^\W_])", joined)
    return found is not None


# A word shaped as a name (``NAME``) with no letter or digit either side, not at the start of
# the text or of a line: what ``written_inside`` asks of one name, for all of them at once.
# The capital comes first and what stands before it is looked at from there: a pattern that
# opens with a character class lets the engine skip to the next capital (5.7 -> 1.6 us a
# LoCoMo turn; every memory a recall meets first is read for it), where one that opens with
# the look-behind tried it at every position.
_INNER_NAME = re.compile(r"([A-Z](?<=[^\w\n][A-Z]|_[A-Z])[a-z\u00df-\u00ff]+)(?![^\W_])")
_NO_NAMES: frozenset[str] = frozenset()


def inner_names(text: str) -> frozenset[str]:
    """The words shaped as a name that ``text`` writes inside it: a name ``NAME`` matches is
    ``written_inside`` texts joined one per line exactly when one of them holds it here (an
    occurrence that counts starts after a character that is no letter, so it starts no
    longer name-shaped word and lies inside none). Kept per memory (``pool.RowFacts.inner``)."""
    found = _INNER_NAME.findall(text)
    return frozenset(found) if found else _NO_NAMES


def turn_head(memory: Memory) -> str | None:
    """What an event's text says before its first ": " (None: not an event, or no ": ")."""
    at = memory.text.find(": ") if memory.memory_type is MemoryType.EPISODIC else -1
    return memory.text[:at] if at >= 0 else None
