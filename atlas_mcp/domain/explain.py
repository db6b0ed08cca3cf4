"""The explain declaration: what each number of a recall's breakdown is called and shown as.

``Multipliers`` (``domain.multipliers``) and ``Explanation`` (``domain.ranking``) label their
fields with ``shown(...)``; the MCP result models, the JSON view, the CLI's ``--explain``
table and the inspector's search page are all derived from those labels, so a new multiplier
is one labelled field and appears everywhere, in the formula too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

SHOWN = "shown"


@dataclass(frozen=True, slots=True)
class Shown:
    """How one field of the breakdown appears outside the process."""

    label: str | None  # its column in the CLI and inspector tables; None: not a column
    description: str | None = None  # what the tool's result schema says about it
    factor: bool = False  # one term of ``score = match × …``
    on_wire: bool = True  # part of the tool result (``explain``) and the JSON view
    only_when_set: bool = False  # emitted only when true (a rare flag, not a wall of falses)
    also_as: str | None = None  # an earlier name it is emitted under as well (the contract only grows)


def shown(
    label: str | None,
    description: str | None = None,
    *,
    factor: bool = False,
    on_wire: bool = True,
    only_when_set: bool = False,
    also_as: str | None = None,
) -> dict[str, Shown]:
    """Field metadata: ``field(default=…, metadata=shown("decay", factor=True))``."""
    return {SHOWN: Shown(label, description, factor, on_wire, only_when_set, also_as)}


@dataclass(frozen=True, slots=True)
class Column:
    """One column of an explain table: where its value sits and its header."""

    path: tuple[str, ...]  # attribute names from the Explanation, e.g. ("multipliers", "decay")
    label: str
    kind: str  # "number", "integer", "time", "text"

    def value(self, explanation: Any) -> Any:
        for name in self.path:
            explanation = getattr(explanation, name)
        return explanation


def declared(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Shown]]:
    """The labelled fields of a dataclass, in declaration order."""
    for f in dataclasses.fields(cls):
        if SHOWN in f.metadata:
            yield f, f.metadata[SHOWN]


def wire_names(cls: type) -> Iterator[tuple[str, dataclasses.Field[Any], Shown]]:
    """Each key a field is emitted under (an earlier name first), with the field it reads."""
    for f, s in declared(cls):
        if s.on_wire:
            if s.also_as:
                yield s.also_as, f, s
            yield f.name, f, s


def factor_names(multipliers: type) -> tuple[str, ...]:
    """The fields whose product scales ``match`` into the score."""
    return tuple(f.name for f, s in declared(multipliers) if s.factor)


def formula(multipliers: type, match: str = "match") -> str:
    """``score = match × decay × use × …``, with each factor's column label."""
    labels = [s.label for f, s in declared(multipliers) if s.factor]
    return " × ".join([f"score = {match}", *(str(label) for label in labels)])


def columns(explanation: type, nested: dict[str, type]) -> list[Column]:
    """Every column of the table, nested dataclasses (``multipliers``) expanded in place."""
    out: list[Column] = []
    for f, s in declared(explanation):
        if f.name in nested:
            out += [Column((f.name, *c.path), c.label, c.kind) for c in columns(nested[f.name], {})]
        elif s.label is not None:
            out.append(Column((f.name,), s.label, _kind(f)))
    return out


def _kind(f: dataclasses.Field[Any]) -> str:
    hint = str(f.type)
    if "datetime" in hint:
        return "time"
    if hint.startswith("int"):
        return "integer"
    return "text" if hint.startswith("str") else "number"
