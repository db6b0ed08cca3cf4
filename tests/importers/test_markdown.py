"""Plain lists of facts: a CLAUDE.md (Markdown) and a ChatGPT-style memories list (text).

No program writes these: people do (and Claude Code's /init starts a CLAUDE.md), so the
samples here are hand-written in the shapes those files take."""

from __future__ import annotations

from pathlib import Path

from .helpers import run, stored

CLAUDE_MD = """\
---
description: project memory
---
# CLAUDE.md

## About me
- My name is Sarah and I work at Acme Robotics.
- I live in Lisbon
  and commute by tram.

## Preferences
- Code style:
  - use tabs
  - 100-character lines
- I prefer pnpm over npm
1. Answer in British English

<!-- a note to myself
that spans lines -->
## Rules
Never push to main
without a review.

```bash
pnpm test --run
```

- [x] Always run the tests before a commit
- I prefer pnpm over npm
"""

CHATGPT = """\
Is a vegetarian.
Lives in Berlin with partner Alex.
- Prefers short answers without emoji

Works as a data engineer at Northwind.
"""


def test_claude_md_items_sections_and_blocks(tmp_path: Path, monkeypatch):
    path = tmp_path / "CLAUDE.md"
    path.write_text(CLAUDE_MD, encoding="utf-8")
    result = run(
        monkeypatch, tmp_path / "data", "import", "--format", "markdown", "--user", "sarah", str(path)
    )
    assert result.exit_code == 0, result.output
    assert "imported 9 memories" in result.stderr and "left out: 1 repeated lines" in result.stderr
    memories = {m.text: m for m in stored(tmp_path / "data").values()}
    assert set(memories) == {
        "My name is Sarah and I work at Acme Robotics.",
        "I live in Lisbon and commute by tram.",  # a wrapped item is one fact
        "Code style: use tabs",  # a nested item carries its parent's words
        "Code style: 100-character lines",
        "I prefer pnpm over npm",
        "Answer in British English",
        "Never push to main without a review.",  # a paragraph is one fact
        "pnpm test --run",  # a code block is one fact, its lines kept
        "Always run the tests before a commit",
    }
    kinds = {text: m.fact_type for text, m in memories.items()}
    assert kinds["I live in Lisbon and commute by tram."] == "identity"  # "## About me"
    assert kinds["Code style: use tabs"] == "preference"
    assert kinds["Never push to main without a review."] == "constraint"  # "## Rules"
    origin = memories["Code style: use tabs"].metadata["imported"]
    assert origin == {
        "format": "markdown",
        "file": "CLAUDE.md",
        "line": 13,
        "section": "CLAUDE.md > Preferences",
    }
    again = run(
        monkeypatch, tmp_path / "data", "import", "--format", "markdown", "--user", "sarah", str(path)
    )
    assert "imported 0 memories" in again.stderr and "9 already present" in again.stderr


def test_a_memories_list_is_one_fact_a_line(tmp_path: Path, monkeypatch):
    path = tmp_path / "chatgpt-memories.txt"
    path.write_text(CHATGPT, encoding="utf-8")
    result = run(monkeypatch, tmp_path / "data", "import", "--format", "text", str(path))
    assert result.exit_code == 0 and "imported 4 memories for user 'default'" in result.stderr
    memories = {m.text: m for m in stored(tmp_path / "data").values()}
    assert memories["Is a vegetarian."].fact_type == "constraint"
    assert memories["Lives in Berlin with partner Alex."].fact_type == "identity"
    assert memories["Prefers short answers without emoji"].fact_type == "preference"
    assert memories["Works as a data engineer at Northwind."].metadata["imported"]["line"] == 5
