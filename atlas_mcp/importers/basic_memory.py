"""basic-memory: a project folder of its Markdown notes (or one note).

A note is YAML front matter (``title``, ``type``, ``permalink``, ``tags``) and a body in which
``- [category] content #tag (context)`` lines are observations and ``- relation_type
[[Other note]]`` lines are relations, wherever they stand; the rest is prose.

Each observation becomes a fact about the note's subject ("Sarah Okafor: Allergic to peanuts"),
its category choosing the kind of fact when it names one ("[preference]"), its tags kept in
the metadata; each relation a fact between two notes ("Sarah Okafor works at Acme Robotics");
each prose paragraph a fact of the note. Notes carry no dates in their files: each note's
memories are dated by the file's last modification. Its SQLite index is not read: the notes
are the source of truth there too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from . import fact_types
from .drafts import Draft, Source, fail, file_time, provenance

FORMAT = "basic-memory"
_OBSERVATION = re.compile(r"^\s*[-*]\s+\[([^\[\]]+)\]\s+(.+?)\s*$")
_RELATION = re.compile(r"^\s*[-*]\s+([^\[\]]+?)\s+\[\[([^\[\]]+)\]\]\s*(?:\((.*)\))?\s*$")
_TAG = re.compile(r"(?<!\S)#([\w/-]+)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def read(path: Path, format_name: str = FORMAT) -> Source:
    notes = [path] if path.is_file() else sorted(_notes(path))
    if not notes:
        raise fail(path.name, "holds no Markdown notes (*.md)")
    root = path.parent if path.is_file() else path
    drafts = [d for note in notes for d in _note_drafts(note, note.relative_to(root).as_posix())]
    return Source(FORMAT, path, tuple(drafts))


def _notes(folder: Path) -> Iterator[Path]:
    for note in folder.rglob("*.md"):
        if not any(part.startswith(".") for part in note.relative_to(folder).parts):
            yield note  # hidden folders hold the program's own state, not notes


@dataclass(frozen=True, slots=True)
class _Note:
    """What every memory of one note shares."""

    title: str
    identity: str  # its permalink, else its path: what keys its records
    relative: str
    created: datetime
    provenance: dict[str, Any]
    tags: list[str]

    def draft(self, text: str, number: int, key: str, fact_type: str | None, **extra: Any) -> Draft:
        tags = extra.pop("tags", None)
        return Draft(
            text=text,
            where=f"{self.relative}:{number}",
            key=f"{key}\0{self.identity}",
            created_at=self.created,
            fact_type=fact_type,
            metadata=({"tags": tags} if tags else {}) | _with(self.provenance, **extra),
        )


def _with(origin: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"imported": origin["imported"] | {k: v for k, v in extra.items() if v}}


def _note_drafts(path: Path, relative: str) -> Iterator[Draft]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise fail(relative, f"is not UTF-8 text (byte {exc.start})") from exc
    front, body, first_line = _front_matter(text, relative)
    title = str(front.get("title") or path.stem)
    origin = provenance(
        FORMAT,
        path,
        note=relative,
        permalink=front.get("permalink"),
        title=title,
        note_type=front.get("type"),
    )
    note = _Note(
        title,
        str(front.get("permalink") or relative),
        relative,
        file_time(path),
        origin,
        _tags(front.get("tags")),
    )
    paragraph: list[str] = []
    paragraph_line = 0
    in_fence = False
    for number, line in enumerate(body, start=first_line):
        if _FENCE.match(line):
            in_fence = not in_fence
        observation = None if in_fence else _OBSERVATION.match(line)
        relation = None if in_fence or observation else _RELATION.match(line)
        if observation or relation or not line.strip() or (line.startswith("#") and not in_fence):
            if paragraph:
                yield _prose(note, paragraph, paragraph_line)
                paragraph = []
            if observation:
                yield _observation(note, observation, number)
            elif relation:
                yield _relation(note, relation, number)
            continue
        if not paragraph:
            paragraph_line = number
        paragraph.append(line)
    if paragraph:
        yield _prose(note, paragraph, paragraph_line)


def _observation(note: _Note, match: re.Match[str], number: int) -> Draft:
    category, content = match.group(1).strip(), match.group(2)
    words = " ".join(_TAG.sub("", content).split())
    kind = fact_types.from_label(category) or fact_types.from_text(words, "world")
    return note.draft(
        f"{note.title}: {words}",
        number,
        f"observation\0{category}\0{words}",
        kind,
        category=category,
        tags=_TAG.findall(content),
    )


def _relation(note: _Note, match: re.Match[str], number: int) -> Draft:
    kind, target = match.group(1).strip(), match.group(2).strip()
    text = f"{note.title} {kind.replace('_', ' ')} {target}"
    if match.group(3):
        text += f" ({match.group(3).strip()})"
    key = f"relation\0{kind}\0{target}"
    return note.draft(
        text, number, key, fact_types.from_text(text, "world"), relation={"type": kind, "target": target}
    )


def _prose(note: _Note, lines: list[str], number: int) -> Draft:
    words = " ".join(" ".join(lines).split())
    return note.draft(f"{note.title}: {words}", number, f"prose\0{words}", "world", tags=note.tags)


def _front_matter(text: str, relative: str) -> tuple[dict[str, Any], list[str], int]:
    """The front matter's simple YAML (scalars and lists, as basic-memory writes it) and the
    body's lines with the number of the first."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, lines, 1
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        raise fail(f"{relative}:1", "front matter opened with --- is never closed") from None
    values: dict[str, Any] = {}
    key = None
    for line in lines[1:end]:
        if key is not None and re.match(r"^\s*-\s+", line):
            values.setdefault(key, [])
            if isinstance(values[key], list):
                values[key].append(_scalar(line.split("-", 1)[1]))
            continue
        name, colon, rest = line.partition(":")
        if colon and name.strip() and not name.startswith((" ", "\t")):
            key = name.strip()
            values[key] = _scalar(rest) if rest.strip() else []
    return values, lines[end + 1 :], end + 2


def _scalar(raw: str) -> str:
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _tags(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value if str(v)]
    if isinstance(value, str) and value:
        return [t.strip() for t in value.strip("[]").split(",") if t.strip()]
    return []
