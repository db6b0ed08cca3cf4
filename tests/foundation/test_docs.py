"""The docs cover the interface: every setting has a description and a row in the generated
settings reference, and every command is mentioned somewhere a user reads."""

from __future__ import annotations

import re
import runpy
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from atlas_mcp.cli import cli

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = runpy.run_path(str(ROOT / "scripts" / "settings_table.py"), run_name="settings_table")
READ_BY_USERS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_settings_reference_in_the_docs_is_current():
    document = GENERATOR["DOC"].read_text(encoding="utf-8")
    assert GENERATOR["rewritten"](document, GENERATOR["table_markdown"]()) == document, (
        "docs/configuration.md is stale: run .venv/bin/python scripts/settings_table.py"
    )


def _undescribed(under_scoring: bool) -> list[str]:
    return [
        f"[{table}] {key}" if table else key
        for table, key, field in GENERATOR["settings"]()
        if not (field.description or "").strip() and table.startswith("scoring") == under_scoring
    ]


def test_every_setting_says_what_it_does():
    assert _undescribed(under_scoring=False) == []


def test_every_scoring_knob_says_what_it_does():
    assert _undescribed(under_scoring=True) == []


def test_the_reference_has_a_row_for_every_setting():
    document = GENERATOR["DOC"].read_text(encoding="utf-8")
    rows = GENERATOR["table_markdown"]()
    for table, key, _ in GENERATOR["settings"]():
        heading = f"### `[{table}]`" if table else "### Top level"
        section = rows.split(heading, 1)[1].split("\n### ", 1)[0]
        assert f"| `{key}` |" in section, f"{key} has no row under {heading}"
    assert rows in document


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[str]:
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield " ".join((*path, name))


@pytest.mark.parametrize("command", list(_commands(cli)))
def test_every_command_is_mentioned_in_the_docs(command):
    said = re.compile(rf"(atlas-mcp |`){re.escape(command)}\b")
    assert any(said.search(page.read_text(encoding="utf-8")) for page in READ_BY_USERS), (
        f"no page in docs/ or the README mentions `atlas-mcp {command}`"
    )
