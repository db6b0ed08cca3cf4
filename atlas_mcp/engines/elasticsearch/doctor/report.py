"""What a doctor check reports: ok, warn or fail, with the fix; and the grants every check reads."""

from __future__ import annotations

from dataclasses import dataclass

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Grants:
    """What the credential doctor runs with may do (``_has_privileges`` needs no privilege)."""

    cluster: frozenset[str]
    missing_index: tuple[str, ...]  # "<privilege> on <pattern>" the writer needs and lacks
    view_metadata: bool


def skipped(name: str, privilege: str) -> Check:
    return Check(
        name,
        WARN,
        f"not checked: this credential lacks `{privilege}` (serving does not need it)",
        f"grant `{privilege}` to check it, or run doctor with an administrator's credential",
    )


def render(checks: list[Check]) -> str:
    marks = {OK: "ok  ", WARN: "warn", FAIL: "FAIL"}
    lines = []
    for check in checks:
        lines.append(f"[{marks[check.status]}] {check.name}: {check.detail}")
        if check.fix:
            lines.append(f"       fix: {check.fix}")
    return "\n".join(lines)
