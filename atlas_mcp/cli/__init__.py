"""The ``atlas-mcp`` command: thin shells over MemoryService, one module per command group.

``atlas-mcp`` with no command is ``atlas-mcp serve`` (stdio), so an MCP client config needs
nothing but the executable.
"""

from __future__ import annotations

import difflib
import importlib
import json
import sys
from typing import Any

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
    "prune": "prune:prune",
    "export": "portability:export",
    "import": "portability:import_",
    "bench": "bench:bench",
    "audit": "audit:audit",
    "rekey": "rekey:rekey",
}


class AtlasGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target.split(":")
        command: click.Command = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            close = difflib.get_close_matches(name, COMMANDS, n=1)
            ctx.fail(f"no command {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""))
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AtlasError as exc:
            raise click.ClickException(str(exc)) from exc
        except json.JSONDecodeError as exc:  # an input file that is not what the command reads
            raise click.ClickException(f"an input file is not valid JSON: {exc}") from exc
        except OSError as exc:  # a missing folder, a full disk, no permission: the person can fix it
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{where}{exc.strerror or exc}") from exc


@click.group(cls=AtlasGroup, invoke_without_command=True)
@click.version_option(__version__, prog_name="atlas-mcp")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Persistent, per-user long-term memory for AI agents, over MCP."""
    if ctx.invoked_subcommand is None:
        serve = cli.get_command(ctx, "serve")
        assert serve is not None  # COMMANDS names it
        ctx.invoke(serve)


def main(argv: list[str] | None = None) -> None:
    """Run the command; a mistake is one line on stderr and a non-zero exit, never a traceback."""
    try:
        code = cli.main(args=argv, prog_name="atlas-mcp", standalone_mode=False)
    except click.UsageError as exc:  # click would print the whole usage text first
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        click.echo(f"Error: {exc.format_message()}{where}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
