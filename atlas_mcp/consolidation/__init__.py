"""Consolidation: episodes → semantic facts and procedural playbooks, with provenance.

``Consolidator`` runs one batch per LLM call (``atlas-mcp consolidate``), and
``server_scheduler`` wires the background schedule into the long-running HTTP server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..log import get_logger
from .consolidator import Consolidator
from .providers import LLMProvider, ProviderUnavailable, open_provider
from .scheduler import ConsolidationScheduler

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ..config import Settings
    from ..service import MemoryService

__all__ = [
    "ConsolidationScheduler",
    "Consolidator",
    "LLMProvider",
    "ProviderUnavailable",
    "open_provider",
    "server_scheduler",
]
log = get_logger(__name__)


def server_scheduler(
    server: MCPServer, service: MemoryService, settings: Settings, provider: LLMProvider | None = None
) -> ConsolidationScheduler | None:
    """The scheduler for a serving process (None, and a log line saying so, when off).

    Registers a middleware that remembers sampling-capable client sessions per user and
    wakes the scheduler after a ``write_memory``; the caller runs ``scheduler.run()``.
    """
    from .sampling import SamplingSessions, SessionTracker

    config = settings.consolidation
    if config.provider is None and provider is None:
        log.info("consolidation_off", reason="no [consolidation] provider configured")
        return None
    sessions = SamplingSessions()
    provider = provider or open_provider(config, sessions=sessions)
    scheduler = ConsolidationScheduler(Consolidator(service, config, provider), config, users=settings.users)
    server.middleware.append(SessionTracker(sessions, settings.user, scheduler.note_write))
    return scheduler
