"""The strict JSON answer one consolidation call must return, validated with pydantic.

The envelope is forgiving (a model may wrap the object in a code fence or a sentence), the
content is not: the answer must be one JSON object whose three lists hold objects of the
shapes below. Each item is validated on its own, so one bad item is dropped with its reason
instead of costing the whole batch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ..domain.model import Contradiction, FactType, Outcome
from ..errors import AtlasError

DEFAULT_FACT_CONFIDENCE = 0.7  # what the model meant when it gave none (the seed's default)


class MalformedAnswer(AtlasError):
    """The model's answer is not the JSON object the prompt asked for: nothing is written."""


class _Item(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    supporting_episode_ids: list[str] = Field(default_factory=list)

    @field_validator("supporting_episode_ids", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class NewFact(_Item):
    text: str = Field(min_length=1, max_length=2_000)
    fact_type: FactType = FactType.PREFERENCE
    confidence: float = Field(DEFAULT_FACT_CONFIDENCE, ge=0, le=1)
    supersedes_id: list[str] = Field(default_factory=list)
    contradiction: Contradiction = Contradiction.NATURAL

    @field_validator("supersedes_id", mode="before")
    @classmethod
    def _optional_ids(cls, value: Any) -> Any:
        if value is None or value == "":
            return []
        return [value] if isinstance(value, str) else value

    @field_validator("contradiction", "fact_type", mode="before")
    @classmethod
    def _null_is_default(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return Contradiction.NATURAL if info.field_name == "contradiction" else FactType.PREFERENCE
        return value


class NewStep(BaseModel):
    model_config = ConfigDict(extra="ignore")

    instruction: str = Field(min_length=1)
    tool: str | None = None


class NewProcedure(_Item):
    name: str = Field(min_length=1, max_length=200)
    trigger_text: str = Field(min_length=1, max_length=2_000)
    steps: list[str | NewStep] = Field(min_length=1)
    confidence: float = Field(DEFAULT_FACT_CONFIDENCE, ge=0, le=1)


class ProceduralUpdate(_Item):
    id: str = Field(min_length=1)
    outcome: Outcome
    refined_steps: list[str | NewStep] | None = None


ITEM_MODELS: dict[str, type[_Item]] = {
    "new_facts": NewFact,
    "new_procedures": NewProcedure,
    "procedural_updates": ProceduralUpdate,
}


@dataclass(frozen=True, slots=True)
class Rejected:
    """An item that was dropped, and why (shown by --dry-run and logged)."""

    section: str
    summary: str
    reason: str


@dataclass(slots=True)
class Answer:
    new_facts: list[NewFact] = field(default_factory=list)
    new_procedures: list[NewProcedure] = field(default_factory=list)
    procedural_updates: list[ProceduralUpdate] = field(default_factory=list)
    invalid: list[Rejected] = field(default_factory=list)


def parse_answer(raw: str) -> Answer:
    """Model text → validated items; raise ``MalformedAnswer`` unless it is one JSON object."""
    payload = _json_object(raw)
    answer = Answer()
    for section, model in ITEM_MODELS.items():
        items = payload.get(section) or []
        if not isinstance(items, list):
            raise MalformedAnswer(f"{section!r} must be a list, got {type(items).__name__}")
        for position, item in enumerate(items, start=1):
            try:
                getattr(answer, section).append(model.model_validate(item))
            except ValidationError as exc:
                reason = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'item'}: {e['msg']}" for e in exc.errors()
                )
                answer.invalid.append(Rejected(section, _summary(item, position), f"invalid: {reason}"))
    return answer


def _json_object(raw: str) -> dict[str, Any]:
    text = (raw or "").strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise MalformedAnswer(f"the answer holds no JSON object: {text[:80]!r}")
    try:
        payload = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise MalformedAnswer(f"the answer is not valid JSON ({exc.msg} at {exc.pos})") from exc
    if not isinstance(payload, dict):
        raise MalformedAnswer("the answer must be a JSON object")
    return payload


def _summary(item: Any, position: int) -> str:
    if isinstance(item, dict):
        for key in ("text", "name", "id"):
            if isinstance(item.get(key), str):
                return str(item[key])[:120]
    return f"item {position}"
