"""What consolidation decided to do with one answer item, before and after doing it.

``--dry-run`` prints these without applying them; a real run applies them one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..domain.model import Contradiction, FactType, Memory, Outcome


def _ids(ids: tuple[str, ...]) -> str:
    return "[" + ", ".join(ids) + "]"


@dataclass(frozen=True, slots=True)
class WriteFact:
    text: str
    fact_type: FactType
    confidence: float
    episodes: tuple[str, ...]
    supersedes: tuple[str, ...] = ()
    contradiction: Contradiction = Contradiction.NATURAL

    def describe(self) -> str:
        line = f'new fact "{self.text}" ({self.fact_type}, {self.confidence:.2f}) from {_ids(self.episodes)}'
        if self.supersedes:
            line += f" superseding {_ids(self.supersedes)} ({self.contradiction})"
        return line


@dataclass(frozen=True, slots=True)
class ReinforceFact:
    fact: Memory
    confidence: float
    episodes: tuple[str, ...]

    def describe(self) -> str:
        return (
            f'reinforce fact {self.fact.id} "{self.fact.text}" '
            f"({self.fact.confidence:.2f} -> {self.confidence:.2f}) with {_ids(self.episodes)}"
        )


@dataclass(frozen=True, slots=True)
class WriteProcedure:
    name: str
    trigger_text: str
    steps: tuple[Any, ...]
    confidence: float
    episodes: tuple[str, ...]

    def describe(self) -> str:
        return f'new playbook "{self.name}" ({len(self.steps)} steps, {self.confidence:.2f}) from {_ids(self.episodes)}'


@dataclass(frozen=True, slots=True)
class MergeProcedure:
    playbook: Memory
    episodes: tuple[str, ...]

    def describe(self) -> str:
        return f'playbook {self.playbook.id} "{self.playbook.name}" already exists: add {_ids(self.episodes)}'


@dataclass(frozen=True, slots=True)
class RecordOutcome:
    playbook: Memory
    outcome: Outcome
    episodes: tuple[str, ...]
    at: datetime
    refined_steps: tuple[Any, ...] | None = None

    def describe(self) -> str:
        line = (
            f'playbook {self.playbook.id} "{self.playbook.name}": {self.outcome} from {_ids(self.episodes)}'
        )
        return line + (
            f", steps refined to {len(self.refined_steps)}" if self.refined_steps is not None else ""
        )


Action = WriteFact | ReinforceFact | WriteProcedure | MergeProcedure | RecordOutcome


@dataclass(frozen=True, slots=True)
class Applied:
    action: Action
    memory_id: str  # the memory written or changed


@dataclass(slots=True)
class BatchReport:
    """One batch: what was read, what was (or, dry, would be) written, what was kept out."""

    user_id: str
    episodes: int = 0
    provider: str = ""
    dry_run: bool = False
    planned: list[Action] = field(default_factory=list)  # dry run
    applied: list[Applied] = field(default_factory=list)
    rejected: list[Any] = field(default_factory=list)  # answer.Rejected
    watermark: datetime | None = None  # after this batch (unchanged on a dry run)
    more: bool = False  # episodes remain past this batch

    def lines(self) -> list[str]:
        if not self.episodes:
            return [f"user {self.user_id}: no new episodes"]
        mode = "dry run, nothing written" if self.dry_run else "applied"
        out = [f"user {self.user_id}: {self.episodes} episodes via {self.provider} ({mode})"]
        out += [f"  would {a.describe()}" for a in self.planned]
        out += [f"  {a.memory_id}: {a.action.describe()}" for a in self.applied]
        out += [f'  kept out {r.section} "{r.summary}": {r.reason}' for r in self.rejected]
        if not self.dry_run and self.watermark is not None:
            out.append(f"  watermark -> {self.watermark.isoformat()}")
        if self.more:
            out.append("  more episodes wait past this batch")
        return out
