"""Scopes on the MCP wire: a credential sees only the tools it may use, and calling another is refused.

One server middleware does both for every transport, so ``tools/list`` and ``tools/call`` cannot
disagree: over HTTP the grant is the one the bearer middleware put on this very request; over
stdio it is the configured user's (``user_scopes``). Resources that show memories need the
``recall`` scope, as reading them is recalling.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, CallToolResult, ListToolsResult, TextContent

from ..log import get_logger
from ..scopes import Grant
from .identity import request_grant

log = get_logger(__name__)
READING_METHODS = frozenset({"resources/read"})  # a memory shown is a memory recalled


class ScopeGate:
    """Server middleware: filter ``tools/list``, refuse calls outside the caller's scopes."""

    def __init__(self, stdio: Grant) -> None:
        self.stdio = stdio

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        grant = request_grant(ctx.request, self.stdio)
        if grant is None:  # not authenticated: the HTTP middleware answers 401 before this
            return await call_next(ctx)
        if ctx.method == "tools/call":
            tool = (ctx.params or {}).get("name")
            if isinstance(tool, str) and not grant.allows_tool(tool):
                log.info("tool_refused_by_scope", tool=tool, credential=grant.credential)
                return CallToolResult(
                    content=[TextContent(type="text", text=grant.refusal(tool))], is_error=True
                )
        if ctx.method in READING_METHODS and not grant.allows("recall"):
            raise MCPError(code=INVALID_REQUEST, message="reading memories needs the 'recall' scope")
        result = await call_next(ctx)
        if ctx.method == "tools/list":
            return _listed(result, grant)
        return result


def _listed(result: HandlerResult, grant: Grant) -> HandlerResult:
    """A tools/list result without the tools ``grant`` may not use (the runner hands a
    serialized dict to middleware; a model is handled too)."""
    if isinstance(result, ListToolsResult):
        return result.model_copy(update={"tools": [t for t in result.tools if grant.allows_tool(t.name)]})
    if isinstance(result, dict) and isinstance(result.get("tools"), list):
        return result | {"tools": [t for t in result["tools"] if grant.allows_tool(str(_name(t)))]}
    return result


def _name(tool: Any) -> Any:
    return tool.get("name") if isinstance(tool, dict) else getattr(tool, "name", None)
