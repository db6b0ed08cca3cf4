"""What the fake cluster's mappings accept per field type, as Elasticsearch 9 parses documents.

A value the field type cannot hold fails the document with a 400 ``document_parsing_exception``
whose ``caused_by`` says why, as the server's ``DocumentParser`` reports it:

- ``date``: an ISO-8601 string (``strict_date_optional_time``) or epoch milliseconds; any year
  a ``long`` of milliseconds holds, before 1970 included;
- ``date_nanos``: the same, but only from 1970-01-01 to 2262-04-11T23:47:16.854775807 (a
  ``long`` of nanoseconds: ``DateUtils.toLong``);
- ``integer``/``long``: numbers within 32/64 bits (numeric strings are coerced, decimals
  truncated); ``float``: any number;
- ``keyword``/``text``: strings (numbers and booleans are coerced), never objects;
- ``object`` with ``enabled: false``: anything (stored, not parsed).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NANOS_MAX = EPOCH + timedelta(microseconds=(2**63 - 1) // 1000)  # 2262-04-11T23:47:16.854775Z
INTEGER = {"integer": 2**31, "long": 2**63}


class FieldRefused(Exception):
    """A value the field's type cannot hold: the server's ``caused_by`` (type, reason)."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def parse_instant(value: Any) -> datetime:
    """A ``date`` value as the cluster reads it (epoch millis or ISO-8601, UTC if no offset)."""
    if isinstance(value, bool):
        raise FieldRefused("illegal_argument_exception", f"failed to parse date field [{value}]")
    if isinstance(value, int | float):
        return EPOCH + timedelta(milliseconds=value)
    try:
        at = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise FieldRefused(
            "illegal_argument_exception",
            f"failed to parse date field [{value}] with format [strict_date_optional_time||epoch_millis]",
        ) from exc
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def java_instant(at: datetime) -> str:
    """How ``Instant.toString`` shows an instant (what the server's messages quote)."""
    text = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if at.microsecond:
        text += f".{at.microsecond:06d}".rstrip("0")
    return text + "Z"


def check(kind: str | None, value: Any) -> None:
    """Raise ``FieldRefused`` if a field of type ``kind`` cannot hold ``value`` (or each element)."""
    if value is None or kind in (None, "object", "constant_keyword", "semantic_text"):
        return
    for item in value if isinstance(value, list) else [value]:
        if item is not None:
            _check_one(kind, item)


def _check_one(kind: str, value: Any) -> None:
    if kind in ("date", "date_nanos"):
        at = parse_instant(value)
        if kind == "date_nanos" and at < EPOCH:
            raise FieldRefused(
                "illegal_argument_exception",
                f"date[{java_instant(at)}] is before the epoch in 1970 and cannot be stored in "
                "nanosecond resolution",
            )
        if kind == "date_nanos" and at > NANOS_MAX:
            raise FieldRefused(
                "illegal_argument_exception",
                f"date[{java_instant(at)}] is after 2262-04-11T23:47:16.854775807 and cannot be stored in "
                "nanosecond resolution",
            )
    elif kind in INTEGER or kind == "float":
        number = _number(value)  # coerce (the default) accepts numeric strings, truncates decimals
        bound = INTEGER.get(kind)
        if bound is not None and not -bound <= int(number) < bound:
            raise FieldRefused("illegal_argument_exception", f"Value [{value}] is out of range for a {kind}")
    elif kind in ("keyword", "text") and isinstance(value, dict):
        raise FieldRefused("illegal_state_exception", "Can't get text on a START_OBJECT at 1:1")


def _number(value: Any) -> float:
    if isinstance(value, bool | dict | list):
        raise FieldRefused("illegal_argument_exception", f"Current token is not a number: [{value}]")
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise FieldRefused("number_format_exception", f'For input string: "{value}"') from exc
