"""A stdio recall answered beside the SDK's dispatcher.

Over stdio every request passes the SDK's dispatcher: a task and a cancel scope of its own, a
dispatch context, in the 2026 era a per-request ``Connection`` torn down under a shielded scope,
then a request context and a ``ServerSession``, and the middleware chain composed anew. For a
recall that the outermost middleware would answer itself (``ahead.py``: every layer before the
lane passes it through, and the lane takes it), that machinery only carries the call to the lane
and the reply back (~60% of the event loop's CPU per recall on this machine). Here the stdio
reader (``stdio.Incoming``) hands such a recall to ``Beside.took`` as it reads the frame; it is
checked at once by the same code the middleware runs (``Ahead.prepare``, with the era's own
conditions first), run in a task of its own and answered through the same write stream.
Everything else, and every recall a check declines, reaches the dispatcher as before.

What the dispatcher does for a request is done here the same way:
- its era's conditions: on a 2026 connection the envelope passes the SDK's classifier and gives
  the protocol version; on a 2025 one the request carries no envelope (the SDK refuses it) and
  the version and the handshake's state are read live from a session of this connection, noted
  by the outermost middleware when the handshake passes it (``note_session``);
- ``notifications/cancelled`` for a recall in flight here cancels its scope and it is never
  answered; the notification still goes on to the dispatcher (its layers see it as before);
- request ids correlate as the dispatcher correlates them (``"7"`` is ``7``; the newest request
  holds an id), and a recall whose id a request still open at the dispatcher holds goes there;
- at the end of input (or a cancelled server) recalls in flight are cancelled when the
  dispatcher's handlers are; one not yet answered gets the dispatcher's "Connection closed"
  error, shielded and bounded as it writes it; the write stream closes after they settle;
- a failure is mapped to the wire as each era's dispatcher maps it.

Limits are the dispatcher's too. It sets none of its own on stdio: a recall's hop to its worker
thread takes a token of anyio's default thread limiter on either path (``tools._call``); the
rate limiter is HTTP's (``ratelimit.py``); reading stops while ``stdio.QUEUED_LINES`` lines wait
and a reply waits while the client lags (``stdio.Replies``), whoever reads and writes.

SDK internals read (``available`` is False and the dispatcher answers every recall on an SDK
without them): ``mcp.server.runner._has_modern_envelope`` and ``modern_error_data``,
``mcp.shared.inbound.classify_inbound_request``, ``mcp.shared.jsonrpc_dispatcher``'s
``handler_exception_to_error_data``, ``cancelled_request_id_from_params`` and
``_SHUTDOWN_WRITE_TIMEOUT``, ``mcp.shared.dispatcher.coerce_request_id``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from mcp_types import (
    CONNECTION_CLOSED,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from ..uses import Use
from .ahead import Ahead
from .lane import Prepared

try:
    from mcp.server.runner import _has_modern_envelope as enveloped
    from mcp.server.runner import modern_error_data
    from mcp.shared.dispatcher import coerce_request_id
    from mcp.shared.exceptions import MCPError
    from mcp.shared.inbound import InboundModernRoute, classify_inbound_request
    from mcp.shared.jsonrpc_dispatcher import (
        _SHUTDOWN_WRITE_TIMEOUT,
        cancelled_request_id_from_params,
        handler_exception_to_error_data,
    )

    available = True
except ImportError:  # pragma: no cover - an SDK without them: the dispatcher answers
    available = False

logger = logging.getLogger(__name__)
LEGACY, MODERN = "2025", "2026"


@dataclass(frozen=True, slots=True)
class _Call:
    """The part of a request context the checks read (``ahead.Call``)."""

    method: str
    params: Mapping[str, Any] | None
    protocol_version: str
    session: Any
    request: Any = None  # stdio carries no HTTP request


class _Envelope:
    client_params = None  # a 2026 request's checks never read it


@dataclass(slots=True)
class _Flight:
    key: RequestId
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    cancelled: bool = False


class Beside:
    """The recalls of one stdio connection that are answered beside its dispatcher."""

    def __init__(self, ahead: Ahead, write: Callable[[JSONRPCMessage], Awaitable[None]]) -> None:
        self._ahead = ahead
        self._write = write  # one whole line to stdout, as the dispatcher's replies are written
        self.era: str | None = None  # chosen by ``eras.py`` before the dispatcher reads on
        self._session: Any = None  # 2025: a session of this connection (its state read live)
        self._flights: dict[RequestId, _Flight] = {}
        self._open: set[RequestId] = set()  # ids of requests the dispatcher has not answered
        # The recalls' tasks: plain asyncio tasks, each cancelled through its flight's scope. An
        # anyio task group's task made a TaskHandle, a cancel scope and an event per recall
        # (anyio 4.16: ~55 us of the event loop's CPU a recall, with its caches cold).
        self._running: dict[asyncio.Task[None], _Flight] = {}
        self._taking = False  # hosting, and not closed
        self._hosting = False
        self._closing = anyio.Event()
        self._settled = anyio.Event()

    @classmethod
    def for_chain(cls, chain: list[Any], write: Callable[[JSONRPCMessage], Awaitable[None]]) -> Beside | None:
        """A ``Beside`` when the outermost middleware is the lane's ``Ahead`` (nothing before
        it sees a call) and the SDK has what this module reads; else None."""
        if not available or not chain or not isinstance(chain[0], Ahead):
            return None
        return cls(chain[0], write)

    def note_session(self, session: Any) -> None:
        """A session of this connection, from a request the middleware sees (2025 era)."""
        if self._session is None and self.era == LEGACY:
            self._session = session

    # -- the reader's side -------------------------------------------------------------

    def took(self, message: JSONRPCMessage) -> bool:
        """Is ``message`` (read from stdin) answered here? Also follows what the dispatcher
        is handed: its open request ids, and cancellations of recalls in flight here."""
        if isinstance(message, JSONRPCRequest):
            key = coerce_request_id(message.id)
            if message.method == "tools/call" and key not in self._open:
                try:
                    prepared = self._prepared(message)
                except Exception:  # never the reader's failure: the dispatcher answers the recall
                    logger.exception("recall_not_taken")
                    prepared = None
                if prepared is not None and self._taking:
                    flight = self._flights[key] = _Flight(key)
                    task = asyncio.get_running_loop().create_task(self._answer(message.id, flight, prepared))
                    self._running[task] = flight
                    task.add_done_callback(self._done)
                    return True
            self._open.add(key)
            self._flights.pop(key, None)  # as in the dispatcher's table: the newest request holds an id
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = cancelled_request_id_from_params(message.params)
            gone = self._flights.get(coerce_request_id(cancelled)) if cancelled is not None else None
            if gone is not None:
                gone.cancelled = True
                gone.scope.cancel()
        return False

    def answered(self, message: JSONRPCMessage) -> None:
        """The dispatcher wrote ``message``: a reply closes its request id."""
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._open.discard(coerce_request_id(message.id))

    def _prepared(self, request: JSONRPCRequest) -> Prepared | None:
        params = request.params
        chain = self._ahead.chain
        if (
            params is None
            or params.get("name") != self._ahead.tool
            or not chain
            or chain[0] is not self._ahead
        ):
            return None  # another tool, or a layer added before the outermost one would see it
        if self.era == MODERN:
            route = classify_inbound_request({"method": request.method, "params": params})
            if not isinstance(route, InboundModernRoute):
                return None  # refused by the dispatcher, in its words
            call = _Call(request.method, params, route.protocol_version, _Envelope)
        elif self.era == LEGACY and self._session is not None and not enveloped(params):
            call = _Call(request.method, params, self._session.protocol_version, self._session)
        else:
            return None
        return self._ahead.prepare(call)

    # -- the recalls' tasks ------------------------------------------------------------

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Host the recalls' tasks until ``close``; then cancel those still running (as the
        dispatcher cancels its handlers when the input ends) and let them settle."""
        self._hosting = self._taking = True
        try:
            task_status.started()
            await self._closing.wait()
        finally:
            self._taking = False
            for flight in self._running.values():
                flight.scope.cancel()
            with anyio.CancelScope(shield=True):
                while self._running:
                    await asyncio.wait(list(self._running))
            self._settled.set()

    def _done(self, task: asyncio.Task[None]) -> None:
        del self._running[task]
        if not task.cancelled() and (error := task.exception()) is not None:
            logger.error("recall_task_failed", exc_info=error)

    def close(self) -> None:
        """The input ended: recalls in flight are cancelled, and any read after (frames read
        before the era was chosen) go to the dispatcher."""
        self._taking = False
        self._closing.set()

    async def settled(self) -> None:
        """Wait (shielded: the write stream closes only after) until every recall settled."""
        self.close()
        with anyio.CancelScope(shield=True):
            if self._hosting:
                await self._settled.wait()

    async def _answer(self, request_id: RequestId, flight: _Flight, prepared: Prepared) -> None:
        """Run one recall and write its reply, as the dispatcher's request handler does."""
        writing = False  # a write started may have reached the pipe: never a second answer
        uses: list[Use] = []  # the recall's use, recorded once its reply is written (``uses.py``)
        try:
            with flight.scope:  # cancelled by the client (``flight.cancelled``) or at the end
                try:
                    reply = await self._ahead.lane.run(prepared, uses_after=uses)
                finally:
                    if self._flights.get(flight.key) is flight:
                        del self._flights[flight.key]
                if not flight.cancelled:
                    writing = True
                    await self._send(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=reply))
            if flight.scope.cancelled_caught and not writing and not flight.cancelled:
                # shut down: the client is not left waiting
                closed = ErrorData(code=CONNECTION_CLOSED, message="Connection closed")
                with anyio.move_on_after(_SHUTDOWN_WRITE_TIMEOUT, shield=True):
                    await self._send(JSONRPCError(jsonrpc="2.0", id=request_id, error=closed))
        except Exception as exc:  # noqa: BLE001 - every failure becomes the wire error the SDK writes
            if not flight.cancelled:
                await self._send(JSONRPCError(jsonrpc="2.0", id=request_id, error=self._error(exc)))
        finally:
            for use in uses:
                use.start()

    def _error(self, exc: Exception) -> ErrorData:
        error = handler_exception_to_error_data(exc)
        if error is not None:
            return error
        if self.era == MODERN:  # the 2026 loop raises it as an MCPError for the dispatcher to map
            mapped = modern_error_data(exc)
            return MCPError(code=mapped.code, message=mapped.message, data=mapped.data).error
        logger.error("handler for %r raised", "tools/call", exc_info=exc)
        return ErrorData(code=0, message=str(exc))

    async def _send(self, message: JSONRPCMessage) -> None:
        try:
            await self._write(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("dropped the reply to a recall: write stream closed")
