"""The protocol era of a stdio connection, chosen without a relay task between pipe and server.

The SDK's ``Server.run`` decides the era (the 2025 handshake, or the 2026 per-request
envelope) from the client's first request, then keeps a relay task between the transport and
the chosen serving loop for the whole connection: every message after the first is read by that
task and handed on through a memory stream, one task switch and one stream hand-off per message
(0.02-0.12 ms of event-loop CPU per recall, 0.06 on average, on this machine's 2 cores). Here the server's read stream
(``stdio.Incoming``) holds the frames read before the decision and gives them back first, so
the serving loop reads the pipe itself.

The decision is the SDK's own rule, read from its runner: the first request opens a 2026
connection when it carries the envelope's protocol-version key and is not ``initialize``;
anything else, no request at all included, opens a 2025 one; at most
``_PRE_REQUEST_REPLAY_LIMIT`` frames before that request are kept. The serving loops, the
lifespan and the initialization options are the SDK's. On an SDK without these pieces
``era_serving`` is None and ``Server.run`` serves as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol

import anyio
from mcp.server import runner
from mcp.server.lowlevel.server import Server
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCRequest

from ..log import get_logger
from .ahead import NOTED
from .beside import LEGACY, MODERN, Beside

log = get_logger(__name__)


class Replaying(Protocol):
    """A read stream that can give back frames already read (``stdio.Incoming``)."""

    async def receive(self) -> SessionMessage | Exception: ...

    def give_back(self, frames: list[SessionMessage | Exception]) -> None: ...


Serve = Callable[[Server[Any], Any, Any, Beside | None], Awaitable[None]]


def era_serving() -> Serve | None:
    """``serve(server, read_stream, write_stream)``, as ``Server.run`` serves one connection
    but with no relay task; None on an SDK without the runner's era pieces."""
    modern = getattr(runner, "_serve_modern_stream", None)
    legacy = getattr(runner, "_serve_legacy_stream", None)
    enveloped = getattr(runner, "_has_modern_envelope", None)
    limit = getattr(runner, "_PRE_REQUEST_REPLAY_LIMIT", None)
    if modern is None or legacy is None or enveloped is None or not isinstance(limit, int):
        return None

    async def serve(
        server: Server[Any], read_stream: Any, write_stream: Any, beside: Beside | None = None
    ) -> None:
        async with server.lifespan(server) as state:
            try:  # as the SDK's loop: the write stream is closed whichever way serving ends
                opening = await _opening_request(read_stream, limit)
                if opening is not None and opening.method != "initialize" and enveloped(opening.params):
                    loop = partial(modern, server, read_stream, write_stream, lifespan_state=state)
                    era = MODERN
                else:
                    loop = partial(
                        legacy,
                        server,
                        read_stream,
                        write_stream,
                        lifespan_state=state,
                        session_id=None,
                        init_options=server.create_initialization_options(),
                    )
                    era = LEGACY
                if beside is None:
                    await loop(raise_exceptions=False)
                else:
                    await _beside(beside, era, loop)
            finally:
                await write_stream.aclose()

    return serve


async def _beside(beside: Beside, era: str, loop: Callable[..., Awaitable[None]]) -> None:
    """Serve with ``loop`` while ``beside`` answers the recalls it takes in ``era``."""
    beside.era = era
    noted = NOTED.set(beside.note_session)  # the middleware tells it the connection's session
    try:
        async with anyio.create_task_group() as tasks:
            await tasks.start(beside.serve)
            try:
                await loop(raise_exceptions=False)
            finally:
                beside.close()
    finally:
        NOTED.reset(noted)


async def _opening_request(stream: Replaying, limit: int) -> JSONRPCRequest | None:
    """The client's first request (None if the input ends first); it and up to ``limit``
    frames read before it are given back to ``stream``, later extra frames dropped."""
    lead: list[SessionMessage | Exception] = []
    opening: JSONRPCRequest | None = None
    try:
        while opening is None:
            item = await stream.receive()
            if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                opening = item.message
            elif len(lead) >= limit:
                log.debug("dropped_frame_before_first_request")
                continue
            lead.append(item)
    except anyio.EndOfStream:
        pass
    stream.give_back(lead)
    return opening
