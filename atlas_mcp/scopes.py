"""What a credential may do: each memory tool belongs to one scope, and a credential holds scopes.

A reporting agent gets a ``recall`` token, a note-taker ``recall,write``; ``forget`` (the one
destructive tool) is granted on purpose. A credential configured without scopes holds all of
them, so configs written before scopes existed keep their meaning. A ``Grant`` is what the
transport established about a caller: the user, the scopes, and a name for the credential that
is safe to log and audit (never the credential itself).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from .errors import InvalidInput
from .validation import meant

ScopeName = Literal["recall", "write", "forget"]
SCOPES: tuple[ScopeName, ...] = ("recall", "write", "forget")
ALL = frozenset(SCOPES)
TOOL_SCOPE: dict[str, ScopeName] = {
    "recall_memory": "recall",
    "write_memory": "write",
    "forget_memory": "forget",
}
FINGERPRINT_CHARS = 12  # of a credential's sha256: names it in logs and the audit, reveals nothing


def fingerprint(token_digest: str) -> str:
    """A short, stable name for a credential from its sha256 (hex)."""
    return token_digest.strip().lower()[:FINGERPRINT_CHARS]


def token_fingerprint(token: str) -> str:
    return fingerprint(hashlib.sha256(token.encode()).hexdigest())


def parse(text: str | Iterable[str]) -> frozenset[ScopeName]:
    """Scopes from ``"recall,write"`` (or a list of names); an unknown name is a clear error."""
    names = [n.strip().lower() for n in (text.split(",") if isinstance(text, str) else text)]
    names = [n for n in names if n]
    if not names:
        raise InvalidInput(f"name at least one scope: {', '.join(SCOPES)}")
    unknown = [n for n in names if n not in ALL]
    if unknown:
        problems = "; ".join(f"unknown scope {n!r}{meant(n, SCOPES)}" for n in unknown)
        raise InvalidInput(f"{problems}. Scopes are: {', '.join(SCOPES)}")
    return frozenset(s for s in SCOPES if s in names)  # every name is one of SCOPES (checked above)


def ordered(scopes: Iterable[str]) -> list[str]:
    """Scopes in their declared order (recall, write, forget), for display and config lines."""
    held = set(scopes)
    return [s for s in SCOPES if s in held]


@dataclass(frozen=True, slots=True)
class Grant:
    """Who is calling and what they may do, as the transport established it."""

    user: str
    scopes: frozenset[str] = ALL
    credential: str = "stdio"  # a name or fingerprint, never the secret

    def allows_tool(self, tool: str) -> bool:
        """Tools outside the scope table (none today) are not memory operations: allowed."""
        scope = TOOL_SCOPE.get(tool)
        return scope is None or scope in self.scopes

    def allows(self, scope: ScopeName) -> bool:
        return scope in self.scopes

    def refusal(self, tool: str) -> str:
        """What a model reads when it calls a tool this credential may not use."""
        held = ", ".join(ordered(self.scopes)) or "none"
        return (
            f"{tool} is not allowed for this credential (it holds the scopes: {held}; "
            f"{tool} needs {TOOL_SCOPE.get(tool, '?')!r}). Nothing was done. Ask the operator "
            f"for a token with that scope (atlas-mcp users token USER --scopes ...)."
        )
