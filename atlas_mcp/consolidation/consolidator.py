"""Consolidation: a user's new episodes → durable facts and playbooks, one LLM call per batch.

A batch is the user's episodes created after their watermark, oldest first. The answer's
items pass the guards (provenance, confidence floor, duplicates, supersession targets) and
are applied one by one through the service, so contradictions take exactly the path
``write_memory`` takes. Crash safety and idempotence:

* the validated answer is journalled (``consolidation.pending``) before the first write, so
  a rerun of the same batch reuses it instead of asking the model again;
* every write is recognisable on a rerun: a written fact comes back as a duplicate of itself
  whose episodes are already recorded, a playbook outcome whose episodes are already in the
  playbook's ``source_episodes`` is not counted twice;
* the watermark moves only after every item of the batch has been applied.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import anyio.to_thread

from ..config_tables import ConsolidationSettings
from ..domain import inputs
from ..domain.audit import Actor
from ..domain.limits import Limits
from ..domain.model import Memory, MemoryType, Outcome, iso
from ..domain.multipliers import outcome_changes
from ..domain.ranking import Hit
from ..domain.secrets import find_secrets, redact
from ..errors import AtlasError, BackendUnavailable, ConfigurationError, InvalidInput, NotFound
from ..log import get_logger
from ..service import MemoryService
from .actions import (
    Action,
    Applied,
    BatchReport,
    MergeProcedure,
    RecordOutcome,
    ReinforceFact,
    WriteFact,
    WriteProcedure,
)
from .answer import Answer, NewFact, NewProcedure, ProceduralUpdate, Rejected, parse_answer
from .guards import duplicate_similarity, is_duplicate
from .prompt import Prompt, build_prompt
from .providers import LLMProvider

WATERMARK_KEY = "consolidation.watermark"  # created_at of the newest consolidated episode
PENDING_KEY = "consolidation.pending"  # {"batch": key, "answer": raw} of the batch in flight
REINFORCEMENT_STEP = 0.05  # confidence a fact gains from independent new evidence
DUPLICATE_NEIGHBOURS = 5  # hybrid-recall neighbours the duplicate check looks at
CONTEXT_PER_EPISODE = 10  # recall depth per new episode when gathering existing memories
SOURCE_METADATA = {"source": "consolidation"}

log = get_logger(__name__)
T = TypeVar("T")
Item = NewFact | NewProcedure | ProceduralUpdate


@dataclass(frozen=True, slots=True)
class Batch:
    user_id: str
    episodes: tuple[Memory, ...]
    more: bool

    @property
    def key(self) -> str:
        ids = "\n".join(e.id for e in self.episodes)
        return hashlib.sha256(f"{self.user_id}\n{ids}".encode()).hexdigest()

    @property
    def newest(self) -> datetime:
        return self.episodes[-1].created_at


async def _blocking(call: Callable[..., T], *args: Any) -> T:
    return await anyio.to_thread.run_sync(call, *args)


class Consolidator:
    def __init__(
        self, service: MemoryService, settings: ConsolidationSettings, provider: LLMProvider
    ) -> None:
        self.service = service
        self.settings = settings
        self.provider = provider
        self._actor = Actor("consolidation", f"llm {provider.name}")
        self.threshold = duplicate_similarity(service.info.embedding_model, settings.duplicate_similarity)

    # -- running -----------------------------------------------------------------------

    async def run(self, user_id: str, *, dry_run: bool = False) -> list[BatchReport]:
        """Consolidate every pending batch of ``user_id`` (a dry run looks at the first only)."""
        reports = []
        while True:
            report = await self.run_batch(user_id, dry_run=dry_run)
            reports.append(report)
            if dry_run or not report.more:
                return reports

    async def run_batch(self, user_id: str, *, dry_run: bool = False) -> BatchReport:
        batch = await _blocking(self.select_batch, user_id)
        report = BatchReport(user_id, len(batch.episodes), self.provider.name, dry_run, more=batch.more)
        if not batch.episodes:
            return report
        answer = parse_answer(await self._answer(batch, dry_run))
        report.rejected.extend(answer.invalid)
        await _blocking(self._settle, batch, answer, report)
        log.info(
            "consolidated",
            user=user_id,
            episodes=report.episodes,
            dry_run=dry_run,
            written=len(report.applied),
            kept_out=len(report.rejected),
        )
        return report

    def watermark(self, user_id: str) -> datetime | None:
        return inputs.timestamp(self.service.get_state(user_id, WATERMARK_KEY), "watermark")

    def select_batch(self, user_id: str) -> Batch:
        limit = self.settings.batch_episodes
        found = self.service.list(
            user_id,
            memory_types=["episodic"],
            since=self.watermark(user_id),
            oldest_first=True,
            limit=limit + 1,
        )
        episodes, more = found[:limit], len(found) > limit
        if more:
            # The watermark is a timestamp: never split episodes created at the same instant.
            cut = found[limit].created_at
            whole = [e for e in episodes if e.created_at < cut]
            episodes = whole or episodes
        return Batch(user_id, tuple(episodes), more)

    async def _answer(self, batch: Batch, dry_run: bool) -> str:
        pending = json.loads(self.service.get_state(batch.user_id, PENDING_KEY) or "{}")
        if pending.get("batch") == batch.key:
            answer: str = pending["answer"]  # a crashed or failed run of this very batch: same answer
            return answer
        prompt = await _blocking(self._prompt, batch)
        raw = await self.provider.complete(batch.user_id, prompt)
        parse_answer(raw)  # journal only answers that parse
        if not dry_run:
            journal = json.dumps({"batch": batch.key, "answer": raw}, ensure_ascii=False)
            await _blocking(self.service.set_state, batch.user_id, PENDING_KEY, journal)
        return raw

    def _prompt(self, batch: Batch) -> Prompt:
        facts, playbooks = self._context(batch)
        return build_prompt(batch.episodes, facts, playbooks)

    def _context(self, batch: Batch) -> tuple[list[Memory], list[Memory]]:
        """The user's live facts and playbooks nearest to the new episodes, best first."""
        best: dict[str, tuple[float, Memory]] = {}
        for episode in batch.episodes:
            for hit in self._recall(
                batch.user_id, episode.text, ["semantic", "procedural"], CONTEXT_PER_EPISODE
            ):
                if hit.memory.id not in best or best[hit.memory.id][0] < hit.score:
                    best[hit.memory.id] = (hit.score, hit.memory)
        ranked = [m for _, m in sorted(best.values(), key=lambda sm: -sm[0])]
        facts = [m for m in ranked if m.memory_type is MemoryType.SEMANTIC][: self.settings.context_facts]
        playbooks = [m for m in ranked if m.memory_type is MemoryType.PROCEDURAL]
        return facts, playbooks[: self.settings.context_playbooks]

    def _recall(self, user_id: str, text: str, kinds: list[str], k: int) -> list[Hit]:
        query = text[: self.service.limits.max_query_chars]
        return self.service.recall(user_id, query, k, memory_types=kinds, include_catalog=False, touch=False)

    # -- deciding and applying ---------------------------------------------------------

    def _settle(self, batch: Batch, answer: Answer, report: BatchReport) -> None:
        user = batch.user_id
        items: list[tuple[str, Item]] = [
            *(("new_facts", i) for i in answer.new_facts),
            *(("new_procedures", i) for i in answer.new_procedures),
            *(("procedural_updates", i) for i in answer.procedural_updates),
        ]
        own = self._own_episodes(user, [e for _, i in items for e in i.supporting_episode_ids])
        for section, item in items:
            decision = self._decide(user, section, item, own)
            if isinstance(decision, Rejected):
                report.rejected.append(decision)
            elif report.dry_run:
                report.planned.append(decision)
            else:
                self._apply_one(user, section, item, decision, report)
        if not report.dry_run:
            self.service.set_state(user, WATERMARK_KEY, iso(batch.newest))
            self.service.set_state(user, PENDING_KEY, None)
            report.watermark = batch.newest

    def _apply_one(self, user: str, section: str, item: Item, action: Action, report: BatchReport) -> None:
        try:
            report.applied.append(Applied(action, self._apply(user, action)))
        except (BackendUnavailable, ConfigurationError):
            raise  # the store is down or misconfigured: stop, keep the watermark, rerun later
        except AtlasError as exc:  # the store changed under us (e.g. a target got superseded)
            report.rejected.append(Rejected(section, _summary(item), str(exc)))

    def _own_episodes(self, user: str, ids: Sequence[str]) -> dict[str, Memory]:
        wanted = list(dict.fromkeys(i for i in ids if isinstance(i, str)))
        found = self.service.get_many(user, wanted)
        return {m.id: m for m in found if m.memory_type is MemoryType.EPISODIC and m.user_id == user}

    def _decide(self, user: str, section: str, item: Item, own: dict[str, Memory]) -> Action | Rejected:
        episodes = tuple(dict.fromkeys(item.supporting_episode_ids))
        if not episodes:
            return Rejected(
                section, _summary(item), "no supporting episode ids: nothing the user said backs it"
            )
        strangers = [e for e in episodes if e not in own]
        if strangers:
            return Rejected(
                section,
                _summary(item),
                f"cites ids that are not this user's episodes: {', '.join(strangers[:3])}",
            )
        try:
            if isinstance(item, NewFact):
                return self._decide_fact(user, item, episodes)
            if isinstance(item, NewProcedure):
                return self._decide_procedure(user, item, episodes)
            return self._decide_outcome(user, item, episodes, own)
        except AtlasError as exc:
            return Rejected(section, _summary(item), str(exc))

    def _decide_fact(self, user: str, fact: NewFact, episodes: tuple[str, ...]) -> Action | Rejected:
        if fact.confidence < self.settings.min_fact_confidence:
            return Rejected("new_facts", fact.text, f"confidence {fact.confidence} is below the floor")
        targets = inputs.memory_ids(fact.supersedes_id, self.service.limits)
        twin = self._duplicate(user, fact.text, "semantic", exclude=set(targets))
        if twin is not None:
            if set(episodes) <= set(twin.source_episodes):
                return Rejected("new_facts", fact.text, f"already recorded as {twin.id}")
            confidence = max(fact.confidence, min(1.0, (twin.confidence or 0.0) + REINFORCEMENT_STEP))
            return ReinforceFact(twin, round(confidence, 6), episodes)
        if targets:
            self.service.check_supersession(user, MemoryType.SEMANTIC, targets)
        return WriteFact(
            inputs.clean_text(fact.text, "text", self.service.limits.max_text_chars),
            fact.fact_type,
            fact.confidence,
            episodes,
            targets,
            fact.contradiction,
        )

    def _decide_procedure(
        self, user: str, proc: NewProcedure, episodes: tuple[str, ...]
    ) -> Action | Rejected:
        if proc.confidence < self.settings.min_procedure_confidence:
            return Rejected("new_procedures", proc.name, f"confidence {proc.confidence} is below the floor")
        steps = inputs.steps([_step(s) for s in proc.steps], self.service.limits)
        probe = Memory(
            "probe", MemoryType.PROCEDURAL, user, proc.trigger_text, datetime.min, name=proc.name, steps=steps
        )
        twin = self._duplicate(user, probe.search_text(), "procedural", exclude=set())
        if twin is not None:
            if set(episodes) <= set(twin.source_episodes):
                return Rejected("new_procedures", proc.name, f"already recorded as {twin.id}")
            return MergeProcedure(twin, episodes)
        raw_steps = tuple(s.to_dict() for s in steps)
        return WriteProcedure(proc.name, proc.trigger_text, raw_steps, proc.confidence, episodes)

    def _decide_outcome(
        self, user: str, update: ProceduralUpdate, episodes: tuple[str, ...], own: dict[str, Memory]
    ) -> Action | Rejected:
        try:
            playbook = self.service.live_playbook(user, update.id)
        except (NotFound, InvalidInput):
            return Rejected("procedural_updates", update.id, "not one of this user's live playbooks")
        if set(episodes) <= set(playbook.source_episodes):
            return Rejected("procedural_updates", update.id, "this outcome is already counted")
        refined = None
        if update.refined_steps is not None:
            steps = inputs.steps([_step(s) for s in update.refined_steps], self.service.limits)
            refined = tuple(s.to_dict() for s in steps)
        at = max(own[e].timeline_at for e in episodes)
        return RecordOutcome(playbook, update.outcome, episodes, at, refined)

    def _duplicate(self, user: str, text: str, kind: str, exclude: set[str]) -> Memory | None:
        for hit in self._recall(user, text, [kind], DUPLICATE_NEIGHBOURS):
            if hit.memory.id in exclude:
                continue
            other = hit.memory.text if kind == "semantic" else hit.memory.search_text()
            if is_duplicate(text, other, hit.explanation.dense_similarity, self.threshold):
                return hit.memory
        return None

    def _apply(self, user: str, action: Action) -> str:
        if isinstance(action, WriteFact):
            return self.service.write(
                user,
                action.text,
                "semantic",
                supersedes_id=list(action.supersedes) or None,
                contradiction=action.contradiction,
                confidence=action.confidence,
                fact_type=action.fact_type,
                source_episodes=action.episodes,
                metadata=SOURCE_METADATA,
                actor=self._actor,
            ).id
        if isinstance(action, WriteProcedure):
            return self.service.write(
                user,
                action.trigger_text,
                "procedural",
                name=action.name,
                steps=list(action.steps),
                confidence=action.confidence,
                source_episodes=action.episodes,
                metadata=SOURCE_METADATA,
                actor=self._actor,
            ).id
        current = self.service.get(user, _target(action).id, include_catalog=False)  # fresh counts
        changes: dict[str, Any] = {
            "source_episodes": tuple(dict.fromkeys((*current.source_episodes, *action.episodes)))
        }
        if isinstance(action, ReinforceFact):
            changes |= {"confidence": action.confidence, "last_used_at": self.service.clock()}
        elif isinstance(action, RecordOutcome):
            changes |= _outcome_changes(current, action, self.service.limits)
        self.service.update(user, current.evolve(**changes), self._actor)
        return current.id


def _outcome_changes(playbook: Memory, action: RecordOutcome, limits: Limits) -> dict[str, Any]:
    changes: dict[str, Any] = outcome_changes(playbook, action.outcome is Outcome.SUCCESS, action.at)
    if action.refined_steps is not None:
        changes["steps"] = inputs.steps(list(action.refined_steps), limits)
    return changes


def _target(action: ReinforceFact | MergeProcedure | RecordOutcome) -> Memory:
    if isinstance(action, ReinforceFact):
        return action.fact
    return action.playbook  # MergeProcedure, RecordOutcome


def _step(step: Any) -> Any:
    return step if isinstance(step, str) else step.model_dump(exclude_none=True)


def _summary(item: Item) -> str:
    """How a dropped item is named in the report and the log: a credential the model repeated
    (and the guard refused) is never echoed there."""
    if isinstance(item, NewFact):
        text = item.text
    else:
        text = item.name if isinstance(item, NewProcedure) else item.id
    return redact(text, find_secrets(text))
