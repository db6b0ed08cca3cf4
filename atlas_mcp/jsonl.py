"""JSON Lines files (catalog loads, exports, recordings): one JSON object per line, and a line
that is not one is named by its number, so the person can open the file at the mistake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import InvalidInput


def objects(path: Path, *, errors: str = "strict") -> Iterator[tuple[str, dict[str, Any]]]:
    """``("<path>:<line>", object)`` for every line that is not blank. ``errors`` is how bytes
    that are not UTF-8 are decoded (``"replace"``: read on rather than refuse the file)."""
    with path.open(encoding="utf-8", errors=errors) as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{where}: not valid JSON ({exc.msg})") from exc
            if not isinstance(value, dict):
                raise InvalidInput(f"{where}: each line must be a JSON object")
            yield where, value
