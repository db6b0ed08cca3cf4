"""Runs the priors script the way the cluster's Painless would, for the fake cluster.

Only the subset of Painless atlas sends is understood (typed locals, ``if``/``else if``/``else``
blocks, ``&&``/``||``/``!``, ``Math.*``, ``(double)`` casts, ``doc[...]`` doc values,
``params.*``, ``return``); anything else is a 400, as a script that does not compile would be.
The script is translated to Python once per source text and run per document, keeping the
semantics that matter for atlas:

- ``doc['f']`` on a field the document's index does not map throws (a multi-index search
  sees fields unmapped in some indices: every access must be guarded);
- ``.value`` of a field with no value throws;
- dates are instants: ``toEpochMilli()`` is negative before 1970;
- ``_index`` is the concrete index name, never the alias;
- a negative result is an error (scores must be >= 0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime
from functools import cache
from types import SimpleNamespace
from typing import Any


class PainlessError(Exception):
    """A script that does not compile or fails at run time (the cluster answers 400)."""


_DECLARATION = re.compile(r"^(?:String|boolean|long|double|int|def)\s+(?=\w+\s*=)")
_LONG = re.compile(r"\b(\d+)L\b")
_ALLOWED = re.compile(r"^[\w\s.'\"()\[\]+\-*/<>=!,&|?:]*$")


@cache
def compile_script(source: str) -> Callable[[Any, Any], Any]:
    """The script as a Python function of (doc, params)."""
    lines = ["def _script(doc, params, Math):"]
    depth, buffer, opened = 1, "", [False]
    for char in source:
        if char == "{":
            lines.append("    " * depth + _header(buffer.strip()))
            depth, buffer = depth + 1, ""
            opened.append(False)
        elif char == "}":
            if buffer.strip():
                raise PainlessError(f"missing ';' before '}}': {buffer.strip()!r}")
            if not opened.pop():
                lines.append("    " * depth + "pass")
            depth -= 1
            buffer = ""
        elif char == ";":
            lines.append("    " * depth + _statement(buffer.strip()))
            opened[-1] = True
            buffer = ""
        else:
            buffer += char
    if buffer.strip() or depth != 1:
        raise PainlessError("unbalanced braces or a statement without ';'")
    namespace: dict[str, Any] = {}
    try:
        exec(compile("\n".join(lines), "<painless>", "exec"), namespace)  # noqa: S102 - test fake
    except SyntaxError as exc:
        raise PainlessError(f"compile error: {exc}") from exc
    return namespace["_script"]


def _header(text: str) -> str:
    if text == "else":
        return "else:"
    for keyword, python in (("else if", "elif"), ("if", "if")):
        if text.startswith(keyword) and text[len(keyword) :].strip().startswith("("):
            return f"{python} {_expression(text[len(keyword) :].strip())}:"
    raise PainlessError(f"unsupported block header {text!r}")


def _statement(text: str) -> str:
    if text.startswith("return "):
        return f"return {_expression(text[7:])}"
    text = _DECLARATION.sub("", text)
    if "*=" in text:
        name, _, value = text.partition("*=")
        return f"{name.strip()} = {name.strip()} * ({_expression(value)})"
    name, equals, value = text.partition("=")
    if not equals or not re.fullmatch(r"\w+", name.strip()):
        raise PainlessError(f"unsupported statement {text!r}")
    return f"{name.strip()} = {_expression(value)}"


def _expression(text: str) -> str:
    if not _ALLOWED.match(text):
        raise PainlessError(f"unsupported characters in {text!r}")
    text = _LONG.sub(r"\1", text)
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    text = text.replace("(double)", "float").replace(".startsWith(", ".startswith(")
    text = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", text))
    return text.strip()


class _Instant:
    def __init__(self, at: datetime) -> None:
        self._at = at

    def toInstant(self) -> _Instant:
        return self

    def toEpochMilli(self) -> int:
        return math.floor(self._at.timestamp() * 1000)


class _Values:
    def __init__(self, name: str, values: list[Any]) -> None:
        self._name, self._values = name, values

    def size(self) -> int:
        return len(self._values)

    @property
    def value(self) -> Any:
        if not self._values:
            raise PainlessError(
                f"A document doesn't have a value for a field! Use doc[<field>].size()==0 to check ({self._name})"
            )
        return self._values[0]


class DocValues:
    """``doc`` for one document: only mapped fields exist, typed as the mapping says."""

    def __init__(self, index_name: str, properties: dict[str, Any], source: dict[str, Any]) -> None:
        self._index, self._properties, self._source = index_name, properties, source

    def containsKey(self, name: str) -> bool:
        return name == "_index" or name in self._properties

    def __getitem__(self, name: str) -> _Values:
        if name == "_index":
            return _Values(name, [self._index])
        spec = self._properties.get(name)
        if spec is None:
            raise PainlessError(f"No field found for [{name}] in mapping")
        raw = self._source.get(name)
        values = [v for v in (raw if isinstance(raw, list) else [raw]) if v is not None]
        if spec.get("type") in ("date", "date_nanos"):
            values = [_Instant(datetime.fromisoformat(str(v))) for v in values]
        return _Values(name, values)


_MATH = SimpleNamespace(
    exp=math.exp, log=math.log, log10=math.log10, max=max, min=min, sqrt=math.sqrt, abs=abs, pow=math.pow
)


def run(source: str, doc: DocValues, params: dict[str, Any]) -> float:
    try:
        result = compile_script(source)(doc, SimpleNamespace(**params), _MATH)
    except PainlessError:
        raise
    except (AttributeError, TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
        raise PainlessError(f"runtime error: {type(exc).__name__}: {exc}") from exc
    score = float(result)
    if score < 0 or math.isnan(score):
        raise PainlessError(f"script score function must not produce negative scores, but got: [{score}]")
    return score
