"""Tool arguments, checked strictly and refused in the project's own words.

The SDK validates arguments against each tool's signature, but it ignores names it does not
know (a misspelt ``occured_at`` would vanish and the event be stored undated) and reports a
wrong value in pydantic's words (model names, ``[type=…]``, a documentation URL). Here an
unknown name is an error that names the argument meant, and a wrong value is one line per
argument that a model can act on.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping
from typing import Any

from pydantic import ValidationError


def _squashed(name: str) -> str:
    """``occuredAt``, ``occured-at`` and ``occured_at`` all compare as ``occuredat``."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def unknown_arguments(tool: str, arguments: Mapping[str, Any], known: Collection[str]) -> str | None:
    """Why ``arguments`` has names ``tool`` does not take (with the likely one meant), or None."""
    unknown = [name for name in arguments if name not in known]
    if not unknown:
        return None
    by_shape = {_squashed(k): k for k in known}
    problems = []
    for name in unknown:
        close = difflib.get_close_matches(_squashed(name), by_shape, n=1, cutoff=0.75)
        meant = f" (did you mean {by_shape[close[0]]!r}?)" if close else ""
        problems.append(f"unknown argument {name!r}{meant}")
    return f"{'; '.join(problems)}. {tool} takes: {', '.join(known)}. Nothing was done."


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
        unbranched = [{**e, "loc": e["loc"][:depth] + e["loc"][depth + 1:]} for e in errors]
        deeper = [e for e in unbranched if len(e["loc"]) > depth]
        if deeper:
            return _clauses(deeper, depth)
        kinds = " or ".join(dict.fromkeys(_said(e).removeprefix("must be ") for e in errors))
        return [f"{_where(errors[0]['loc'][:depth])} must be {kinds}"]
    return [clause for group in groups.values() for clause in _clauses(group, depth + 1)]


def invalid_arguments(tool: str, error: ValidationError) -> str:
    """One clause per wrong argument, e.g. ``k must be less than or equal to 100``."""
    clauses = _clauses([dict(e) for e in error.errors(include_url=False)])
    return f"invalid arguments for {tool}: {'; '.join(clauses)}. Nothing was done."
