"""Plain lists of facts: a CLAUDE.md or AGENTS.md, a ChatGPT or Claude "memories" export.

``markdown``: every list item is one fact, and so is every paragraph; an item under a parent
that ends with ":" carries the parent's words ("Code style: use tabs"); a fenced code block
is one fact; YAML front matter, HTML comments and rules are left out. The nearest heading
is kept in the metadata and hints at the kind of fact ("## Preferences").
``text``: every non-empty line is one fact (list markers stripped), as ChatGPT's "Manage
memories" list copies out.

A line that appears twice is one memory. The file has no dates: each memory is dated by the
file's last modification, the latest it can be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import fact_types
from .drafts import Draft, Source, fail, file_time, provenance

FORMAT = "markdown"
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")


@dataclass
class _Item:
    line: int
    parts: list[str]
    section: str | None
    indent: int = -1  # -1: a paragraph, not a list item
    parent: str | None = None  # the words of the item it hangs under ("Code style")
    children: int = 0
    block: bool = False  # a fenced code block: its lines stay lines

    @property
    def text(self) -> str:
        if self.block:
            return "\n".join(self.parts).strip()
        body = " ".join(p.strip() for p in self.parts if p.strip())
        return f"{self.parent}: {body}" if self.parent else body


@dataclass
class _Reader:
    name: str
    items: list[_Item] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    open_item: _Item | None = None
    stack: list[_Item] = field(default_factory=list)  # list items by indent, for nesting

    @property
    def section(self) -> str | None:
        return " > ".join(self.headings) or None

    def close(self) -> None:
        self.open_item = None

    def heading(self, level: int, title: str) -> None:
        self.close()
        self.stack.clear()
        self.headings = [*self.headings[: level - 1], title]

    def list_item(self, number: int, indent: int, body: str) -> None:
        while self.stack and self.stack[-1].indent >= indent:
            self.stack.pop()
        parent = self.stack[-1] if self.stack else None
        hang = parent is not None and parent.text.rstrip().endswith(":")
        item = _Item(
            number, [body], self.section, indent, parent.text.rstrip()[:-1] if hang and parent else None
        )
        if hang and parent is not None:
            parent.children += 1
        self.items.append(item)
        self.stack.append(item)
        self.open_item = item

    def plain(self, number: int, line: str) -> None:
        if self.open_item is not None and (self.open_item.indent < 0 or line[:1].isspace()):
            self.open_item.parts.append(line)  # a paragraph's next line, or an item's wrap
            return
        self.stack.clear()
        self.open_item = _Item(number, [line], self.section)
        self.items.append(self.open_item)


def read(path: Path, format_name: str = FORMAT) -> Source:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise fail(path.name, f"is not UTF-8 text (byte {exc.start}); is it the right file?") from exc
    lines = text.splitlines()
    items = _lines(lines) if format_name == "text" else _markdown(path.name, lines)
    created = file_time(path)
    drafts, seen, repeated = [], set(), 0
    for item in items:
        body = " ".join(item.text.split())
        if not body:
            continue
        if body in seen:
            repeated += 1
            continue
        seen.add(body)
        drafts.append(
            Draft(
                text=item.text.strip(),
                where=f"{path.name}:{item.line}",
                key=body,
                created_at=created,
                fact_type=fact_types.guess(body, item.section, "preference"),
                metadata=provenance(format_name, path, line=item.line, section=item.section),
            )
        )
    return Source(format_name, path, tuple(drafts), (f"{repeated} repeated lines",) if repeated else ())


def _lines(lines: list[str]) -> list[_Item]:
    items = []
    for number, line in enumerate(lines, start=1):
        match = _ITEM.match(line)
        body = match.group(2) if match else line
        if body.strip():
            items.append(_Item(number, [body], None))
    return items


def _markdown(name: str, lines: list[str]) -> list[_Item]:
    reader = _Reader(name)
    number = _after_front_matter(lines)
    fence: _Item | None = None
    in_comment = False
    while number < len(lines):
        line, number = lines[number], number + 1
        if fence is not None:
            if _FENCE.match(line):
                fence = None
            else:
                fence.parts.append(line)
            continue
        if in_comment or line.lstrip().startswith("<!--"):
            in_comment = "-->" not in line
            continue
        if _FENCE.match(line):
            reader.close()
            fence = _Item(number, [], reader.section, block=True)
            reader.items.append(fence)
        elif not line.strip() or _RULE.match(line):
            reader.close()
        elif heading := _HEADING.match(line):
            reader.heading(len(heading.group(1)), heading.group(2))
        elif item := _ITEM.match(line):
            reader.list_item(number, len(item.group(1).expandtabs(4)), item.group(2))
        else:
            reader.plain(number, line)
    if fence is not None:
        raise fail(f"{name}:{fence.line}", "a code block is opened here and never closed")
    return [i for i in reader.items if not (i.children and i.text.rstrip().endswith(":"))]


def _after_front_matter(lines: list[str]) -> int:
    if not lines or lines[0].strip() != "---":
        return 0
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            return index + 1
    return 0
