"""The stdio transport's two ends, read and written on the event loop itself.

The SDK's ``stdio_server`` wraps stdin and stdout in anyio's file wrapper, which runs every
``readline``, ``write`` and ``flush`` on a worker thread: three thread hops per tool call, each a
queue hand-off and a wake-up of the loop (~0.2-0.4 ms of server CPU per call on this machine's
2 cores). When both ends are pipes or sockets (as MCP clients spawn a server: pipes, or a socket
pair per stream as libuv makes them) they are read and written here without a thread, through
the event loop's own pipe transports; anything else (a terminal, a file, one socket both ways)
keeps the SDK's wrapper.

Nor do the SDK's two stdio tasks stand between the pipes and the server: a line read is parsed
into a message when the server asks for the next one, and a message the server sends is written
to the pipe by the sending task itself, so a tool call costs two task switches fewer (its
request no longer passes through a reader task, its reply through a writer task), nor the
SDK's relay task behind its choice of protocol era (``eras.py``). A recall the outermost
middleware would answer itself is taken as its frame is read, and answered beside the SDK's
dispatcher (``beside.py``); every other frame reaches the dispatcher.

The wire is the same: lines split as the SDK's text wrapper splits them (``\\n``, ``\\r\\n`` or
``\\r``), invalid UTF-8 read as U+FFFD, replies written as UTF-8. As in the SDK, fd 0 and fd 1
point at the null device and at stderr while serving, so stray output cannot corrupt the wire.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Self, cast

import anyio
import mcp_types
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from .beside import Beside
from .eras import era_serving

QUEUED_LINES = 64  # lines read ahead of the server before reading pauses (backpressure)


async def run_stdio(server: MCPServer) -> None:
    """Serve ``server`` over this process's stdin and stdout."""
    # The SDK's own ``run_stdio_async`` serves wherever ours does not apply: on Windows (the
    # proactor loop reads only overlapped pipes, and a client's stdin is not one), off asyncio,
    # on a terminal or a file, or on an SDK whose server no longer keeps ``_lowlevel_server``.
    lowlevel = getattr(server, "_lowlevel_server", None)  # what ``run_stdio_async`` runs
    if os.name != "posix" or lowlevel is None or not _on_asyncio() or not _separate_pipes(0, 1):
        await server.run_stdio_async()
        return
    async with _pipe_ends() as (lines, replies):
        serve = era_serving()
        if serve is None:
            await lowlevel.run(Incoming(lines), Outgoing(replies), lowlevel.create_initialization_options())
            return
        outgoing = Outgoing(replies)
        beside = Beside.for_chain(getattr(lowlevel, "middleware", []), outgoing.write)
        outgoing.beside = beside
        await serve(lowlevel, Incoming(lines, beside), outgoing, beside)


def _on_asyncio() -> bool:
    """Is this task on asyncio's loop (anyio may run it on trio)? sniffio is not among our
    dependencies: the loop is asked directly."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _separate_pipes(read: int, write: int) -> bool:
    """Are ``read`` and ``write`` pipes or sockets, and not one socket both ways? (The loop's
    write transport takes anything readable on its end for the peer hanging up.)"""
    try:
        ends = os.fstat(read), os.fstat(write)
    except OSError:
        return False
    kinds = all(stat.S_ISFIFO(end.st_mode) or stat.S_ISSOCK(end.st_mode) for end in ends)
    return kinds and (ends[0].st_dev, ends[0].st_ino) != (ends[1].st_dev, ends[1].st_ino)


@asynccontextmanager
async def _pipe_ends() -> AsyncIterator[tuple[Lines, Replies]]:
    loop = asyncio.get_running_loop()
    sys.stdout.flush()
    wire_in, wire_out = _divert(0, os.open(os.devnull, os.O_RDONLY)), _divert(1, os.dup(2))
    lines, replies = Lines(), Replies()
    reading: asyncio.BaseTransport | None = None
    writing: asyncio.BaseTransport | None = None
    try:
        reading, _ = await loop.connect_read_pipe(lambda: lines, os.fdopen(wire_in, "rb", buffering=0))
        writing, _ = await loop.connect_write_pipe(lambda: replies, os.fdopen(wire_out, "wb", buffering=0))
        yield lines, replies
    finally:
        for transport in (reading, writing):
            if transport is not None:
                transport.close()  # stops reading at once; the wire's duplicate closes on the loop
        for fd, wire in ((0, wire_in), (1, wire_out)):
            with suppress(OSError):
                os.dup2(wire, fd)  # the wire back on its standard descriptor, blocking as it was
                os.set_blocking(fd, True)
        await anyio.lowlevel.checkpoint()


def _divert(fd: int, aside: int) -> int:
    """A private duplicate of ``fd`` (the wire); ``fd`` itself then points where ``aside`` does."""
    wire = os.dup(fd)
    os.dup2(aside, fd)
    os.close(aside)
    return wire


def _decoded(raw: bytes, *, final: bool = False) -> list[str]:
    """The lines of ``raw`` (one ``\\n``-ended line, or the last bytes before end of input) as
    the SDK's text wrapper yields them: universal newlines, invalid UTF-8 as U+FFFD."""
    text = raw.decode("utf-8", "replace")
    if not final:
        text += "\n"
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    pieces = text.split("\n")
    return [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


class Lines(asyncio.Protocol):
    """stdin's lines, read by the event loop as they arrive (``async for line in lines``)."""

    def __init__(self) -> None:
        self._pieces: list[bytes] = []  # an unfinished line
        self._lines: deque[str] = deque()
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.ReadTransport, transport)

    def data_received(self, data: bytes) -> None:
        if b"\n" not in data:
            self._pieces.append(data)
            return
        *complete, rest = data.split(b"\n")
        if self._pieces:
            complete[0] = b"".join((*self._pieces, complete[0]))
            self._pieces.clear()
        for raw in complete:
            self._lines.extend(_decoded(raw))
        if rest:
            self._pieces.append(rest)
        if len(self._lines) >= QUEUED_LINES and self._transport is not None:
            self._transport.pause_reading()
            self._paused = True
        self._wake()

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        if not self._ended:
            if self._pieces:
                self._lines.extend(_decoded(b"".join(self._pieces), final=True))
                self._pieces.clear()
            self._ended = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __aiter__(self) -> Lines:
        return self

    async def __anext__(self) -> str:
        while not self._lines:
            if self._ended:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self._paused and len(self._lines) <= QUEUED_LINES // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return self._lines.popleft()


