"""The recall lane's answer given ahead of the middleware that would only pass a recall on.

The lane (``lane.py``) is the innermost middleware, so a recall first passes through every
other layer: the SDK's OpenTelemetry span and request-state boundary, our scope gate and our
profile middleware. For most recalls each of them only hands the call on and the result back,
at the cost of a coroutine, a context and (for the span) a tracer look-up, an attribute dict and
a context attach per layer (0.04-0.12 ms of event-loop CPU per recall, 0.1 on average, on this
machine). ``Ahead`` is the outermost middleware: when every layer between it and the lane would
pass this very call through untouched, it asks the lane for the reply itself; otherwise the
call takes the chain.

A layer passes a ``tools/call`` of the lane's tool through untouched when:
- the OpenTelemetry span records nothing and carries no context: no tracer provider is set
  (the SDK's tracer is the API's proxy) and the request's ``_meta`` holds no key outside the
  protocol's reserved ones, so no trace context or baggage is extracted from it;
- the request-state boundary has no ``requestState`` to unseal (it seals only input-required
  results, which a recall never returns);
- the scope gate's grant allows the tool (the gate only refuses and filters lists);
- the profile middleware always (it adds the profile to ``initialize`` and ``server/discover``
  only; the caller it records is read only by the profile resource).
Any other layer, or one of these that would act, sends the call down the chain, where the
lane answers it as before. Layers after the lane never see a recall the lane answers, either way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary
from opentelemetry.trace import ProxyTracerProvider, get_tracer_provider

from .access import ScopeGate
from .identity import request_grant
from .profile import ProfileMiddleware

if TYPE_CHECKING:
    from ..uses import Use
    from .lane import Prepared

Context = ServerRequestContext[Any, Any]
# Set while a stdio connection is served beside the dispatcher (``beside.py``): told the
# session of each call the middleware sees, the connection's handshake state read from it.
NOTED: ContextVar[Callable[[Any], None] | None] = ContextVar("atlas_noted_session", default=None)


class Call(Protocol):
    """What the layers' checks and the lane read of a request: the SDK's request context, or
    the stdio reader's stand-in for one (``beside.py``)."""

    @property
    def method(self) -> str: ...
    @property
    def params(self) -> Mapping[str, Any] | None: ...
    @property
    def protocol_version(self) -> str: ...
    @property
    def request(self) -> Any: ...
    @property
    def session(self) -> Any: ...  # its ``client_params``: the handshake's, or None


class Lane(Protocol):
    def prepare(self, ctx: Call) -> Prepared | None: ...

    async def run(self, prepared: Prepared, uses_after: list[Use] | None = None) -> dict[str, Any]: ...


RESERVED_META = ("io.modelcontextprotocol/", "progressToken")  # the protocol's own _meta keys


def _untraced(_layer: Any, ctx: Call) -> bool:
    if not isinstance(get_tracer_provider(), ProxyTracerProvider):
        return False
    meta = ctx.params.get("_meta") if ctx.params is not None else None
    return meta is None or (
        isinstance(meta, Mapping) and all(str(key).startswith(RESERVED_META) for key in meta)
    )


def _no_request_state(_layer: Any, ctx: Call) -> bool:
    return ctx.params is None or ctx.params.get("requestState") is None


def _allowed(gate: ScopeGate, ctx: Call) -> bool:
    grant = request_grant(ctx.request, gate.stdio)
    return grant is not None and grant.allows_tool(str((ctx.params or {}).get("name")))


def _passes(_layer: Any, _ctx: Call) -> bool:
    return True


PASSES_THROUGH: dict[type, Callable[[Any, Call], bool]] = {
    OpenTelemetryMiddleware: _untraced,
    RequestStateBoundary: _no_request_state,
    ScopeGate: _allowed,
    ProfileMiddleware: _passes,
}


class Ahead:
    """Outermost middleware: the lane's reply to a ``tools/call`` of ``tool`` every layer
    between here and ``lane`` passes through (the lane may still leave it to the SDK)."""

    def __init__(self, lane: Lane, chain: Sequence[object], tool: str) -> None:
        self.lane = lane
        self.chain = chain  # the server's own list: layers added later are seen
        self.tool = tool

    async def __call__(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        note = NOTED.get()
        if note is not None:
            note(ctx.session)
        prepared = self.prepare(ctx)
        if prepared is not None:
            return await self.lane.run(prepared)
        return await call_next(ctx)

    def prepare(self, ctx: Call) -> Prepared | None:
        """The lane's recall for ``ctx`` when every layer from here to the lane passes it on
        untouched and the lane would answer it; None where the chain takes it. Runs nothing."""
        params = ctx.params
        if (
            ctx.method == "tools/call"
            and params is not None
            and params.get("name") == self.tool
            and self._passed_through(ctx)
        ):
            return self.lane.prepare(ctx)
        return None

    def _passed_through(self, ctx: Call) -> bool:
        """Does every layer from here to the lane pass ``ctx`` on untouched?"""
        ahead = False  # layers before this one have run already
        for layer in self.chain:
            if not ahead:
                ahead = layer is self
                continue
            if layer is self.lane:
                return True
            passes = PASSES_THROUGH.get(type(layer))
            if passes is None or not passes(layer, ctx):
                return False
        return False  # the lane is no longer in the chain
