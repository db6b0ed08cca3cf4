"""Documented input limits, enforced by the service with messages a model can act on."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Overridable through the ``[limits]`` settings table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_text_chars: int = Field(32_000, ge=1, description="longest memory text")
    max_query_chars: int = Field(4_000, ge=1, description="longest recall query")
    max_k: int = Field(100, ge=1, description="most memories one recall returns")
    max_steps: int = Field(50, ge=1, description="most steps in one playbook")
    max_supersedes: int = Field(50, ge=1, description="most ids one write may supersede")
    max_metadata_bytes: int = Field(16_384, ge=2, description="largest metadata object, as JSON")
