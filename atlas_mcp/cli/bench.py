"""``atlas-mcp bench``: seed synthetic corpora and measure the server through a real MCP client."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

import click
from platformdirs import user_cache_dir

from ..log import configure_logging
from .options import EXISTING_DIR, OutputFile


def _counts(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v.replace("_", "")) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter("a comma-separated list of sizes, e.g. 1000,10000,100000") from None


def _sizes(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, ...]:
    sizes = _counts(value)
    if not sizes or min(sizes) < 10:
        raise click.BadParameter("every size must be at least 10")
    return sizes


def _bursts(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, ...]:
    bursts = _counts(value)
    if bursts and min(bursts) < 1:
        raise click.BadParameter("every burst must be at least one write")
    return bursts


def _real_text(_ctx: click.Context, _param: click.Parameter, value: str) -> Path | None:
    from ..bench import realtext

    if value == "auto":
        found = realtext.default_path()
        if found is None:
            click.echo(f"real-text corpus skipped: {realtext.DEFAULT_PATH} not found", err=True)
        return found
    if value == "none":
        return None
    path = Path(value)
    if not path.is_file():
        raise click.BadParameter(f"{path} is not a file (LoCoMo's locomo10*.json)")
    return path


@click.command()
@click.option(
    "--memories",
    default="1000,10000",
    callback=_sizes,
    show_default=True,
    help="Corpus sizes per tenant, comma-separated.",
)
@click.option(
    "--tenants",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="Tenants in the store, each holding that many memories; tenant 0 is measured.",
)
@click.option("--queries", type=click.IntRange(10), default=200, show_default=True, help="Recalls to time.")
@click.option("--writes", type=click.IntRange(1), default=100, show_default=True, help="Writes to time.")
@click.option(
    "--clients",
    type=click.IntRange(1),
    default=4,
    show_default=True,
    help="Concurrent MCP clients for the throughput measurement.",
)
@click.option("--seed", type=int, default=7, show_default=True, help="Corpus seed.")
@click.option(
    "--real-text",
    default="auto",
    callback=_real_text,
    show_default=True,
    help="LoCoMo JSON for the real-text and one-long-chat corpora; auto: ../shared's dev split if present; none: skip.",
)
@click.option(
    "--bursts",
    "burst_sizes",
    default="100,1000,5000",
    callback=_bursts,
    show_default=True,
    help="Write bursts to time the recall right after (empty: skip).",
)
@click.option(
    "--kill-burst",
    type=click.IntRange(0),
    default=5_000,
    show_default=True,
    help="Writes in the burst the server is killed in the middle of (0: skip).",
)
@click.option("--http", is_flag=True, help="Also measure over streamable HTTP (one server, many clients).")
@click.option(
    "--ts-client",
    is_flag=True,
    help="Also time the recalls through the official TypeScript MCP client (needs node and the SDK; skipped, saying why, without them).",
)
@click.option(
    "--ts-sdk",
    type=click.Path(file_okay=False, path_type=Path),
    help="The @modelcontextprotocol/sdk package for --ts-client (default: where scripts/install_peers.sh puts it, ./.peers/node/node_modules/@modelcontextprotocol/sdk).",
)
@click.option("--json", "json_file", type=OutputFile(), help="Write the report here.")
@click.option(
    "--plot",
    "plot_file",
    type=OutputFile(),
    help="Draw latency vs. size to this PNG (needs the 'plot' extra).",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=lambda: Path(user_cache_dir("atlas-mcp", appauthor=False)) / "bench",
    show_default="user cache dir",
    help="Where corpus embeddings are kept between runs.",
)
@click.option(
    "--work-dir", type=EXISTING_DIR, help="Where the temporary stores go (default: the system temp dir)."
)
@click.option(
    "--encrypted",
    is_flag=True,
    help="Encrypt every store at rest (a random raw key): the cost of ATLAS_ENCRYPTION_KEY.",
)
def bench(
    memories: tuple[int, ...],
    tenants: int,
    queries: int,
    writes: int,
    clients: int,
    seed: int,
    real_text: Path | None,
    burst_sizes: tuple[int, ...],
    kill_burst: int,
    http: bool,
    ts_client: bool,
    ts_sdk: Path | None,
    json_file: Path | None,
    plot_file: Path | None,
    cache_dir: Path,
    work_dir: Path | None,
    encrypted: bool,
) -> None:
    """Benchmark the embedded engine: latency, throughput, cold start, memory, disk.

    Each size gets a fresh store seeded through the engine's bulk path; every number is then
    measured through a real MCP client talking to an `atlas-mcp serve` process over stdio.
    """
    from ..bench import report, typescript
    from ..bench.runner import BenchConfig, run
    from ..inference.embedder import default_embedder

    configure_logging("INFO")
    if ts_client:
        ts_sdk = ts_sdk or typescript.default_sdk()
        if reason := typescript.missing(ts_sdk):
            click.echo(f"TypeScript client skipped: {reason}", err=True)
            ts_sdk = None
    else:
        ts_sdk = None
    for client in ("httpx", "httpx2"):  # one line per HTTP request otherwise
        logging.getLogger(client).setLevel(logging.WARNING)
    config = BenchConfig(
        sizes=memories, tenants=tenants, queries=queries, writes=writes, clients=clients, seed=seed,
        http=http, cache_dir=cache_dir, work_dir=work_dir, real_text=real_text, bursts=burst_sizes,
        kill_burst=kill_burst, encryption_key=secrets.token_hex(32) if encrypted else None, ts_sdk=ts_sdk,
    )  # fmt: skip
    result = run(config, default_embedder())
    click.echo(report.table(result))
    if stages := report.stage_table(result):
        click.echo(
            f"\nWhere a recall's CPU goes, in process (the rest of the server CPU above is MCP):\n{stages}"
        )
    for line in report.client_lines(result):
        click.echo(line)
    for line in report.burst_lines(result):
        click.echo(line)
    click.echo(f"\n{report.es_line(result)}")
    click.echo(report.conditions_line(result))
    if json_file:
        report.write_json(result, json_file)
    if plot_file:
        report.plot(result, plot_file)
