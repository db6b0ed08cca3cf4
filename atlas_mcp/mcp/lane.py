"""recall_memory's own lane through the server: the same tool and the same reply, without the
SDK's generic request and tool layers.

Recall is the call an agent makes every turn. The SDK takes any request through layers a recall
does not need: a second validation of its params, a ``Context`` object, three ``call_tool``
wrappers, ``Tool.run``, a second validation of the result against the output model the tool has
already validated it against (``results.recall_shaped``), and a validation and dump of the whole
reply against the protocol's result model (the "sieve"). This middleware, the innermost (every
other middleware, the SDK's and ours, still sees the call), takes a ``tools/call`` of
``recall_memory`` straight to the tool's body and writes the reply in the wire form the sieve
gives a tool result in that protocol version, read once per version from the sieve itself.
The same answer is asked for by the outermost middleware (``ahead.py``) when every layer in
between would only pass the recall on.

Whatever it cannot answer exactly as the SDK would goes on to the SDK: other methods and tools,
a request the protocol's validation refuses, a connection not yet initialized, a recall whose
arguments the SDK would refuse (unknown names, a wrong value, no caller), and every call on a
server with cache hints on ``tools/call`` or with extensions. A recall that fails is shaped by the SDK's own serializer. The arguments
are validated by the model the SDK builds from the same function it publishes (``func_metadata``).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp.shared.exceptions import MCPError
from mcp_types import SERVER_INFO_META_KEY, CallToolResult, TextContent
from mcp_types.methods import serialize_server_result, validate_client_request
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..log import get_logger
from ..scopes import Grant
from ..uses import Use
from .ahead import Ahead, Call
from .arguments import unknown_arguments
from .identity import request_grant
from .results import RESULT_DEFAULTS

if TYPE_CHECKING:
    from .tools import MemoryTools

log = get_logger(__name__)
TOOL = "recall_memory"
METHOD = "tools/call"
_TEXT = "\x00text"  # stand-ins in the probe a version's reply form is read from
_PAYLOAD = {"\x00": "payload"}


def install_recall_lane(
    server: MCPServer, tools: MemoryTools, recall: Callable[..., Awaitable[Any]], stdio: Grant
) -> bool:
    """Add the lane as ``server``'s innermost middleware (call it after every other middleware
    is added); ``recall`` is the function registered as the tool (its signature is the tool's
    arguments). False, and the SDK answers every call, on an SDK without the low-level server
    whose identity the 2026 replies are stamped with, with cache hints on ``tools/call``, or
    with extensions (one may intercept ``tools/call``, below the middleware)."""
    lowlevel = getattr(server, "_lowlevel_server", None)
    if (
        lowlevel is None
        or METHOD in getattr(lowlevel, "cache_hints", {METHOD: None})
        or getattr(server, "_extensions", None) != []
    ):
        return False
    metadata = func_metadata(recall, skip_names=["ctx"])
    lane = _RecallLane(tools, metadata, stdio, lowlevel.server_info_stamp)
    server.middleware.append(lane)
    server.middleware.insert(0, Ahead(lane, server.middleware, TOOL))
    return True


@dataclass(frozen=True, slots=True)
class Prepared:
    """A recall the lane answers: the protocol version, the caller and the validated arguments."""

    version: str
    user: str
    arguments: dict[str, Any]


class _RecallLane:
    def __init__(
        self, tools: MemoryTools, metadata: FuncMetadata, stdio: Grant, stamp: dict[str, Any]
    ) -> None:
        self._tools = tools
        self._metadata = metadata
        self._known = tuple(metadata.arg_model.model_fields)
        self._stdio = stdio
        self._stamp = stamp  # the server's identity, stamped on 2026 replies
        self._forms: dict[str, dict[str, Any]] = {}  # per protocol version: a tool result's wire form

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        reply = await self.answer(ctx)
        return await call_next(ctx) if reply is None else reply

    async def answer(self, ctx: Call) -> dict[str, Any] | None:
        """The reply to ``ctx``, or None (before anything is run) where the SDK answers."""
        prepared = self.prepare(ctx)
        return None if prepared is None else await self.run(prepared)

    def prepare(self, ctx: Call) -> Prepared | None:
        """The recall ``ctx`` asks for, its arguments validated; None where the SDK answers.
        Runs nothing: a recall it declines is answered by the SDK as if never looked at."""
        params = ctx.params
        if ctx.method != METHOD or not isinstance(params, Mapping) or params.get("name") != TOOL:
            return None
        version = ctx.protocol_version
        arguments = params.get("arguments") or {}
        grant = request_grant(ctx.request, self._stdio)
        if (
            not isinstance(arguments, Mapping)
            or grant is None
            or not (version in MODERN_PROTOCOL_VERSIONS or ctx.session.client_params is not None)
            or unknown_arguments(TOOL, arguments, self._known) is not None
        ):
            return None  # the SDK's path answers, or words the refusal
        try:
            validate_client_request(METHOD, version, params)
            validated = self._metadata.validate_arguments(dict(arguments))
        except Exception:  # noqa: BLE001 - refused or not, the SDK's path answers it in its words
            return None
        return Prepared(version, grant.user, validated)

    async def run(self, prepared: Prepared, uses_after: list[Use] | None = None) -> dict[str, Any]:
        """The reply to a recall ``prepare`` accepted: a result, or the tool's error result
        (``uses_after``: as ``MemoryService.recall``'s)."""
        version = prepared.version
        try:
            payload, text = await self._tools.recall_for(
                prepared.user, **prepared.arguments, uses_after=uses_after
            )
        except MCPError:
            raise  # a protocol error, as the SDK lets it through
        except ToolError as exc:  # the tool's own refusal (a domain error), in the SDK's words
            return self._serialized(version, _failed(f"Error executing tool {TOOL}: {exc}"))
        except Exception:
            log.exception("tool_crashed", tool=TOOL)
            return self._serialized(version, _failed(f"Error executing tool {TOOL}"))  # text stays here
        return self._reply(version, text, payload)

    def _reply(self, version: str, text: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The sieve's form of a tool result in ``version``, with this text and payload."""
        form = self._forms.get(version)
        if form is None:
            probe = RESULT_DEFAULTS | {
                "content": [{"type": "text", "text": _TEXT}],
                "structuredContent": _PAYLOAD,
            }
            form = self._forms[version] = self._serialized(version, probe)
        reply = dict(form)
        reply["content"] = [
            {k: text if v == _TEXT else v for k, v in block.items()} for block in form["content"]
        ]
        reply["structuredContent"] = payload
        if "_meta" in form:
            reply["_meta"] = copy.deepcopy(form["_meta"])  # the reply's own, as the SDK stamps each
        return reply

    def _serialized(self, version: str, result: CallToolResult | dict[str, Any]) -> dict[str, Any]:
        """What the SDK's runner makes of a handler's result (``ServerRunner._serialize``)."""
        dumped = (
            result.model_dump(by_alias=True, mode="json", exclude_none=True)
            if isinstance(result, CallToolResult)
            else result
        )
        wire = serialize_server_result(METHOD, version, dumped)
        if version in MODERN_PROTOCOL_VERSIONS:
            wire.setdefault("resultType", "complete")
            wire["_meta"] = {SERVER_INFO_META_KEY: copy.deepcopy(self._stamp)}
        return wire


def _failed(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
