"""Importers: other memory programs' files as atlas-mcp memories, and an export they read.

One module per program reads its file into ``Draft``s (``drafts.py``); ``apply.py`` checks
them all through the service's write rules, then writes them. ``FORMATS`` is the one list of
what ``atlas-mcp import --format`` accepts; our own export format is ``portability.py``'s.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInput
from .drafts import Source

OWN_FORMAT = "atlas"  # atlas-mcp's own export (portability.py): every field, every owner


@dataclass(frozen=True, slots=True)
class Format:
    name: str
    module: str  # the reader, in this package
    id_prefix: str  # starts every imported id, so its origin shows in any listing
    reads: str  # what to point the command at, as the help and docs say it


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "mcp-memory",
            "mcp_memory",
            "mcpm",
            "the official MCP memory server's memory.jsonl (or memory.json)",
        ),
        Format(
            "mcp-memory-service",
            "mcp_memory_service",
            "mms",
            "mcp-memory-service's sqlite_vec.db, or a JSON export of it",
        ),
        Format(
            "mem0", "mem0", "mem0", "mem0's get_all() JSON ({'results': [...]}) or a list of its memories"
        ),
        Format("basic-memory", "basic_memory", "bm", "a basic-memory project folder (or one note)"),
        Format(
            "markdown", "markdown", "md", "a Markdown file: CLAUDE.md, a memories export; one fact per item"
        ),
        Format("text", "markdown", "txt", "a text file with one fact per line (a ChatGPT memories copy)"),
    )
}


def format_named(name: str) -> Format:
    found = FORMATS.get(name)
    if found is None:
        raise InvalidInput(f"unknown format {name!r}; use one of: {', '.join([OWN_FORMAT, *FORMATS])}")
    return found


def read_source(name: str, path: Path) -> Source:
    """Every record of ``path`` read as the ``name`` format describes; nothing is written."""
    chosen = format_named(name)
    reader: Callable[[Path, str], Source] = importlib.import_module(f"{__name__}.{chosen.module}").read
    return reader(path, chosen.name)
