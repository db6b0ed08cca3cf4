"""The recall lane answers ahead of the middleware only while each of them would pass the recall
through untouched (``atlas_mcp.mcp.ahead``); a layer that would act gets the call, and answers
as it did: a span recorded, a trace context carried, a request state checked, a scope refused,
a middleware it does not know run. Byte identity with the SDK's replies: test_recall_lane.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server import _otel as sdk_otel
from mcp.server.request_state import RequestStateBoundary
from mcp.shared import _otel as shared_otel
from mcp.shared.exceptions import MCPError
from opentelemetry import trace

from atlas_mcp.app import open_service
from atlas_mcp.config import load_settings
from atlas_mcp.mcp import access, profile, server
from atlas_mcp.service import MemoryService

USER = "sarah"
QUERY = {"query": "where do I live?"}
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def service(tmp_path: Path) -> MemoryService:
    service = open_service(load_settings(data_dir=tmp_path / "data"))
    service.write(USER, "I live in Lyon, near the Croix-Rousse.", about="home city")
    return service


@pytest.fixture
def entered(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The methods each layer between the outermost middleware and the lane was entered for."""
    seen: dict[str, list[str]] = {}
    layers = {
        "span": sdk_otel.OpenTelemetryMiddleware,
        "request state": RequestStateBoundary,
        "scope gate": access.ScopeGate,
        "profile": profile.ProfileMiddleware,
    }
    for name, layer in layers.items():
        seen[name] = []

        def spied(original: Any, methods: list[str]) -> Any:
            async def call(self: Any, ctx: Any, call_next: Any) -> Any:
                methods.append(ctx.method)
                return await original(self, ctx, call_next)

            return call

        monkeypatch.setattr(layer, "__call__", spied(layer.__call__, seen[name]))
    return seen


async def _recall(built: Any, **options: Any) -> Any:
    async with Client(built) as client:
        return await client.call_tool("recall_memory", QUERY, **options)


def _texts(result: Any) -> list[str]:
    return [m["text"] for m in (result.structured_content or {}).get("memories", [])]


async def test_a_recall_no_layer_acts_on_passes_none_of_them(
    service: MemoryService, entered: dict[str, list[str]]
) -> None:
    result = await _recall(server.build_server(service, USER))
    assert _texts(result) == ["I live in Lyon, near the Croix-Rousse."]
    assert {name: "tools/call" in methods for name, methods in entered.items()} == dict.fromkeys(
        entered, False
    )
    assert all("tools/list" in methods for methods in entered.values())  # other calls take the chain


async def test_a_recall_with_a_trace_context_passes_the_span(
    service: MemoryService, entered: dict[str, list[str]]
) -> None:
    result = await _recall(server.build_server(service, USER), meta={"traceparent": TRACEPARENT})
    assert _texts(result) == ["I live in Lyon, near the Croix-Rousse."]
    assert entered["span"].count("tools/call") == 1 and entered["profile"].count("tools/call") == 1


class _Recorded(trace.TracerProvider):
    """A tracer provider that records span names: tracing is on."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def get_tracer(self, *_args: Any, **_kwargs: Any) -> trace.Tracer:
        return _Tracer(self.names)


class _Tracer(trace.Tracer):
    def __init__(self, names: list[str]) -> None:
        self.names = names

    def start_span(self, name: str, *_args: Any, **_kwargs: Any) -> trace.Span:
        self.names.append(name)
        return trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)

    @contextmanager  # type: ignore[override]
    def start_as_current_span(self, name: str, *_args: Any, **_kwargs: Any) -> Iterator[trace.Span]:
        with trace.use_span(self.start_span(name)) as span:
            yield span


async def test_a_recall_is_traced_when_tracing_is_on(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = _Recorded()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # as set_tracer_provider sets it, undone after
    monkeypatch.setattr(shared_otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    result = await _recall(server.build_server(service, USER))
    assert _texts(result) == ["I live in Lyon, near the Croix-Rousse."]
    assert "tools/call recall_memory" in provider.names


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "sdk"])
async def test_a_recall_with_a_request_state_is_checked_by_the_boundary(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch, lane: bool
) -> None:
    if not lane:
        monkeypatch.setattr(server, "install_recall_lane", lambda *_a: False)
    async with Client(server.build_server(service, USER)) as client:
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.call_tool("recall_memory", QUERY, request_state="not one the server minted")


async def test_a_recall_outside_the_scopes_is_refused_by_the_gate(
    service: MemoryService, entered: dict[str, list[str]]
) -> None:
    result = await _recall(server.build_server(service, USER, user_scopes={"write"}))
    assert result.is_error and "'recall'" in result.content[0].text
    assert entered["scope gate"].count("tools/call") == 1


@pytest.mark.parametrize("where", ["before the lane", "after the lane"])
async def test_a_middleware_it_does_not_know_gets_the_recall_before_the_lane(
    service: MemoryService, where: str
) -> None:
    seen: list[str] = []

    async def noting(ctx: Any, call_next: Any) -> Any:
        seen.append(ctx.method)
        return await call_next(ctx)

    built = server.build_server(service, USER)
    built.middleware.insert(2 if where == "before the lane" else len(built.middleware), noting)
    result = await _recall(built)
    assert _texts(result) == ["I live in Lyon, near the Croix-Rousse."]
    # After the lane, it never sees a recall the lane answers, ahead or not (as before ahead.py).
    assert seen.count("tools/call") == (1 if where == "before the lane" else 0)
