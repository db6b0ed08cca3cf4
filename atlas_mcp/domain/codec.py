"""The one codec for a memory: every outside form of a ``Memory`` is derived from ``FIELDS``.

A field is declared once: how its value becomes JSON (``Kind``), which memories store it
(``Scope``), how a search engine indexes it (``Index``), which memory types show it in a view
and where (its view rank), and whether an engine's ``update`` may change it. The SQLite row
(``engines.embedded.rows``), the Elasticsearch document and mapping
(``engines.elasticsearch.documents``, ``.mappings``), the export line (``portability``), the
tool/CLI/inspector view (``views``) and the MCP result model (``mcp.results``) are all built from
this table, so a field added here reaches every representation at once.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, MISSING, dataclass
from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime
from enum import Enum
from functools import lru_cache
from typing import Any

from .model import USAGE_TYPES, Memory, MemoryType, Step, iso

E, S, P, C = MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.PROCEDURAL, MemoryType.CATALOG
EVERY_TYPE = frozenset(MemoryType)
NOWHERE: frozenset[MemoryType] = frozenset()


class Kind(Enum):
    """How a field's value is written as JSON."""

    PLAIN = "plain"  # str, int, float or None as they are
    TYPE = "type"  # MemoryType <-> its value
    TIME = "time"  # datetime <-> ISO-8601 UTC
    STRINGS = "strings"  # tuple[str, ...] <-> list
    STEPS = "steps"  # tuple[Step, ...] <-> list of {order, instruction, tool?}
    MAPPING = "mapping"  # dict <-> object


class Scope(Enum):
    """Which memories store a field (the Elasticsearch indices map exactly these)."""

    ALL = "all"
    OWNED = "owned"  # every user type, not the catalog
    CATALOG = "catalog"


class Index(Enum):
    """What a search engine must be able to do with a field (its mapping is derived from this)."""

    EXACT = "exact"  # filter and match whole values: ids, kinds, labels
    WORDS = "words"  # match by the words in it
    TIME = "time"  # range and sort
    INTEGER = "integer"  # range and sort
    FLOAT = "float"  # range and sort
    STORED = "stored"  # kept with the memory, never searched


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    _: KW_ONLY
    kind: Kind = Kind.PLAIN
    scope: Scope = Scope.OWNED
    index: Index | None  # None: derived, never stored
    shown: frozenset[MemoryType] = frozenset(USAGE_TYPES)  # the memory types whose view shows it
    view: int | None = None  # its place in a view (ascending); every shown field has one
    always: bool = False  # shown even when empty (else only when it holds something)
    mutable: bool = True  # an engine's update may change it (identity, type, owner, links may not)


