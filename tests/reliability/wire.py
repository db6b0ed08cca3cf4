"""A raw JSON-RPC driver for the stdio server: a real MCP session, byte for byte under test control.

The SDK client refuses to send some hostile input (lone surrogates, invalid UTF-8) and hides
when a response was acknowledged; this driver writes exactly the bytes a test chooses and
tells it which requests the server answered, so crash tests know what was acknowledged.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Self

from mcp_types.version import LATEST_HANDSHAKE_VERSION

STARTUP_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 60.0


class WireClosed(Exception):
    """The server process ended (or closed stdout) before answering."""


def server_env(data_dir: Path, user: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_")}
    return env | {"ATLAS_DATA_DIR": str(data_dir), "ATLAS_USER": user, "ATLAS_LOG_LEVEL": "WARNING"} | extra


class StdioWire:
    """One ``atlas-mcp serve`` subprocess spoken to over newline-delimited JSON-RPC."""

    def __init__(
        self,
        data_dir: Path,
        user: str,
        stderr_path: Path | None = None,
        launcher: tuple[str, ...] = ("-m", "atlas_mcp"),  # what the interpreter runs
        handshake: bool = True,  # False: no initialize, each request carries its own envelope
    ) -> None:
        self._stderr = open(stderr_path, "ab") if stderr_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, *launcher, "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=server_env(data_dir, user),
        )
        self._buffer = b""
        self._next_id = 0
        self._answered: dict[Any, dict[str, Any]] = {}  # responses that arrived out of order
        self.lines: dict[Any, bytes] = {}  # each response's line as the server wrote it
        self._line = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.process.stdout, selectors.EVENT_READ)
        os.set_blocking(self.process.stdout.fileno(), False)
        if handshake:
            self.initialize()

    # -- protocol ------------------------------------------------------------------------

    def initialize(self) -> dict[str, Any]:
        result = self.request(
            "initialize",
            {
                "protocolVersion": LATEST_HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "atlas-reliability-tests", "version": "0"},
            },
            timeout=STARTUP_TIMEOUT_S,
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result["result"]

    def call_tool(self, name: str, arguments: Any, timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        """The JSON-RPC response to ``tools/call`` (``result`` or ``error``), as parsed JSON."""
        return self.request("tools/call", {"name": name, "arguments": arguments}, timeout=timeout)

    def request(self, method: str, params: Any, timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        request_id = self.new_id()
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return self.response(request_id, timeout)

    def send(self, message: dict[str, Any]) -> None:
        # ensure_ascii escapes lone surrogates as \udXXX, which is valid JSON text.
        self.send_raw(json.dumps(message, ensure_ascii=True).encode("ascii") + b"\n")

    def send_raw(self, data: bytes) -> None:
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise WireClosed("server stdin is closed") from exc

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def response(self, request_id: Any, timeout: float) -> dict[str, Any]:
        """The answer to ``request_id``; the server may answer concurrent requests in any order."""
        deadline = time.monotonic() + timeout
        while request_id not in self._answered:
            message = self._next_message(deadline)
            if "result" in message or "error" in message:
                self._answered[message.get("id")] = message
                self.lines[message.get("id")] = self._line
        return self._answered.pop(request_id)

    def _next_message(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no response from the server in time")
            if not self._selector.select(remaining):
                continue
            chunk = self.process.stdout.read(1 << 20)
            if not chunk:
                raise WireClosed(f"server exited with {self.process.poll()}")
            self._buffer += chunk
        self._line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(self._line)

    # -- process -------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no handler, no flush, no clean shutdown."""
        self.process.kill()
        self.process.wait(timeout=30)
        self._close_pipes()

    def close(self) -> None:
        if self.alive:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)
        self._close_pipes()

    def _close_pipes(self) -> None:
        self._selector.close()
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except (BrokenPipeError, OSError):
                pass
        if self._stderr is not subprocess.DEVNULL:
            self._stderr.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def tool_payload(response: dict[str, Any]) -> tuple[bool, Any]:
    """(is_error, structured result or error text) of a ``tools/call`` response."""
    if "error" in response:
        return True, response["error"].get("message", "")
    result = response["result"]
    if result.get("isError"):
        return True, " ".join(c.get("text", "") for c in result.get("content", []))
    return False, result.get("structuredContent")
