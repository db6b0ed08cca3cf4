"""HTML rendering: Jinja2 with autoescaping on for every template, so stored text stays text.

Memories are user input. Nothing here marks a string safe; the templates hold no ``|safe``.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..caller import SCOPE_USER_KEY
from ..inspection import when

INSPECT_PATH = "/inspect"
SESSION_COOKIE = "atlas_inspect"
CSRF_COOKIE = "atlas_inspect_csrf"
CSRF_FIELD = "csrf"


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("atlas_mcp.inspector", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["num"] = _number
    env.globals |= {"base": INSPECT_PATH, "csrf_field": CSRF_FIELD}
    return env


ENVIRONMENT = _environment()


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render ``template`` with who is looking and the form token every page may need."""
    context |= {
        "user": request.scope.get(SCOPE_USER_KEY),
        "csrf": request.cookies.get(CSRF_COOKIE, ""),
        "signed_in_by_cookie": SESSION_COOKIE in request.cookies,
        "path": request.url.path,
    }
    html = ENVIRONMENT.get_template(template).render(context)
    return HTMLResponse(html, status_code=status_code)