# In ``Memory``'s field order (a test checks the two agree). View ranks put identity first,
# then when, then what, metadata last; they leave gaps so a new field can go between two.
FIELDS: tuple[Field, ...] = (
    Field("id", scope=Scope.ALL, index=Index.EXACT, shown=EVERY_TYPE, view=10, always=True, mutable=False),
    Field("memory_type", kind=Kind.TYPE, scope=Scope.ALL, index=Index.EXACT, shown=EVERY_TYPE, view=20,
          always=True, mutable=False),
    Field("user_id", index=Index.EXACT, shown=NOWHERE, mutable=False),  # catalog entries have no owner
    Field("text", scope=Scope.ALL, index=Index.STORED, shown=EVERY_TYPE, view=30, always=True),
    Field("created_at", kind=Kind.TIME, scope=Scope.ALL, index=Index.TIME, shown=EVERY_TYPE, view=50,
          always=True, mutable=False),
    Field("occurred_at", kind=Kind.TIME, index=Index.TIME, shown=frozenset({E}), view=40, always=True),
    Field("fact_type", index=Index.EXACT, shown=frozenset({S}), view=160),
    Field("confidence", index=Index.FLOAT, view=110),
    Field("source_episodes", kind=Kind.STRINGS, index=Index.EXACT, view=150),
    Field("supersedes", kind=Kind.STRINGS, index=Index.EXACT, view=120, mutable=False),
    Field("superseded_by", index=Index.EXACT, view=130, mutable=False),
    Field("superseded_at", kind=Kind.TIME, index=Index.TIME, view=140, mutable=False),
    Field("last_used_at", kind=Kind.TIME, index=Index.TIME, view=100, always=True),
    Field("use_count", index=Index.INTEGER, view=90, always=True),
    Field("name", index=Index.WORDS, shown=frozenset({P}), view=170, always=True),
    Field("steps", kind=Kind.STEPS, index=Index.STORED, shown=frozenset({P}), view=190, always=True),
    Field("success_count", index=Index.INTEGER, shown=frozenset({P}), view=200, always=True),
    Field("failure_count", index=Index.INTEGER, shown=frozenset({P}), view=210, always=True),
    Field("last_success_at", kind=Kind.TIME, index=Index.TIME, shown=frozenset({P}), view=220),
    Field("title", scope=Scope.CATALOG, index=Index.WORDS, shown=frozenset({C}), view=60),
    Field("category", scope=Scope.CATALOG, index=Index.EXACT, shown=frozenset({C}), view=70),
    Field("tags", kind=Kind.STRINGS, scope=Scope.CATALOG, index=Index.EXACT, shown=frozenset({C}), view=80),
    Field("about", index=Index.EXACT, shown=frozenset({S}), view=142, mutable=False),
    Field("valid_from", kind=Kind.TIME, index=Index.TIME, shown=frozenset({S}), view=144, mutable=False),
    Field("valid_to", kind=Kind.TIME, index=Index.TIME, shown=frozenset({S}), view=146, mutable=False),
    Field("expires_at", kind=Kind.TIME, index=Index.TIME, shown=frozenset({E, S, P}), view=148, mutable=False),
    Field("metadata", kind=Kind.MAPPING, scope=Scope.ALL, index=Index.STORED, shown=EVERY_TYPE, view=230),
)  # fmt: skip
# Shown in views, never stored: a playbook's trigger is its text (``Memory.trigger_text``).
VIEW_ONLY = {
    "trigger_text": Field(
        "trigger_text", index=None, shown=frozenset({P}), view=180, always=True, mutable=False
    )
}
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)
MUTABLE: tuple[str, ...] = tuple(f.name for f in FIELDS if f.mutable)
HINTS: dict[str, Any] = typing.get_type_hints(Memory)


def _view_rank(field: Field) -> int:
    if field.view is None:
        raise ValueError(f"codec field {field.name!r} is shown in views but has no view rank")
    return field.view


# Every field some view shows, in view order.
VIEWED: tuple[Field, ...] = tuple(
    sorted((f for f in (*FIELDS, *VIEW_ONLY.values()) if f.shown), key=_view_rank)
)
VIEW_ORDER: tuple[str, ...] = tuple(f.name for f in VIEWED)


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _steps(value: Iterable[Mapping[str, Any]]) -> tuple[Step, ...]:
    return tuple(Step(**s) for s in value)


ENCODERS: dict[Kind, Callable[[Any], Any]] = {
    Kind.PLAIN: lambda v: v,
    Kind.TYPE: lambda v: v.value,
    Kind.TIME: iso,
    Kind.STRINGS: list,
    Kind.STEPS: lambda v: [s.to_dict() for s in v],
    Kind.MAPPING: lambda v: v,
}
DECODERS: dict[Kind, Callable[[Any], Any]] = {
    Kind.PLAIN: lambda v: v,
    Kind.TYPE: {t.value: t for t in MemoryType}.__getitem__,  # faster than MemoryType(v)
    Kind.TIME: _time,
    Kind.STRINGS: tuple,
    Kind.STEPS: _steps,
    Kind.MAPPING: dict,
}


def encode(memory: Memory, names: Iterable[str] = NAMES) -> dict[str, Any]:
    """The JSON-ready value of each named field, in that order."""
    return {n: ENCODERS[BY_NAME[n].kind](getattr(memory, n)) for n in names}


def decode(values: Mapping[str, Any]) -> Memory:
    """A Memory from JSON-ready values a store wrote (trusted); a missing or null field takes
    its default. Untrusted input goes through ``portability.from_record`` instead."""
    return Memory(**{n: _DECODE_FIELD[n](values.get(n)) for n in NAMES})


