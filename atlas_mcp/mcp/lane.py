"""recall_memory's own ``tools/call`` handler: the same tool, without the SDK's generic tool layers.

Recall is the call an agent makes every turn. The SDK's handler runs any tool through layers a
recall does not need: a ``Context`` object, three ``call_tool`` wrappers, ``Tool.run`` and, once
the tool has returned, a second validation of the result against the output model the tool has
already validated it against (``results.as_result``). This handler takes ``recall_memory`` calls
straight to the tool's body; every other call, and a recall whose arguments the SDK would refuse
(unknown names, a wrong value, no caller), goes to the SDK's handler, which answers it as before.
What it returns is the tool's own result in its wire form (a dict, so the SDK neither builds nor
dumps a ``CallToolResult`` of it), sieved and stamped by the SDK as any handler's result, so the
reply is the same bytes.

The arguments are validated by a model the SDK builds from the same function as the one it
publishes (``func_metadata``), with its own leniencies (a JSON list passed as a string).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, CallToolResult, TextContent

from ..log import get_logger
from ..scopes import Grant
from .arguments import unknown_arguments
from .identity import request_grant
from .results import as_wire

if TYPE_CHECKING:
    from .tools import MemoryTools

log = get_logger(__name__)
TOOL = "recall_memory"


def install_recall_lane(
    server: MCPServer, tools: MemoryTools, recall: Callable[..., Awaitable[Any]], stdio: Grant
) -> bool:
    """Answer ``recall_memory`` calls on ``server`` with ``tools.recall_for``; ``recall`` is the
    function registered as the tool (its signature is the tool's arguments). False, and the SDK
    keeps every call, on an SDK without the low-level server this relies on."""
    lowlevel = getattr(server, "_lowlevel_server", None)
    generic = lowlevel.get_request_handler("tools/call") if lowlevel is not None else None
    if lowlevel is None or generic is None:
        return False
    lane = _RecallLane(generic.handler, tools, func_metadata(recall, skip_names=["ctx"]), stdio)
    lowlevel.add_request_handler("tools/call", generic.params_type, lane)
    return True


class _RecallLane:
    def __init__(self, generic: Any, tools: MemoryTools, metadata: FuncMetadata, stdio: Grant) -> None:
        self._generic = generic  # the SDK's handler: every call this one does not take
        self._tools = tools
        self._metadata = metadata
        self._known = tuple(metadata.arg_model.model_fields)
        self._stdio = stdio

    async def __call__(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> Any:
        if params.name != TOOL:
            return await self._generic(ctx, params)
        arguments = params.arguments or {}
        grant = request_grant(ctx.request, self._stdio)
        if grant is None or unknown_arguments(TOOL, arguments, self._known) is not None:
            return await self._generic(ctx, params)  # the SDK's path words the refusal
        try:
            validated = self._metadata.validate_arguments(arguments)
        except Exception:  # noqa: BLE001 - refused or not, the SDK's path answers it in its words
            return await self._generic(ctx, params)
        try:
            return as_wire(await self._tools.recall_for(grant.user, **validated))
        except MCPError:
            raise  # a protocol error, as the SDK lets it through
        except ToolError as exc:  # the tool's own refusal (a domain error), in the SDK's words
            return _failed(f"Error executing tool {TOOL}: {exc}")
        except Exception:
            log.exception("tool_crashed", tool=TOOL)
            return _failed(f"Error executing tool {TOOL}")  # the crash's text stays here


def _failed(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
