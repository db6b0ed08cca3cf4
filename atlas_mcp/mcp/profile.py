"""The core profile in MCP: in each session's ``instructions`` and as the ``atlas://profile`` resource.

Instructions are answered per connection, for the user the transport names (the stdio user,
or the user whose bearer token opened the HTTP session): the SDK leaves ``initialize`` to its
runner and offers middleware to wrap it, so a middleware appends the caller's profile to the
server-wide rules (and to ``server/discover``, the same answer in the stateless protocol).
The same middleware records the caller for the duration of each request, which is how the
resource, a static one the SDK reads without a request context, knows whose profile to return.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from functools import partial
from typing import Any

import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from pydantic import BaseModel

from ..domain.model import Memory
from ..domain.profile import ProfilePolicy, render
from ..scopes import Grant
from ..service import MemoryService
from .identity import reader

PROFILE_URI = "atlas://profile"
INTRODUCING = frozenset({"initialize", "server/discover"})  # the answers that carry instructions
_caller: ContextVar[str | None] = ContextVar("atlas_profile_caller", default=None)


def install_profile(server: MCPServer, service: MemoryService, stdio: Grant, policy: ProfilePolicy) -> None:
    """Give each session its user's profile, unless the settings turned it off; only to a
    credential that may recall (the profile is memories)."""
    if not policy.enabled:
        return
    profile_of = partial(service.profile, policy=policy)
    server.middleware.append(ProfileMiddleware(profile_of, stdio))

    @server.resource(
        PROFILE_URI,
        name="profile",
        title="Core profile",
        description="The key facts stored about you: identity, constraints and most-used preferences "
        "(current ones; the same text the session's instructions end with).",
        mime_type="text/markdown",
    )
    async def read_profile() -> str:
        user = _caller.get()
        if user is None:
            raise ResourceError("request is not authenticated")
        return render(await anyio.to_thread.run_sync(profile_of, user))


class ProfileMiddleware:
    """Appends the caller's profile to the instructions (nothing while they have no key facts)."""

    def __init__(self, profile_of: Callable[[str], list[Memory]], stdio: Grant) -> None:
        self._profile_of = profile_of
        self._stdio = stdio

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        user = reader(ctx.request, self._stdio)
        token = _caller.set(user)
        try:
            result = await call_next(ctx)
        finally:
            _caller.reset(token)
        if ctx.method not in INTRODUCING or user is None or result is None:
            return result
        wire = (
            result.model_dump(by_alias=True, mode="json", exclude_none=True)
            if isinstance(result, BaseModel)
            else dict(result)
        )
        facts = await anyio.to_thread.run_sync(self._profile_of, user)
        if not facts:
            return result
        rules = (wire.get("instructions") or "").rstrip()
        return wire | {"instructions": f"{rules}\n\n{render(facts)}" if rules else render(facts)}