class Replies(asyncio.Protocol):
    """stdout: each reply handed to the event loop's pipe transport, which writes what the
    pipe takes at once and the rest when it drains (a write waits while the client lags)."""

    def __init__(self) -> None:
        self._transport: asyncio.WriteTransport | None = None
        self._lost: BaseException | None = None
        self._drained = asyncio.Event()  # one for every writer: several tasks reply at once
        self._drained.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.WriteTransport, transport)

    def pause_writing(self) -> None:
        self._drained.clear()

    def resume_writing(self) -> None:
        self._drained.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or BrokenPipeError("the client closed the server's stdout")
        self._drained.set()

    async def write(self, data: bytes) -> None:
        if self._lost is not None or self._transport is None:
            raise self._lost or BrokenPipeError("stdout is not connected")
        self._transport.write(data)  # one whole line: replies of several tasks never interleave
        await self._drained.wait()
        if self._lost is not None:
            raise self._lost


class _Stream:
    """What the server's two streams share: closing, and use as an async context manager."""

    _closed = False

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Incoming(_Stream):
    """The server's read stream: the next line from stdin parsed as the SDK's stdio reader
    parses it (a line that is not a JSON-RPC message is handed on as its exception)."""

    def __init__(self, lines: Lines, beside: Beside | None = None) -> None:
        self._lines = lines
        self._given_back: deque[SessionMessage | Exception] = deque()
        self._beside = beside  # takes the recalls it answers, once the era is chosen

    def give_back(self, frames: list[SessionMessage | Exception]) -> None:
        """Frames already read (the era's decision reads ahead), received again first."""
        self._given_back.extendleft(reversed(frames))

    async def receive(self) -> SessionMessage | Exception:
        if self._closed:
            raise anyio.ClosedResourceError
        beside = self._beside
        while True:
            item = self._given_back.popleft() if self._given_back else await self._read()
            if (
                beside is None
                or beside.era is None
                or not isinstance(item, SessionMessage)
                or not beside.took(item.message)
            ):
                return item

    async def _read(self) -> SessionMessage | Exception:
        try:
            line = await anext(self._lines)
        except StopAsyncIteration:
            if self._beside is not None:
                self._beside.close()  # recalls in flight end as the dispatcher's handlers do
            raise anyio.EndOfStream from None
        try:
            return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except Exception as exc:  # noqa: BLE001 - as the SDK's reader: the parse's error is handed on
            return exc

    def __aiter__(self) -> Incoming:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class Outgoing(_Stream):
    """The server's write stream: each message written to stdout by the task that sends it,
    as one line in the SDK's stdio writer's JSON; a send waits while the client lags."""

    def __init__(self, replies: Replies) -> None:
        self._replies = replies
        self.beside: Beside | None = None  # told of each reply the dispatcher writes

    async def send(self, item: SessionMessage) -> None:
        if self.beside is not None:
            self.beside.answered(item.message)
        await self.write(item.message)

    async def write(self, message: mcp_types.JSONRPCMessage) -> None:
        """``message`` as one line on stdout (the dispatcher's and ``beside``'s replies)."""
        if self._closed:
            raise anyio.ClosedResourceError
        line = message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        try:
            await self._replies.write(line.encode("utf-8"))
        except OSError as exc:  # the client is gone: as a send to a stopped writer task fails
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        if self.beside is not None:
            await self.beside.settled()  # its recalls' last replies are written before closing
        self._closed = True
