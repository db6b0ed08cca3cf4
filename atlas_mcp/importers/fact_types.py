"""Which kind of fact an imported line is, when its source does not say.

Most sources have no equivalent of our ``fact_type``, yet it decides what the core profile
shows (identity and constraints first). A few English cue words get most lines right; a line
they do not recognise keeps the caller's default. A section heading ("## Preferences") or a
source category ("[preference]") is a stronger cue than the words of the line, so callers try
``from_label`` first.
"""

from __future__ import annotations

import re

from ..domain.model import FactType

_CUES: tuple[tuple[FactType, re.Pattern[str]], ...] = (
    (
        FactType.CONSTRAINT,
        re.compile(
            r"\b(allerg\w*|intoleran\w*|can'?t|cannot|must(?:n'?t| not)?|never|do(?:es)? not|don'?t|"
            r"avoid\w*|vegan|vegetarian|halal|kosher|gluten|lactose|not allowed|forbidden|"
            r"required?|always use|only use|deadline|budget|limit(?:ed)? to)\b",
            re.IGNORECASE,
        ),
    ),
    (
        FactType.IDENTITY,
        re.compile(
            r"\b(my name|name is|named|i am|i'm|works? (?:at|as|for)|employed|lives? in|living in|"
            r"based in|moved to|home (?:city|town|address)|born|years old|birthday|pronouns|nationality|is from|comes from|"
            r"profession|occupation|job title|married|wife|husband|partner|daughter|son|"
            r"children|kids|native language|speaks)\b",
            re.IGNORECASE,
        ),
    ),
    (
        FactType.PREFERENCE,
        re.compile(
            r"\b(prefers?|preferred|likes?|loves?|enjoys?|favou?rite|hates?|dislikes?|"
            r"fan of|rather|wants?|wishes)\b",
            re.IGNORECASE,
        ),
    ),
)

_LABELS: dict[FactType, re.Pattern[str]] = {
    FactType.IDENTITY: re.compile(
        r"\b(identity|about me|about the user|profile|personal|bio|who i am|background)\b", re.IGNORECASE
    ),
    FactType.CONSTRAINT: re.compile(
        r"\b(constraints?|rules?|requirements?|restrictions?|must|never)\b", re.IGNORECASE
    ),
    FactType.PREFERENCE: re.compile(r"\b(preferences?|likes|style|tastes?|favou?rites?)\b", re.IGNORECASE),
    FactType.WORLD: re.compile(r"\b(facts?|world|knowledge|reference|notes?)\b", re.IGNORECASE),
}


def from_text(text: str, default: str | None = None) -> str | None:
    """The kind the line's own words suggest, else ``default``."""
    for kind, cue in _CUES:
        if cue.search(text):
            return kind.value
    return default


def from_label(label: str | None) -> str | None:
    """The kind a heading or category names ("Preferences", "[constraint]"), if any."""
    if not label:
        return None
    for kind, cue in _LABELS.items():
        if cue.search(label):
            return kind.value
    return None


def guess(text: str, label: str | None = None, default: str | None = None) -> str | None:
    return from_label(label) or from_text(text, default)
