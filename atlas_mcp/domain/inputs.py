"""Coercion and validation of caller input, with errors a model can act on.

Tools, the CLI, consolidation and import all go through these, so a limit or a format is
checked in exactly one place.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidInput
from .codec import BY_NAME
from .gist import normal_key
from .limits import Limits
from .model import FactType, MemoryType, Step, iso
from .validity import TimeFilter

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_text(value: Any, what: str, max_chars: int) -> str:
    """Strip, drop control characters and lone surrogates; refuse empty or oversized text."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string")
    text = _CONTROL.sub("", value).encode("utf-8", "replace").decode("utf-8").strip()
    if not text:
        raise InvalidInput(f"{what} must not be empty")
    if len(text) > max_chars:
        raise InvalidInput(f"{what} is {len(text)} characters; the limit is {max_chars}. Shorten it.")
    return text


def memory_id(value: Any) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidInput(
            "memory ids are 1-128 characters of letters, digits, '_', '-', '.', ':'; "
            f"got {str(value)[:40]!r}. Use an id returned by recall_memory."
        )
    return value


def memory_ids(value: str | Iterable[str] | None, limits: Limits) -> tuple[str, ...]:
    """One id or a list of ids, de-duplicated in order."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else list(value)
    if len(items) > limits.max_supersedes:
        raise InvalidInput(f"at most {limits.max_supersedes} ids can be superseded in one write")
    return tuple(dict.fromkeys(memory_id(v) for v in items))


def memory_type(value: Any, allowed: Iterable[MemoryType]) -> MemoryType:
    allowed = tuple(allowed)
    try:
        kind = MemoryType(value)
    except ValueError:
        kind = None
    if kind not in allowed:
        names = ", ".join(t.value for t in allowed)
        raise InvalidInput(f"unknown memory_type {value!r}; use one of: {names}")
    return kind


def applicable(kind: MemoryType, given: Mapping[str, Any]) -> None:
    """Refuse write arguments (given = not None) that the codec does not show for ``kind``.

    A field a memory type does not carry would be dropped without a word, so it is an error.
    """
    wrong = [name for name, value in given.items() if value is not None and kind not in BY_NAME[name].shown]
    if not wrong:
        return
    where = "; ".join(f"{n} is for {' and '.join(sorted(BY_NAME[n].shown))} memories" for n in wrong)
    raise InvalidInput(
        f"{', '.join(wrong)} {'does' if len(wrong) == 1 else 'do'} not apply to {kind.value} memories ({where}): "
        "leave it out, or choose the memory_type it belongs to. Nothing was written."
    )


def timestamp(value: datetime | str | None, what: str) -> datetime | None:
    """ISO-8601 → aware UTC datetime; a naive value is taken as UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())  # Python >= 3.11 reads a trailing Z
        except ValueError as exc:
            raise InvalidInput(f"{what} must be ISO-8601, e.g. 2026-05-01T14:30:00Z") from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def confidence(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise InvalidInput("confidence must be a number between 0 and 1")
    return float(value)


def relevance_floor(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise InvalidInput("min_relevance must be a number between 0 and 1 (0 returns everything)")
    return float(value)


def fact_type(value: Any) -> str:
    if value is None:
        return FactType.PREFERENCE.value
    try:
        return FactType(value).value
    except ValueError:
        names = ", ".join(f.value for f in FactType)
        raise InvalidInput(f"unknown fact_type {value!r}; use one of: {names}") from None


def steps(value: Any, limits: Limits) -> tuple[Step, ...]:
    """A playbook's steps (at least one) as plain strings or ``{order?, instruction, tool?}`` objects."""
    if value is not None and not isinstance(value, list):
        raise InvalidInput("steps must be a list of strings or {instruction, tool?} objects")
    if not value:
        raise InvalidInput("a playbook needs its steps: pass steps as a list of instructions, in order")
    if len(value) > limits.max_steps:
        raise InvalidInput(f"a playbook has at most {limits.max_steps} steps")
    out = []
    for position, item in enumerate(value, start=1):
        raw = item if isinstance(item, Mapping) else {"instruction": item}
        instruction = clean_text(raw.get("instruction"), f"step {position} instruction", 2_000)
        tool = raw.get("tool")
        if tool is not None and not isinstance(tool, str):
            raise InvalidInput(f"step {position} tool must be a string")
        tool = clean_text(tool, f"step {position} tool", 200) if tool and tool.strip() else None
        out.append(Step(order=position, instruction=instruction, tool=tool))
    return tuple(out)


def metadata(value: Any, limits: Limits) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput("metadata must be a JSON object")
    try:
        encoded = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("metadata must be JSON-serialisable") from exc
    # Lone surrogates cannot be stored or sent as UTF-8: replace them, as clean_text does.
    encoded = encoded.encode("utf-8", "replace").decode("utf-8")
    if len(encoded.encode("utf-8")) > limits.max_metadata_bytes:
        raise InvalidInput(f"metadata is larger than {limits.max_metadata_bytes} bytes of JSON")
    loaded: dict[str, Any] = json.loads(encoded)
    return loaded


def top_k(value: Any, limits: Limits) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limits.max_k:
        raise InvalidInput(f"k must be an integer from 1 to {limits.max_k}")
    return value


MAX_ABOUT_CHARS = 100


def about_key(value: Any) -> str:
    """What a fact is about, as compared and stored: "Home City!" → "home city"."""
    key = normal_key(clean_text(value, "about", MAX_ABOUT_CHARS))
    if key is None:
        raise InvalidInput('about must name what the fact is about in a few words, e.g. "home city"')
    return key


def timing(
    kind: MemoryType,
    written_at: datetime,
    now: datetime,
    about: Any = None,
    valid_from: Any = None,
    valid_to: Any = None,
    expires_at: Any = None,
) -> dict[str, Any]:
    """A write's time fields, checked: validity for facts (from ``written_at`` unless given, open
    unless given, never ending before it starts) and an expiry that is still to come at ``now``
    (an imported memory's ``written_at`` is its source's date)."""
    start = timestamp(valid_from, "valid_from")
    end = timestamp(valid_to, "valid_to")
    if kind is MemoryType.SEMANTIC and start is None:
        start = written_at
    if start is not None and end is not None and end < start:
        raise InvalidInput(
            f"valid_to ({iso(end)}) is before valid_from ({iso(start)}"
            f"{', the time of this write' if valid_from is None else ''}): a fact cannot stop being "
            "true before it starts. Pass valid_from for a fact that ended before it was written. "
            "Nothing was written."
        )
    expiry = timestamp(expires_at, "expires_at")
    if expiry is not None and expiry <= now:
        raise InvalidInput(
            f"expires_at ({iso(expiry)}) is not in the future (now: {iso(now)}): a memory "
            "that expired already would never be returned. Nothing was written."
        )
    fields: dict[str, Any] = {"valid_from": start, "valid_to": end, "expires_at": expiry}
    if about is not None:
        fields["about"] = about_key(about)
    return {k: v for k, v in fields.items() if v is not None}


def time_filter(as_of: Any = None, since: Any = None, until: Any = None) -> TimeFilter:
    """A recall's time bounds, checked: ISO-8601 instants, ``since`` not after ``until``."""
    window = TimeFilter(timestamp(as_of, "as_of"), timestamp(since, "since"), timestamp(until, "until"))
    if window.since is not None and window.until is not None and window.since > window.until:
        raise InvalidInput(
            f"since ({iso(window.since)}) is after until ({iso(window.until)}): the window is "
            "empty. Swap them, or leave one out for an open-ended window."
        )
    return window
