"""Time in the query: "last weekend", "in March", "my most recent trip", resolved against a clock.

Pure functions. ``time_intent`` finds the time expressions of a query and turns them into
what ranking needs:

- a *window* ``[start, end)`` the question asks about ("yesterday", "last week", "in March",
  "3 days ago"); memories whose date falls outside it fit the question less;
- an *order*: "most recent / latest / last time / my last X" prefers the newest of the
  memories that match, "first time / earliest / my first X" the oldest;
- the matched phrases, so retrieval does not look for the words themselves: "weekend" in
  "what did I do last weekend?" should not match a weekend trip two years ago.

Calendar words are resolved in the caller's time zone (the server's clock by default): a week
starts on Monday, a weekend is Saturday and Sunday. Only past periods are meant: "in March"
in November is this year's March, in February last year's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from enum import StrEnum

import numpy as np

from .fact_columns import MICROSECOND, NO_TIME, microseconds

DAY = timedelta(days=1)
MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "couple of": 2,
    "few": 3,
}
_MONTH = "|".join(MONTHS)
_WEEKDAY = "|".join(WEEKDAYS)
_COUNT = r"\d+|" + "|".join(sorted(_NUMBERS, key=len, reverse=True))


class Order(StrEnum):
    NEWEST = "newest"
    OLDEST = "oldest"


@dataclass(frozen=True, slots=True)
class TimeIntent:
    window: tuple[datetime, datetime] | None = None
    order: Order | None = None
    phrases: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return self.window is not None or self.order is not None

    def without_phrases(self, query: str) -> str:
        """The query with its time phrases taken out (what is left is the topic)."""
        for phrase in self.phrases:
            query = re.sub(re.escape(phrase), " ", query, flags=re.IGNORECASE)
        return re.sub(r"\s+", " ", query).strip()


def _rule(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# Each rule: a pattern and the name of the period it means (``_resolve``); the first match wins.
_WINDOW_RULES: list[tuple[re.Pattern[str], str]] = [
    (_rule(rf"\b(?:in|during|since|of|last|this|early|late|mid)[ -]({_MONTH})(?:,? (\d{{4}}))?\b"), "month"),
    (_rule(rf"\b({_MONTH}),? (\d{{4}})\b"), "month"),
    (_rule(rf"\b({_COUNT}) (day|week|month|year)s? ago\b"), "ago"),
    (_rule(r"\b(?:last|this past|past) weekend\b"), "last_weekend"),
    (_rule(r"\bthis weekend\b"), "this_weekend"),
    (_rule(r"\b(?:the )?(?:past|last) (?:7|seven) days\b|\b(?:this|the) past week\b"), "past_week"),
    (_rule(r"\blast week\b"), "last_week"),
    (_rule(r"\bthis week\b"), "this_week"),
    (_rule(r"\blast month\b"), "last_month"),
    (_rule(r"\bthis month\b"), "this_month"),
    (_rule(r"\blast year\b"), "last_year"),
    (_rule(r"\bthis year\b"), "this_year"),
    (_rule(r"\blast night\b"), "last_night"),
    (_rule(r"\byesterday\b"), "yesterday"),
    (_rule(r"\b(?:today|this morning|this afternoon|this evening|tonight)\b"), "today"),
    (_rule(rf"\b(?:on|last|this past) ({_WEEKDAY})\b"), "weekday"),
]
_NEWEST = _rule(
    r"\b(?:most recent(?:ly)?|latest|newest|(?:did|have|had) (?:i|we) last|(?:(?:my|our|the) )?last time|(?:my|our|the) last(?!\s+(?:week|weekend|month|year|night|"
    + _WEEKDAY
    + r"|"
    + _MONTH
    + r")\b))\b"
)
_OLDEST = _rule(
    r"\b(?:for the first time|(?:(?:my|our|the) (?:very )?)?first (?:time|ever)|earliest|(?:my|our|the) (?:very )?first"
    r"(?!\s+(?:name|aid|class|floor)\b))\b"
)


# Every rule above needs one of these words, case-blind (``_may_name_time``): a query holding
# none names no time, and none of the 18 searches (~40-100 us a query) is made.
_NEEDED = (
    *MONTHS,
    *WEEKDAYS,
    *("ago", "week", "days", "month", "year", "night", "yesterday", "today", "morning", "afternoon"),
    *("evening", "recent", "latest", "newest", "last", "first", "earliest"),
)


def _may_name_time(query: str) -> bool:
    """Does ``query`` hold one of ``_NEEDED``, as a case-blind search would find it? Case
    folding meets ``re.IGNORECASE`` but for the dotted and dotless i (İ folds to i and a
    combining dot, ı is an i to the expression): both are read as i."""
    folded = query.casefold().replace("\u0307", "").replace("ı", "i")
    return any(word in folded for word in _NEEDED)


def time_intent(query: str, now: datetime, zone: tzinfo | None = None) -> TimeIntent:
    """The time expressions of ``query`` resolved against ``now`` (in ``zone``, else now's zone)."""
    if not _may_name_time(query):
        return TimeIntent()
    local = now.astimezone(zone) if zone is not None else now
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    window, phrases = None, []
    for pattern, rule in _WINDOW_RULES:
        match = pattern.search(query)
        if match:
            window = _resolve(rule, match, local, midnight)
            phrases.append(match.group(0))
            break
    order = None
    for pattern, kind in ((_NEWEST, Order.NEWEST), (_OLDEST, Order.OLDEST)):
        match = pattern.search(query)
        if match:
            order = kind
            phrases.append(match.group(0))
            break
    return TimeIntent(window, order, tuple(phrases))


def _resolve(rule: str, match: re.Match[str], now: datetime, midnight: datetime) -> tuple[datetime, datetime]:
    monday = midnight - midnight.weekday() * DAY
    if rule == "today":
        return midnight, midnight + DAY
    if rule == "yesterday":
        return midnight - DAY, midnight
    if rule == "last_night":
        return midnight - DAY / 4, midnight + DAY / 4
    if rule == "last_weekend":
        # The weekend before this week's Monday: on a weekday the one just past, on a
        # Saturday or Sunday the one before the current weekend.
        saturday = monday - 2 * DAY
        return saturday, saturday + 2 * DAY
    if rule == "this_weekend":
        saturday = monday + 5 * DAY
        return saturday, saturday + 2 * DAY
    if rule == "past_week":
        return now - 7 * DAY, now
    if rule == "last_week":
        return monday - 7 * DAY, monday
    if rule == "this_week":
        return monday, monday + 7 * DAY
    if rule in ("this_month", "last_month"):
        first = midnight.replace(day=1)
        if rule == "last_month":
            first = (first - DAY).replace(day=1)
        return first, _next_month(first)
    if rule in ("this_year", "last_year"):
        year = now.year - (rule == "last_year")
        start = midnight.replace(year=year, month=1, day=1)
        return start, start.replace(year=year + 1)
    if rule == "month":
        return _month_window(match, midnight)
    if rule == "weekday":
        back = (midnight.weekday() - WEEKDAYS.index(match.group(1).lower())) % 7 or 7
        return midnight - back * DAY, midnight - (back - 1) * DAY
    return _ago_window(match, now)


def _month_window(match: re.Match[str], midnight: datetime) -> tuple[datetime, datetime]:
    month = MONTHS.index(match.group(1).lower()) + 1
    year = int(match.group(2)) if match.group(2) else midnight.year - (month > midnight.month)
    first = midnight.replace(year=year, month=month, day=1)
    return first, _next_month(first)


def _ago_window(match: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    count_text, unit = match.group(1).lower(), match.group(2).lower()
    count = int(count_text) if count_text.isdigit() else _NUMBERS[count_text]
    span = {"day": DAY, "week": 7 * DAY, "month": 30 * DAY, "year": 365 * DAY}[unit]
    centre = now - count * span
    half = max(span / 2, DAY)
    return centre - half, centre + half


def _next_month(first: datetime) -> datetime:
    return (
        first.replace(year=first.year + 1, month=1)
        if first.month == 12
        else first.replace(month=first.month + 1)
    )


def window_fit(when: np.ndarray, window: tuple[datetime, datetime], floor: float) -> np.ndarray:
    """Per date (microseconds since 1970, ``NO_TIME`` for none): 1.0 inside the window; outside,
    falling with the distance (in window lengths) to ``floor``; ``floor`` without a date."""
    start, end = (microseconds(t) for t in window)
    undated = when == NO_TIME
    at = np.where(undated, start, when)
    width = max(end - start, DAY // MICROSECOND)
    distance = np.where(at < start, start - at, at - end)
    fits = np.where((start <= at) & (at < end), 1.0, np.maximum(floor, np.power(0.5, 1 + distance / width)))
    return np.where(undated, floor, fits)
