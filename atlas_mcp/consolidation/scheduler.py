"""Background consolidation inside the long-running server; never on a tool call's path.

Every ``poll_seconds`` (or right after a ``write_memory``), each known user is checked: a
user is due when ``after_episodes`` new episodes wait past their watermark, or when the
oldest waiting episode has waited ``every_hours``. Due users are consolidated one at a time,
off the event loop. A failure (the LLM is unreachable, no sampling client is connected, a
malformed answer) is logged, the watermark stays, and the user is retried after a pause.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

import anyio

from ..config_tables import ConsolidationSettings
from ..domain.model import iso
from ..errors import AtlasError
from ..log import get_logger
from .consolidator import Consolidator

LAST_RUN_KEY = "consolidation.last_run"  # when the scheduler last tried this user
RETRY_PAUSE = timedelta(minutes=15)
log = get_logger(__name__)


class ConsolidationScheduler:
    def __init__(
        self,
        consolidator: Consolidator,
        settings: ConsolidationSettings,
        users: Iterable[str] = (),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.consolidator = consolidator
        self.settings = settings
        self.users: set[str] = set(users)
        self.clock = clock or consolidator.service.clock
        self._wake = anyio.Event()

    def note_write(self, user_id: str) -> None:
        """Called (cheaply) after a write_memory: check this user soon, not now."""
        self.users.add(user_id)
        self._wake.set()

    async def run(self) -> None:
        log.info(
            "consolidation_scheduler",
            provider=self.settings.provider,
            every_hours=self.settings.every_hours,
            after_episodes=self.settings.after_episodes,
        )
        while True:
            with anyio.move_on_after(self.settings.poll_seconds):
                await self._wake.wait()
            self._wake = anyio.Event()
            await self.tick()

    async def tick(self) -> list[str]:
        """One pass over the known users; returns who was consolidated."""
        done = []
        for user in sorted(self.users):
            if await anyio.to_thread.run_sync(self.due, user):
                await anyio.to_thread.run_sync(self._mark_run, user)
                try:
                    await self.consolidator.run(user)
                    done.append(user)
                except AtlasError as exc:
                    log.warning("consolidation_failed", user=user, error=str(exc))
        return done

    def _mark_run(self, user_id: str) -> None:
        self.consolidator.service.set_state(user_id, LAST_RUN_KEY, iso(self.clock()))

    def due(self, user_id: str) -> bool:
        batch = self.consolidator.select_batch(user_id)
        if not batch.episodes:
            return False
        enough = len(batch.episodes) >= self.settings.after_episodes or batch.more
        waited = self.clock() - batch.episodes[0].created_at >= timedelta(hours=self.settings.every_hours)
        since_last = self._since_last_run(user_id)
        # after a failed attempt, pause instead of asking the LLM again on every poll
        return (enough or waited) and (since_last is None or since_last >= RETRY_PAUSE)

    def _since_last_run(self, user_id: str) -> timedelta | None:
        last = self.consolidator.service.get_state(user_id, LAST_RUN_KEY)
        return None if last is None else self.clock() - datetime.fromisoformat(last)
