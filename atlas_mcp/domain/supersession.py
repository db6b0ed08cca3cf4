"""Supersession rules: a contradicted memory is marked, never deleted.

A new memory may supersede one or more memories of the same caller and the same type
(facts replace facts, playbooks replace playbooks). Events are history and catalog entries
belong to nobody, so neither can be superseded. A harsh contradiction (the user corrected
us) costs the new memory confidence; a natural one (the world changed) does not.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from ..errors import Conflict, InvalidInput, NotFound
from .model import Contradiction, Memory, MemoryType

SUPERSEDABLE_TYPES = frozenset({MemoryType.SEMANTIC, MemoryType.PROCEDURAL})


class SupersessionPolicy(BaseModel):
    """``[scoring.supersession]``: what a write that replaces memories does to the new one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    harsh_confidence_penalty: float = Field(
        0.1, ge=0, le=1, description="confidence a harsh contradiction (the user corrected us) costs"
    )


def penalised_confidence(
    confidence: float | None, contradiction: Contradiction, penalty: float
) -> float | None:
    """Harsh contradictions cost the superseding fact ``penalty`` confidence, clamped at 0."""
    if contradiction is not Contradiction.HARSH:
        return confidence
    base = 1.0 if confidence is None else confidence
    return max(0.0, round(base - penalty, 6))


def check_targets(
    new_type: MemoryType, wanted_ids: Sequence[str], found: Sequence[Memory], user_id: str
) -> None:
    """Raise unless every id names a live memory of ``user_id`` that the new one may replace.

    The service checks this once, before writing; engines then make the write conditional on
    the targets still being live and report a lost race with ``changed_meanwhile``.

    ``found`` must be what the engine returned for ``wanted_ids`` *scoped to the caller*, so
    another user's id is indistinguishable from a missing one.
    """
    if new_type not in SUPERSEDABLE_TYPES:
        raise InvalidInput(
            f"only semantic and procedural memories can supersede; {new_type} memories are "
            "history. Write a semantic fact with supersedes_id instead."
        )
    by_id = {m.id: m for m in found if m.user_id == user_id}
    for wanted in wanted_ids:
        target = by_id.get(wanted)
        if target is None:
            raise NotFound(f"memory {wanted!r} not found; recall it first to get a valid id")
        if target.memory_type is not new_type:
            raise InvalidInput(
                f"memory {wanted!r} is {target.memory_type}; a {new_type} memory can only "
                f"supersede {new_type} memories"
            )
        if target.is_superseded:
            raise Conflict(
                f"memory {wanted!r} was already superseded by {target.superseded_by!r}; "
                "supersede that one instead"
            )


def changed_meanwhile(ids: Sequence[str]) -> Conflict:
    """The one error for a supersession write whose targets changed after the service checked
    them (superseded, forgotten or edited by another writer): nothing was written."""
    return Conflict(
        f"memory {', '.join(repr(i) for i in ids)} changed at the same time; nothing was written. "
        "Recall again and retry"
    )
