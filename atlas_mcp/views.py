"""How a memory looks outside the process: the JSON shape tools, CLI and export share.

Only the fields that apply to a memory's type are emitted, so a model reading a recall
result is not handed a wall of nulls.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from .domain import codec
from .domain.explain import wire_names
from .domain.guard import flags
from .domain.model import Memory, iso
from .domain.ranking import Explanation

SCORE_DIGITS = 6  # the precision every score is shown with
RELEVANCE_DIGITS = 3  # a calibrated probability: more digits would claim precision it lacks
# A recalled fact a newer fact about the same thing probably replaced: the newer one's id.
OUTDATED_FIELD = "probably_outdated_by"


def memory_view(memory: Memory, score: float | None = None, relevance: float | None = None) -> dict[str, Any]:
    """The fields that apply to the memory's type, and ``flags`` when its content addresses the
    reading model (computed from the text on every read, so no stored memory escapes it). A
    score and relevance follow the text, in the order of the recall result's model
    (``mcp.results.MemoryOut``): a recall's payload is its views as they are."""
    scored: dict[str, Any] | None = None
    if score is not None:
        scored = {"score": round(score, SCORE_DIGITS)}
        if relevance is not None:
            scored["relevance"] = round(relevance, RELEVANCE_DIGITS)
    view = codec.view(memory, scored)
    if found := flags(memory):
        view["flags"] = list(found)
    return view


def recalled_view(
    memory: Memory,
    score: float,
    why: Explanation | None = None,
    relevance: float | None = None,
    outdated_by: str | None = None,
) -> dict[str, Any]:
    """A recall result: the memory, its score and relevance, the newer fact that probably
    replaced it and, when asked for, why (with the copies of it that were not repeated)."""
    view = memory_view(memory, score, relevance)
    if outdated_by is not None:
        view[OUTDATED_FIELD] = outdated_by
    if why is None:
        return view
    return view | {"explain": explanation_view(why)}


def explanation_view(why: Explanation) -> dict[str, Any]:
    """The breakdown of one recall score (``ranking.FORMULA``), as ``domain.explain`` declares it."""
    return _declared_view(why)


def _declared_view(value: Any) -> dict[str, Any]:
    view: dict[str, Any] = {}
    for key, field, shown in wire_names(type(value)):
        item = getattr(value, field.name)
        if shown.only_when_set and not item:
            continue
        view[key] = _declared_view(item) if dataclasses.is_dataclass(item) else _wire(item)
    return view


def _wire(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    return _rounded(value) if isinstance(value, float) else value


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, SCORE_DIGITS)
