"""The ``atlas-mcp`` command: thin shells over MemoryService, one module per command group.

``atlas-mcp`` with no command is ``atlas-mcp serve`` (stdio), so an MCP client config needs
nothing but the executable.
"""

from __future__ import annotations

import sys

import click

from .. import __version__
from ..errors import AtlasError
from .bench import bench
from .catalog import catalog
from .es import COMMANDS as ES_COMMANDS
from .consolidate import consolidate
from .eval import eval_
from .memories import memories
from .portability import export, import_
from .recall import recall
from .reindex import reindex
from .serve import serve
from .stats import stats


class AtlasGroup(click.Group):
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
        ctx.invoke(serve)


cli.add_command(serve)
cli.add_command(catalog)
cli.add_command(eval_)
for _command in ES_COMMANDS:
    cli.add_command(_command)
cli.add_command(consolidate)
cli.add_command(recall)
cli.add_command(memories)
cli.add_command(stats)
cli.add_command(reindex)
cli.add_command(export)
cli.add_command(import_)
cli.add_command(bench)


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="atlas-mcp", standalone_mode=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
