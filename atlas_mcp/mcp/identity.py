"""Who is calling: taken from the transport, never from tool arguments."""

from __future__ import annotations

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

SCOPE_USER_KEY = "atlas.user"  # set on the ASGI scope by the HTTP auth middleware


def principal(ctx: Context, stdio_user: str) -> str:
    """The user of this request: the verified bearer token's user over HTTP, else the stdio user."""
    request = ctx.request_context.request
    if request is None:
        return stdio_user
    user = request.scope.get(SCOPE_USER_KEY)
    if not user:
        # The middleware rejects unauthenticated requests; reaching here is a wiring bug.
        raise ToolError("request is not authenticated")
    return user
