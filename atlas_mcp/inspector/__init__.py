"""The web inspector: read-only, server-rendered pages over one user's memory at ``/inspect``.

Mounted by ``mcp.http.build_http_app`` in HTTP mode, behind the same bearer tokens as MCP.
"""

from __future__ import annotations

from starlette.applications import Starlette

from ..service import MemoryService
from .gate import InspectorGate, TokenCheck
from .pages import inspector_routes
from .render import INSPECT_PATH

__all__ = ["INSPECT_PATH", "mount_inspector"]


def mount_inspector(app: Starlette, service: MemoryService, check: TokenCheck | None) -> None:
    """Add the pages at /inspect and the gate outside every middleware added so far.

    Call it after the bearer middleware is added, so the gate runs first and can hand the
    bearer middleware a header made from the sign-in cookie.
    """
    app.mount(INSPECT_PATH, inspector_routes(service))
    app.add_middleware(InspectorGate, check=check)
