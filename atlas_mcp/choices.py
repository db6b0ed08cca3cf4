"""A closed set of values as a pydantic type, declared by the enum (or tuple) that owns it.

``Annotated[FactType, OneOf(*FactType)]`` validates and describes exactly as
``Literal["preference", "identity", ...]`` would (the JSON schema lists the values inline, a
wrong value is refused as "must be 'preference', 'identity', ..."), but the values are written
once, where the domain declares them, and the validated value is the enum member. A subset
(``OneOf(*USER_MEMORY_TYPES)``) narrows what one surface accepts.
"""

from __future__ import annotations

from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema


class OneOf:
    """pydantic metadata: the value must be one of ``members`` (strings or string enum members)."""

    def __init__(self, *members: str) -> None:
        self.members = {str(m): m for m in members}

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # A literal schema inside (not the enum's own, which JSON schema renders as a $ref):
        # the schema and the error read as a Literal's; the result is the declared member.
        return core_schema.no_info_after_validator_function(
            self.members.__getitem__, core_schema.literal_schema(list(self.members))
        )
