"""Who is calling and what they may do: taken from the transport, never from tool arguments."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from ..caller import SCOPE_GRANT_KEY
from ..scopes import Grant


def request_grant(request: Any, stdio: Grant) -> Grant | None:
    """The grant of one inbound message: the verified credential's over HTTP, else the stdio
    user's. None when an HTTP request carries none (the middleware never lets that through)."""
    if request is None:
        return stdio
    scope = getattr(request, "scope", None) or {}
    return scope.get(SCOPE_GRANT_KEY)


def reader(request: Any, stdio: Grant) -> str | None:
    """The user whose memories ``request`` may read (its credential holds ``recall``), or None."""
    grant = request_grant(request, stdio)
    return grant.user if grant is not None and grant.allows("recall") else None


def calling(ctx: Context, stdio: Grant) -> Grant:
    """The grant of this tool call."""
    grant = request_grant(ctx.request_context.request, stdio)
    if grant is None:
        # The middleware rejects unauthenticated requests; reaching here is a wiring bug.
        raise ToolError("request is not authenticated")
    return grant


def principal(ctx: Context, stdio: Grant) -> str:
    """The user of this request: the verified bearer token's user over HTTP, else the stdio user."""
    return calling(ctx, stdio).user
