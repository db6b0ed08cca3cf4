"""Tool arguments, checked strictly and refused in the project's own words.

The SDK validates arguments against each tool's signature, but it ignores names it does not
know (a misspelt ``occured_at`` would vanish and the event be stored undated) and reports a
wrong value in pydantic's words. Here an unknown name is an error that names the argument
meant, and a wrong value is one clause per argument that a model can act on.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pydantic import ValidationError

from ..validation import clauses, meant


def unknown_arguments(tool: str, arguments: Mapping[str, Any], known: Collection[str]) -> str | None:
    """Why ``arguments`` has names ``tool`` does not take (with the likely one meant), or None."""
    unknown = [name for name in arguments if name not in known]
    if not unknown:
        return None
    problems = "; ".join(f"unknown argument {name!r}{meant(name, known)}" for name in unknown)
    return f"{problems}. {tool} takes: {', '.join(known)}. Nothing was done."


def invalid_arguments(tool: str, error: ValidationError) -> str:
    """One clause per wrong argument, e.g. ``k must be less than or equal to 100``."""
    return f"invalid arguments for {tool}: {'; '.join(clauses(error))}. Nothing was done."
