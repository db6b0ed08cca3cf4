"""Who may see the inspector: the bearer-token middleware decides; a cookie only carries the token.

A browser cannot attach an ``Authorization`` header to a link, so the login form trades a
configured token for an HttpOnly, SameSite=Strict cookie that holds it. On every /inspect
request this gate turns the cookie back into the header, and the one bearer middleware
(``mcp.http.BearerAuth``) verifies it exactly as it verifies MCP calls and stamps the user. No
session store, no second auth model: revoking a token in the config ends its cookie too.

The gate also answers the two pages that must work before sign-in (the login form and the
stylesheet), puts security headers on every inspector response (a CSP with no script source,
so even an escaping bug could not run injected script), and checks forms for CSRF: a
double-submit token plus the ``Origin`` header.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Callable
from importlib.resources import files
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection, Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import LOOPBACK_HOSTS
from .render import CSRF_COOKIE, CSRF_FIELD, INSPECT_PATH, SESSION_COOKIE, page

TokenCheck = Callable[[str], "str | None"]  # a bearer token → its user, or None

LOGIN_PATH = f"{INSPECT_PATH}/login"
STYLE_PATH = f"{INSPECT_PATH}/static/inspector.css"
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",  # "no-referrer" would make browsers send Origin: null
    "cache-control": "no-store",
}


class InspectorGate:
    """ASGI middleware, outermost: sign-in pages, cookie → bearer header, security headers."""

    def __init__(self, app: ASGIApp, check: TokenCheck | None) -> None:
        self.app = app
        self.check = check  # None = --insecure-no-auth: every request is the stdio user
        self.public = Router(
            routes=[
                Route(LOGIN_PATH, self.login, methods=["GET", "POST"]),
                Route(STYLE_PATH, stylesheet, methods=["GET"]),
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _inspector_path(scope["path"]):
            return await self.app(scope, receive, send)
        send = _with_security_headers(send)
        if self.check is None and not _loopback_request(scope):
            # Without tokens, only a loopback Host is trusted: a rebinding DNS name is refused.
            return await PlainTextResponse("forbidden host", 403)(scope, receive, send)
        if scope["path"] in (LOGIN_PATH, STYLE_PATH):
            return await self.public(scope, receive, send)
        if self.check is None or _has_authorization(scope):
            return await self.app(scope, receive, send)
        token = session_token(HTTPConnection(scope))
        if token is None or self.check(token) is None:
            return await _to_login(scope, receive, send)
        headers = [*scope["headers"], (b"authorization", f"Bearer {token}".encode("latin-1"))]
        await self.app(dict(scope, headers=headers), receive, send)

    async def login(self, request: Request) -> Response:
        if self.check is None:
            return RedirectResponse(f"{INSPECT_PATH}/", 303)
        csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
        if request.method == "GET":
            return _login_form(request, csrf)
        form = await request.form()
        if not form_is_genuine(request, str(form.get(CSRF_FIELD, ""))):
            return PlainTextResponse("this form did not come from the inspector; reload it", 403)
        token = str(form.get("token", "")).strip()
        if not token or self.check(token) is None:
            return _login_form(request, csrf, error="That token is not valid.", status_code=401)
        response = RedirectResponse(f"{INSPECT_PATH}/", 303)
        _set_cookie(response, request, SESSION_COOKIE, _encode(token))
        return response


def form_is_genuine(request: Request, submitted: str) -> bool:
    """CSRF check: the form echoes our cookie's token, and any Origin is this very host."""
    expected = request.cookies.get(CSRF_COOKIE, "")
    if not expected or not secrets.compare_digest(expected.encode(), submitted.encode()):
        return False
    origin = request.headers.get("origin")
    return origin is None or urlsplit(origin).netloc == request.headers.get("host")


def session_token(connection: HTTPConnection) -> str | None:
    raw = connection.cookies.get(SESSION_COOKIE)
    if not raw:
        return None
    try:
        return base64.urlsafe_b64decode(raw.encode("ascii")).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        return None


def sign_out(request: Request) -> Response:
    response = RedirectResponse(LOGIN_PATH, 303)
    response.delete_cookie(SESSION_COOKIE, path=INSPECT_PATH)
    return response


async def stylesheet(_request: Request) -> Response:
    css = files("atlas_mcp.inspector").joinpath("static/inspector.css").read_text(encoding="utf-8")
    return Response(css, media_type="text/css")


def _login_form(request: Request, csrf: str, error: str | None = None, status_code: int = 200) -> Response:
    response = page(request, "login.html", status_code, error=error, csrf_token=csrf)
    _set_cookie(response, request, CSRF_COOKIE, csrf)
    return response


def _set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(
        name, value, httponly=True, samesite="strict", secure=request.url.scheme == "https", path=INSPECT_PATH
    )


def _encode(token: str) -> str:
    # Cookie values may not hold every character a token might: carry it base64url-encoded.
    return base64.urlsafe_b64encode(token.encode("utf-8")).decode("ascii")


async def _to_login(scope: Scope, receive: Receive, send: Send) -> None:
    response = RedirectResponse(LOGIN_PATH, 303)
    response.delete_cookie(SESSION_COOKIE, path=INSPECT_PATH)
    await response(scope, receive, send)


def _inspector_path(path: str) -> bool:
    return path == INSPECT_PATH or path.startswith(f"{INSPECT_PATH}/")


def _has_authorization(scope: Scope) -> bool:
    return any(name == b"authorization" for name, _ in scope["headers"])


def _loopback_request(scope: Scope) -> bool:
    host = HTTPConnection(scope).headers.get("host", "")
    name = urlsplit(f"//{host}").hostname or ""
    return name in LOOPBACK_HOSTS


def _with_security_headers(send: Send) -> Send:
    async def secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in SECURITY_HEADERS.items():
                headers.setdefault(name, value)
        await send(message)

    return secured
