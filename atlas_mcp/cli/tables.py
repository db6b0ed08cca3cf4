"""Plain-text rendering for operator commands: aligned tables and one-line values.

Human output is for reading; every command that prints tables also takes ``--json`` with the
same shapes the MCP tools return, for scripts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from ..domain.model import Memory, MemoryType
from ..inspection import when

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

TEXT_WIDTH = 72


def progress(length: int, label: str, show_pos: bool = False) -> ProgressBar[int]:
    """A progress bar on stderr: stdout stays for the command's output (and, in stdio, MCP)."""
    return click.progressbar(length=length, label=label, file=sys.stderr, show_pos=show_pos)


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts, not a table.")(fn)


def type_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    names = click.Choice([t.value for t in MemoryType])
    return click.option("--type", "memory_types", multiple=True, type=names, help="Only these types.")(fn)


def echo_json(payload: Any) -> None:
    click.echo(json.dumps(payload, ensure_ascii=False, indent=2))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers], *([_cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def clip(text: str, width: int = TEXT_WIDTH) -> str:
    """One line of at most ``width`` characters: newlines folded, the rest cut with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def status(memory: Memory) -> str:
    return "superseded" if memory.superseded_by else "live"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, datetime):
        return when(value)
    return str(value)