def decoder(parse: Mapping[str, Callable[[Any], Any]]) -> Callable[[Sequence[Any]], Memory]:
    """A fast decoder for rows holding every field in ``NAMES`` order, none of them null
    unless its default is None (recall maps ~200 rows a call). ``parse`` turns a field's
    stored form (e.g. JSON text) into its JSON-ready value."""
    converted = tuple(
        (i, _parsed(parse[n], DECODERS[BY_NAME[n].kind]) if n in parse else _DECODE_FIELD[n])
        for i, n in enumerate(NAMES)
        if n in parse or BY_NAME[n].kind is not Kind.PLAIN
    )

    def from_values(row: Sequence[Any]) -> Memory:
        values = list(row)
        for i, decode_value in converted:
            values[i] = decode_value(values[i])
        return Memory(*values)

    return from_values


def _parsed(parse: Callable[[Any], Any], decode_value: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: decode_value(parse(v))


def _field_decoder(name: str) -> Callable[[Any], Any]:
    """Decode one field's JSON-ready value; None (absent) becomes the field's default."""
    spec, decode_value = _DATACLASS_FIELDS[name], DECODERS[BY_NAME[name].kind]
    if spec.default_factory is not MISSING:
        make = spec.default_factory
        return lambda v: make() if v is None else decode_value(v)
    default = None if spec.default is MISSING else spec.default
    if default is None and decode_value is _time:
        return _time  # already maps None to None
    return lambda v: default if v is None else decode_value(v)


_DATACLASS_FIELDS = {f.name: f for f in dataclass_fields(Memory)}
_DECODE_FIELD = {n: _field_decoder(n) for n in NAMES}


def stored_names(memory_type: MemoryType) -> tuple[str, ...]:
    """The fields a memory of this type stores (outside its id)."""
    scopes = {Scope.ALL, Scope.CATALOG if memory_type is C else Scope.OWNED}
    return tuple(f.name for f in FIELDS if f.scope in scopes and f.name != "id")


def view_fields(memory_type: MemoryType) -> tuple[Field, ...]:
    """The fields a view of this type shows, in view order."""
    return tuple(f for f in VIEWED if memory_type in f.shown)


_VIEW_FIELDS = {t: view_fields(t) for t in MemoryType}
# A UTC time's text, remembered: ``iso`` (astimezone + isoformat, ~1.2 us) was two thirds of a
# view's time, and a recall shows the same memories, so the same times, again and again. Two
# UTC datetimes are equal only at the same instant, so a remembered text is the one ``iso``
# gives (other zones, where equal wall times can be two instants, are not remembered). 4096
# texts: ~0.9 MB at most (~230 bytes a text and its cache entry, measured).
_utc_text = lru_cache(maxsize=4096)(datetime.isoformat)


def _viewed_time(value: datetime | None) -> str | None:
    return _utc_text(value) if value is not None and value.tzinfo is UTC else iso(value)


_VIEW_ENCODERS = ENCODERS | {Kind.TIME: _viewed_time}
# Per type, each viewed field's name, encoder (None: shown as it is) and whether it is always
# shown: ``view`` runs for every memory a recall returns, and looking the encoder up by kind
# hashed an Enum per field (a third of a view's time).
_VIEW_PLANS = {
    t: tuple((f.name, None if f.kind is Kind.PLAIN else _VIEW_ENCODERS[f.kind], f.always) for f in fields)
    for t, fields in _VIEW_FIELDS.items()
}
# Each plan cut after the text, where a recall's score and relevance go (``view``'s
# ``after_text``): inserting them into a finished view rebuilt it (~0.45 us a recalled memory).
_CUT_PLANS = {t: (plan[:3], plan[3:]) for t, plan in _VIEW_PLANS.items()}
if any(head[-1][0] != "text" for head, _ in _CUT_PLANS.values()):  # every view opens with id, type, text
    raise ValueError("a view's text must be its third field")
_UNSET: tuple[Any, ...] = (None, [], {})  # an optional field with one of these values is left out


def view(memory: Memory, after_text: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The fields that apply to the memory's type, JSON-ready; optional ones only when set.
    ``after_text``'s items, when given, follow the text."""
    head, tail = _CUT_PLANS[memory.memory_type]
    out: dict[str, Any] = {}
    for plan in (head, tail):
        for name, encode, always in plan:
            value = getattr(memory, name)
            if encode is not None:
                value = encode(value)
            if always or value not in _UNSET:
                out[name] = value
        if after_text and plan is head:
            out.update(after_text)
    return out
