"""pydantic's validation errors in the project's words, and "did you mean" for names.

Settings and tool arguments are both validated by pydantic, whose messages name internal
models, echo the input, add ``[type=…]`` codes and a documentation URL. People and models read
these instead: one clause per wrong value (``k must be less than or equal to 100``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails


def _squashed(name: str) -> str:
    """``occuredAt``, ``occured-at`` and ``occured_at`` all compare as ``occuredat``."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def meant(name: str, known: Collection[str]) -> str:
    """`` (did you mean 'x'?)`` when one of ``known`` is close to ``name``, else ``""``."""
    by_shape = {_squashed(k): k for k in known}
    close = difflib.get_close_matches(_squashed(name), by_shape, n=1, cutoff=0.75)
    return f" (did you mean {by_shape[close[0]]!r}?)" if close else ""


def _where(location: tuple[int | str, ...]) -> str:
    head, *rest = [str(p) for p in location] or ["arguments"]
    return head + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in rest)


def _said(error: Mapping[str, Any]) -> str:
    """pydantic's message for one error, as a clause: no type codes, no input echo, no URL."""
    if error["type"] == "missing":
        return "is required"
    if error["type"] == "extra_forbidden":
        return "is not a field it takes"
    said = str(error["msg"]).replace("Input should be", "must be").replace("Value error, ", "")
    return re.sub(r" or instance of \w+", "", said)  # pydantic's class names mean nothing to a model


# How pydantic names the branches of a union in an error's location: str, int, list[str], Step…
_BRANCH = re.compile(r"^(str|int|float|bool|none|[A-Z]\w*|[\w-]+\[.*\])$")


def _clauses(errors: list[dict[str, Any]], depth: int = 0) -> list[str]:
    """One clause per wrong value. A union (``str | list[str]``) fails in every branch, each
    named in the location: keep the branches that got furthest, else say which kinds would do."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for error in errors:
        groups.setdefault(error["loc"][depth] if len(error["loc"]) > depth else None, []).append(error)
    if None in groups or (len(groups) == 1 and len(errors) == 1 and len(errors[0]["loc"]) <= depth + 1):
        return [f"{_where(e['loc'])} {_said(e)}" for e in errors]
    if depth > 0 and len(groups) > 1 and all(isinstance(k, str) and _BRANCH.match(k) for k in groups):
        unbranched = [{**e, "loc": e["loc"][:depth] + e["loc"][depth + 1 :]} for e in errors]
        deeper = [e for e in unbranched if len(e["loc"]) > depth]
        if deeper:
            return _clauses(deeper, depth)
        kinds = " or ".join(dict.fromkeys(_said(e).removeprefix("must be ") for e in errors))
        return [f"{_where(errors[0]['loc'][:depth])} must be {kinds}"]
    return [clause for group in groups.values() for clause in _clauses(group, depth + 1)]


def clauses(error: ValidationError | Sequence[ErrorDetails]) -> list[str]:
    """One plain clause per wrong value, e.g. ``k must be less than or equal to 100``."""
    errors = error.errors(include_url=False) if isinstance(error, ValidationError) else error
    return _clauses([dict(e) for e in errors])
