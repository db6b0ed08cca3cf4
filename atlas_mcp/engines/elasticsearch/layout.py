"""Index names: a versioned concrete index behind a stable alias, one pair per memory type.

Everything the engine sends addresses the alias (``atlas-semantic``); only bootstrap names
the concrete index (``atlas-semantic-v3``). A mapping change ships as the next version plus an
alias swap (``bootstrap --migrate``, ``migration``), never as an in-place edit. Painless sees
concrete names, so it matches their stem.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...domain.model import MemoryType

INDEX_VERSION = 3  # the mappings' version: every change to them is a new one (`migration`)
ALL_TYPES: tuple[MemoryType, ...] = tuple(MemoryType)


@dataclass(frozen=True, slots=True)
class IndexLayout:
    prefix: str = "atlas"
    version: int = INDEX_VERSION

    def alias(self, kind: MemoryType) -> str:
        return f"{self.prefix}-{kind.value}"

    def concrete(self, kind: MemoryType) -> str:
        return f"{self.stem(kind)}{self.version}"

    def stem(self, kind: MemoryType) -> str:
        """What every concrete index of ``kind`` starts with, whatever its version."""
        return f"{self.alias(kind)}-v"

    def patterns(self, kind: MemoryType) -> tuple[str, str]:
        """Alias and concrete indices of ``kind`` (any version): what a DLS key is granted. Not
        ``<alias>*``: that also names the indices of a deployment whose prefix extends this one's
        (``atlas`` and ``atlas-semantic``)."""
        return self.alias(kind), f"{self.stem(kind)}*"

    def aliases(self, kinds: frozenset[MemoryType] | tuple[MemoryType, ...]) -> list[str]:
        """Aliases of ``kinds`` in a fixed order, so request paths are deterministic."""
        return [self.alias(k) for k in ALL_TYPES if k in kinds]

    @property
    def state_alias(self) -> str:
        """Per-user bookkeeping (e.g. the consolidation watermark): writer-only, no DLS key reads it."""
        return f"{self.prefix}-state"

    @property
    def state_concrete(self) -> str:
        return f"{self.state_alias}-v{self.version}"
