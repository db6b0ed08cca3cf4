"""The ``sampling`` provider: ask the connected client's model, through MCP.

A server middleware notes, per user, the latest session whose client declared the sampling
capability. The background scheduler later sends ``sampling/createMessage`` on that
connection's standalone channel — never inside a tool call. Connections on the 2026-07-28
protocol have no server-initiated requests outside a request, so for them (and for users with
no connected client) the provider reports itself unavailable and the batch simply waits.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning

from ..caller import SCOPE_GRANT_KEY
from ..config_tables import ConsolidationSettings
from ..log import get_logger
from .prompt import Prompt
from .providers import ProviderUnavailable

log = get_logger(__name__)


class SamplingSessions:
    """Per user, the latest connected session able to sample (weakly: a closed one is dropped)."""

    def __init__(self) -> None:
        self._sessions: dict[str, ServerSession] = {}

    def note(self, user_id: str, session: ServerSession) -> None:
        capabilities = session.client_capabilities
        if capabilities is not None and capabilities.sampling is not None:
            self._sessions[user_id] = session

    def session_for(self, user_id: str) -> ServerSession | None:
        return self._sessions.get(user_id)

    def forget(self, user_id: str, session: ServerSession) -> None:
        if self._sessions.get(user_id) is session:
            del self._sessions[user_id]


class SessionTracker:
    """Server middleware: remember sampling-capable sessions, and tell the scheduler of writes."""

    def __init__(
        self, sessions: SamplingSessions, stdio_user: str, on_write: Callable[[str], None] | None = None
    ) -> None:
        self.sessions = sessions
        self.stdio_user = stdio_user
        self.on_write = on_write

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.request_id is None or ctx.method == "initialize":
            return result
        user = self._user(ctx)
        if user is not None:
            self.sessions.note(user, ctx.session)
            if (
                self.on_write
                and ctx.method == "tools/call"
                and (ctx.params or {}).get("name") == "write_memory"
            ):
                self.on_write(user)
        return result

    def _user(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """The user whose memories this session's model may consolidate: its credential must
        hold ``write``, as consolidation writes (a read-only client never shapes memories)."""
        request = ctx.request
        if request is None:
            return self.stdio_user
        scope = getattr(request, "scope", None) or {}
        grant = scope.get(SCOPE_GRANT_KEY)
        return grant.user if grant is not None and grant.allows("write") else None


class SamplingProvider:
    name = "sampling"

    def __init__(self, sessions: SamplingSessions, settings: ConsolidationSettings) -> None:
        self.sessions = sessions
        self.settings = settings

    async def complete(self, user_id: str, prompt: Prompt) -> str:
        session = self.sessions.session_for(user_id)
        if session is None:
            raise ProviderUnavailable(f"sampling: no connected client of {user_id!r} offers sampling")
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt.user))
        try:
            with anyio.fail_after(self.settings.timeout_s), warnings.catch_warnings():
                # Deprecated from protocol 2026-07-28 on; still how handshake-era clients sample.
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                result = await session.create_message(
                    [message],
                    max_tokens=self.settings.max_tokens,
                    system_prompt=prompt.system,
                    temperature=0,
                    metadata={"purpose": "atlas-mcp consolidation"},
                )
        except Exception as exc:  # a closed stream, a refusal, a timeout: all mean "not now"
            self.sessions.forget(user_id, session)
            raise ProviderUnavailable(
                f"sampling: the client did not answer ({type(exc).__name__}: {exc})"
            ) from exc
        content = result.content
        if not isinstance(content, types.TextContent):
            raise ProviderUnavailable(f"sampling: expected text, got {type(content).__name__}")
        return content.text
