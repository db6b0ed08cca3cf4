"""``atlas-mcp memories``: browse one user's stored memories and follow their history."""

from __future__ import annotations

import json
from typing import Any

import click

from ..domain.model import Memory
from ..errors import NotFound
from ..inspection import MemoryDetail, memory_detail
from ..views import memory_view
from .options import config_option, require_known_user, service_session, settings_from, user_option
from .tables import clip, echo_json, json_option, status, table, type_option

LIST_HEADERS = ["id", "type", "when", "status", "text"]


@click.group()
def memories() -> None:
    """Browse a user's memories (read-only)."""


@memories.command("list")
@type_option
@click.option("--include-superseded", is_flag=True, help="Also list facts that were replaced.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0)
@json_option
@config_option
@user_option
def list_memories(
    memory_types: tuple[str, ...],
    include_superseded: bool,
    limit: int,
    offset: int,
    as_json: bool,
    config_file: str | None,
    user: str | None,
) -> None:
    """A user's memories, newest first (``--type catalog`` lists the shared catalog)."""
    settings = settings_from(config_file, user=user)
    owner = None if memory_types == ("catalog",) else settings.user
    with service_session(settings) as service:
        found = service.list(
            owner, memory_types=memory_types or None, include_superseded=include_superseded,
            limit=limit, offset=offset,
        )  # fmt: skip
        if not found and owner is not None:
            require_known_user(service, owner)
    if as_json:
        echo_json({"memories": [memory_view(m) for m in found]})
        return
    click.echo(table(LIST_HEADERS, [_row(m) for m in found]) if found else "no memories")


@memories.command("show")
@click.argument("memory_id")
@json_option
@config_option
@user_option
def show(memory_id: str, as_json: bool, config_file: str | None, user: str | None) -> None:
    """Every field of one memory, what replaced it, what it replaced and its source episodes."""
    settings = settings_from(config_file, user=user)
    with service_session(settings) as service:
        try:
            detail = memory_detail(service, settings.user, memory_id)
        except NotFound:
            require_known_user(service, settings.user)
            raise
    if as_json:
        echo_json(detail_view(detail))
        return
    click.echo(_fields(memory_view(detail.memory) | {"status": status(detail.memory)}))
    _section("Replaced by (direct successor first)", LIST_HEADERS, [_row(m) for m in detail.newer])
    older = [[p.depth, *_row(p.memory)] for p in detail.older]
    _section("Replaces (depth 1 = directly)", ["depth", *LIST_HEADERS], older)
    _section("Source episodes", LIST_HEADERS, [_row(m) for m in detail.sources])
    if detail.missing:
        click.echo(f"\nLinked but no longer stored (forgotten): {', '.join(detail.missing)}")


def detail_view(detail: MemoryDetail) -> dict[str, Any]:
    return {
        "memory": memory_view(detail.memory),
        "newer": [memory_view(m) for m in detail.newer],
        "older": [{"depth": p.depth, "memory": memory_view(p.memory)} for p in detail.older],
        "source_episodes": [memory_view(m) for m in detail.sources],
        "missing": list(detail.missing),
    }


def _row(memory: Memory) -> list[Any]:
    return [memory.id, memory.memory_type.value, memory.timeline_at, status(memory), clip(memory.text, 60)]


def _section(title: str, headers: list[str], rows: list[list[Any]]) -> None:
    if rows:
        click.echo(f"\n{title}:\n{table(headers, rows)}")


def _fields(view: dict[str, Any]) -> str:
    width = max(len(k) for k in view)
    lines = []
    for key, value in view.items():
        if key == "steps":
            value = "\n".join(f"{' ' * (width + 2)}{s['order']}. {s['instruction']}" for s in value).lstrip()
        elif isinstance(value, dict | list):
            value = json.dumps(value, ensure_ascii=False)
        lines.append(f"{key.ljust(width)}  {value}")
    return "\n".join(lines)
