"""The inspector's pages: one signed-in user's memory, read-only, rendered on the server.

Every read goes through ``MemoryService`` scoped to the user the bearer middleware verified;
no page takes a user id from the URL, so typing another user's id (or memory id) finds nothing.
Endpoints are plain functions: Starlette runs them in its thread pool, off the event loop.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from ..caller import SCOPE_GRANT_KEY, SCOPE_USER_KEY
from ..domain.model import Memory, MemoryType
from ..domain.multipliers import track_record
from ..domain.ranking import COLUMNS, FORMULA
from ..errors import InvalidInput, NotFound
from ..inspection import explain_recall, memory_detail, type_counts
from ..service import MemoryService
from ..views import memory_view
from .gate import form_is_genuine, sign_out
from .render import CSRF_FIELD, page

PAGE_SIZE = 50
DEFAULT_K = 10
TYPE_NAMES = [t.value for t in MemoryType]


def inspector_routes(service: MemoryService) -> ASGIApp:
    pages = Pages(service)
    return NeedsRecall(
        Router(
            routes=[
                Route("/", pages.overview, methods=["GET"]),
                Route("/memories", pages.browse, methods=["GET"]),
                Route("/memories/{memory_id}", pages.memory, methods=["GET"]),
                Route("/search", pages.search, methods=["GET"]),
                Route("/playbooks", pages.playbooks, methods=["GET"]),
                Route("/timeline", pages.timeline, methods=["GET"]),
                Route("/logout", logout, methods=["POST"]),
            ]
        )
    )


class NeedsRecall:
    """Every page shows memories, which is recalling: a credential without ``recall`` is refused
    (signing out still works)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        grant = scope.get(SCOPE_GRANT_KEY)
        if grant is not None and not grant.allows("recall") and not scope["path"].endswith("/logout"):
            refusal = PlainTextResponse("this token may not read memories: it lacks the 'recall' scope", 403)
            return await refusal(scope, receive, send)
        await self.app(scope, receive, send)


class Pages:
    def __init__(self, service: MemoryService) -> None:
        self.service = service

    def overview(self, request: Request) -> Response:
        user = _user(request)
        recent = self.service.list(user, memory_types=["episodic"], limit=5)
        return page(request, "overview.html", counts=type_counts(self.service, user), recent=recent)

    def browse(self, request: Request) -> Response:
        kind = request.query_params.get("type", "semantic")
        if kind not in TYPE_NAMES:
            return _problem(request, 400, f"unknown memory type {kind!r}")
        superseded = request.query_params.get("superseded") == "1"
        offset = _offset(request)
        owner = None if kind == MemoryType.CATALOG else _user(request)
        found = self.service.list(
            owner, memory_types=[kind], include_superseded=superseded, limit=PAGE_SIZE + 1, offset=offset
        )
        return page(
            request, "memories.html", kind=kind, kinds=TYPE_NAMES, superseded=superseded,
            memories=found[:PAGE_SIZE], offset=offset, more=len(found) > PAGE_SIZE, page_size=PAGE_SIZE,
        )  # fmt: skip

    def memory(self, request: Request) -> Response:
        try:
            detail = memory_detail(self.service, _user(request), request.path_params["memory_id"])
        except (NotFound, InvalidInput):
            return _problem(request, 404, "No memory with that id is yours.")
        fields = memory_view(detail.memory)
        return page(request, "memory.html", detail=detail, fields=fields)

    def search(self, request: Request) -> Response:
        query = request.query_params.get("q", "")
        kinds = [k for k in request.query_params.getlist("type") if k in TYPE_NAMES]
        bounds = {b: request.query_params.get(b, "").strip() or None for b in ("as_of", "since", "until")}
        context: dict[str, Any] = {
            "query": query, "kinds": TYPE_NAMES, "chosen": kinds, "hits": None, "error": None, "bounds": bounds,
            "columns": COLUMNS, "formula": FORMULA,
        }  # fmt: skip
        if query.strip():
            try:
                context["hits"] = explain_recall(
                    self.service,
                    _user(request),
                    query,
                    self._k(request),
                    memory_types=kinds,
                    as_of=bounds["as_of"],
                    since=bounds["since"],
                    until=bounds["until"],
                )
            except InvalidInput as exc:
                context["error"] = str(exc)
        return page(request, "search.html", 400 if context["error"] else 200, **context)

    def _k(self, request: Request) -> int:
        return _bounded_int(request, "k", DEFAULT_K, 1, self.service.limits.max_k)

    def playbooks(self, request: Request) -> Response:
        found = self.service.list(_user(request), memory_types=["procedural"], include_superseded=False)
        rows = [
            (p, track_record(p.success_count, p.failure_count, self.service.policy.multipliers))
            for p in found
        ]
        rows.sort(key=lambda row: (-row[1], row[0].name or ""))
        return page(request, "playbooks.html", playbooks=rows)

    def timeline(self, request: Request) -> Response:
        offset = _offset(request)
        found = self.service.list(
            _user(request), memory_types=["episodic"], limit=PAGE_SIZE + 1, offset=offset
        )
        days = [(day, list(events)) for day, events in groupby(found[:PAGE_SIZE], key=_day)]
        return page(
            request, "timeline.html", days=days, offset=offset,
            more=len(found) > PAGE_SIZE, page_size=PAGE_SIZE,
        )  # fmt: skip


async def logout(request: Request) -> Response:
    form = await request.form()
    if not form_is_genuine(request, str(form.get(CSRF_FIELD, ""))):
        return PlainTextResponse("this form did not come from the inspector; reload it", 403)
    return sign_out(request)


def _user(request: Request) -> str:
    user: str = request.scope[SCOPE_USER_KEY]  # set by the bearer middleware, never from the URL
    return user


def _day(memory: Memory) -> str:
    return memory.timeline_at.strftime("%A %d %B %Y")


def _offset(request: Request) -> int:
    return _bounded_int(request, "offset", 0, 0, 1_000_000)


def _bounded_int(request: Request, name: str, default: int, low: int, high: int) -> int:
    try:
        return min(max(int(request.query_params.get(name, default)), low), high)
    except ValueError:
        return default


def _problem(request: Request, status: int, message: str) -> Response:
    return page(request, "problem.html", status, message=message)
