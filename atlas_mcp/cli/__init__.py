"""The ``atlas-mcp`` command: thin shells over MemoryService, one module per command group.

``atlas-mcp`` with no command is ``atlas-mcp serve`` (stdio), so an MCP client config needs
nothing but the executable.
"""

from __future__ import annotations

import importlib
import sys

import click

from .. import __version__
from ..errors import AtlasError

# name -> "module:attribute". Commands load on first use: `atlas-mcp serve` then imports only
# what serving needs (not the eval, bench or Elasticsearch code), which shortens the cold
# start every MCP client pays when it spawns the server.
COMMANDS = {
    "serve": "serve:serve",
    "catalog": "catalog:catalog",
    "eval": "eval:eval_",
    "bootstrap": "es:bootstrap",
    "users": "es:users",
    "doctor": "es:doctor",
    "es-query": "es:es_query",
    "consolidate": "consolidate:consolidate",
    "recall": "recall:recall",
    "memories": "memories:memories",
    "stats": "stats:stats",
    "reindex": "reindex:reindex",
    "export": "portability:export",
    "import": "portability:import_",
    "bench": "bench:bench",
}


class AtlasGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target.split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AtlasError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=AtlasGroup, invoke_without_command=True)
@click.version_option(__version__, prog_name="atlas-mcp")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Persistent, per-user long-term memory for AI agents, over MCP."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(cli.get_command(ctx, "serve"))


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="atlas-mcp", standalone_mode=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
