"""``atlas-mcp recall``: what the agent would recall for a query, and why (``--explain``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import click

from ..domain.ranking import COLUMNS, FORMULA, Hit
from ..inspection import explain_recall, when
from ..views import recalled_view
from .options import config_option, require_known_user, service_session, settings_from, user_option
from .tables import clip, echo_json, json_option, table, type_option


@click.command()
@click.argument("query")
@click.option("--k", "k", type=int, default=10, show_default=True, help="How many memories to return.")
@type_option
@click.option("--include-superseded", is_flag=True, help="Also return facts that were replaced.")
@click.option(
    "--min-relevance",
    type=click.FloatRange(0, 1),
    default=None,
    help="Drop memories below this relevance (default: the server's floor; 0 shows all).",
)
@click.option("--explain", is_flag=True, help="Show each memory's score breakdown.")
@click.option("--as-of", default=None, help="ISO-8601: what was true at that instant.")
@click.option("--since", default=None, help="ISO-8601: only memories of this time or later.")
@click.option("--until", default=None, help="ISO-8601: only memories of this time or earlier.")
@json_option
@config_option
@user_option
def recall(
    query: str,
    k: int,
    memory_types: tuple[str, ...],
    include_superseded: bool,
    min_relevance: float | None,
    explain: bool,
    as_of: str | None,
    since: str | None,
    until: str | None,
    as_json: bool,
    config_file: str | None,
    user: str | None,
) -> None:
    """Recall memories for QUERY as the agent would (use counts are left unchanged)."""
    settings = settings_from(config_file, user=user)
    with service_session(settings) as service:
        hits = explain_recall(
            service, settings.user, query, k,
            memory_types=memory_types, include_superseded=include_superseded, min_relevance=min_relevance,
            as_of=as_of, since=since, until=until,
        )  # fmt: skip
        if not hits:
            require_known_user(service, settings.user)
    if as_json:
        views = [
            recalled_view(h.memory, h.score, h.explanation if explain else None, h.relevance, h.outdated_by)
            for h in hits
        ]
        echo_json({"memories": views})
        return
    if not hits:
        click.echo("no memories matched")
        return
    click.echo(table(["#", "score", "relevance", "type", "id", "text", "outdated by"], _result_rows(hits)))
    if explain:
        click.echo(f"\nwhy: {FORMULA}")
        click.echo(table(EXPLAIN_HEADERS, _explain_rows(hits)))


EXPLAIN_HEADERS = ["#", *(column.label for column in COLUMNS)]


def _result_rows(hits: list[Hit]) -> Iterator[tuple[Any, ...]]:
    for rank, hit in enumerate(hits, start=1):
        yield (
            rank,
            hit.score,
            hit.relevance,
            hit.memory.memory_type.value,
            hit.memory.id,
            clip(hit.memory.text, 60),
            hit.outdated_by or "",
        )


def _explain_rows(hits: list[Hit]) -> Iterator[tuple[Any, ...]]:
    for rank, hit in enumerate(hits, start=1):
        values = [(c.kind, c.value(hit.explanation)) for c in COLUMNS]
        yield (rank, *(when(v) if kind == "time" else v for kind, v in values))
