"""The scoring policy: every recall constant, one sub-model per stage of ``domain.ranking``.

    [scoring.retrieval]       how the query is read and the pool fetched     (domain.query)
    [scoring.context_rerank]  the default rerank's weights                   (domain.context_rerank)
    [scoring.multipliers]     decay, use, catalog prior, track record, time  (domain.multipliers)
    [scoring.calibration]     calibrated relevance and its floor             (domain.calibration)
    [scoring.supersession]    what a replacing write does                    (domain.supersession)

Every knob is also accepted by its own name directly under ``[scoring]`` (and as
``ATLAS_SCORING__<NAME>``), as it was before the tables existed, and ``[scoring.relevance]``
still names the calibration table: the sub-model that declares a name is the one it sets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .calibration import CalibrationPolicy
from .context_rerank import ContextRerankPolicy
from .multipliers import MultiplierPolicy
from .query import RetrievalPolicy
from .supersession import SupersessionPolicy

SECTIONS: dict[str, type[BaseModel]] = {
    "retrieval": RetrievalPolicy,
    "context_rerank": ContextRerankPolicy,
    "multipliers": MultiplierPolicy,
    "calibration": CalibrationPolicy,
    "supersession": SupersessionPolicy,
}
# Names a table had before it moved: ``[scoring.relevance]`` is the calibration table, and its
# ``time_window_floor`` is the one the multipliers own.
RENAMED_TABLES = {"relevance": "calibration"}
RENAMED_KEYS = {("relevance", "time_window_floor"): "multipliers"}


def _flat_keys() -> dict[str, str]:
    """Each knob's name → the section that declares it (a name lives in one section only)."""
    owner: dict[str, str] = {}
    for section, model in SECTIONS.items():
        for name in model.model_fields:
            if name in owner or name in SECTIONS:
                raise TypeError(f"scoring knob {name!r} is declared twice")
            owner[name] = section
    return owner


class ScoringPolicy(BaseModel):
    """All tunable recall constants: the ``[scoring]`` settings table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    FLAT_KEYS: ClassVar[Mapping[str, str]] = _flat_keys()

    retrieval: RetrievalPolicy = Field(default_factory=RetrievalPolicy)
    context_rerank: ContextRerankPolicy = Field(default_factory=ContextRerankPolicy)
    multipliers: MultiplierPolicy = Field(default_factory=MultiplierPolicy)
    calibration: CalibrationPolicy = Field(default_factory=CalibrationPolicy)
    supersession: SupersessionPolicy = Field(default_factory=SupersessionPolicy)

    @model_validator(mode="before")
    @classmethod
    def _sections_from_flat_keys(cls, data: Any) -> Any:
        return cls.sectioned(data)

    @classmethod
    def sectioned(cls, data: Any) -> Any:
        """Move every flat knob (and an old table) into the section that declares it; names no
        section declares stay where they are, for the usual "unknown setting" error."""
        if not isinstance(data, Mapping):
            return data
        out: dict[str, Any] = {}
        moved: dict[str, dict[str, Any]] = {}
        for key, value in data.items():
            if key in RENAMED_TABLES and isinstance(value, Mapping):
                for name, inner in value.items():
                    section = RENAMED_KEYS.get((key, name), RENAMED_TABLES[key])
                    moved.setdefault(section, {})[name] = inner
            elif key in cls.FLAT_KEYS:
                moved.setdefault(cls.FLAT_KEYS[key], {})[key] = value
            else:
                out[key] = value
        for section, values in moved.items():
            given = out.get(section, {})
            given = given.model_dump(exclude_unset=True) if isinstance(given, BaseModel) else dict(given)
            out[section] = values | given  # the section's own table wins over a flat key
        return out

    @classmethod
    def names_a_knob(cls, path: Sequence[str]) -> bool:
        """Does ``path`` (below ``[scoring]``) name a knob or section, by any accepted name?"""
        match list(path):
            case [name] if name in SECTIONS or name in cls.FLAT_KEYS or name in RENAMED_TABLES:
                return True
            case [table, name] if table in SECTIONS:
                return name in SECTIONS[table].model_fields
            case [table, name] if table in RENAMED_TABLES:
                section = RENAMED_KEYS.get((table, name), RENAMED_TABLES[table])
                return name in SECTIONS[section].model_fields
        return False

    def replaced(self, **changes: Any) -> ScoringPolicy:
        """This policy with ``changes`` (flat knob names or sections), validated."""
        nested = {name: getattr(self, name).model_dump() for name in SECTIONS}
        for section, values in type(self).sectioned(changes).items():
            if isinstance(values, BaseModel):
                values = values.model_dump()
            known = section in SECTIONS and isinstance(values, Mapping)
            nested[section] = nested[section] | dict(values) if known else values
        return type(self).model_validate(nested)

    @property
    def zone(self) -> ZoneInfo:
        return self.retrieval.zone
