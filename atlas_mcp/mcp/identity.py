"""Who is calling: taken from the transport, never from tool arguments."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

SCOPE_USER_KEY = "atlas.user"  # set on the ASGI scope by the HTTP auth middleware


def principal(ctx: Context, stdio_user: str) -> str:
    """The user of this request: the verified bearer token's user over HTTP, else the stdio user."""
    user = caller(ctx.request_context.request, stdio_user)
    if user is None:
        # The middleware rejects unauthenticated requests; reaching here is a wiring bug.
        raise ToolError("request is not authenticated")
    return user


def caller(request: Any, stdio_user: str) -> str | None:
    """Who sent ``request`` (an HTTP request, or None over stdio); None if nobody was verified."""
    if request is None:
        return stdio_user
    return request.scope.get(SCOPE_USER_KEY) or None
