"""``atlas-mcp serve``: run the MCP server over stdio (default) or streamable HTTP."""

from __future__ import annotations

import errno
import gc
import socket
import threading
import time
from typing import TYPE_CHECKING

import anyio
import click

from .. import scopes
from ..app import open_service
from ..config import Settings
from ..domain.audit import Actor
from ..errors import ConfigurationError, InvalidInput
from ..log import configure_logging, get_logger
from .options import config_option, settings_from, user_option

if TYPE_CHECKING:
    from ..service import MemoryService

log = get_logger(__name__)


@click.command()
@click.option("--transport", type=click.Choice(["stdio", "http"]), default=None, help="Default: stdio.")
@click.option("--host", default=None, help="HTTP bind address (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="HTTP port (default 8765).")
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    default=None,
    help="Serve HTTP without tokens (loopback hosts only; for local experiments).",
)
@click.option(
    "--scopes",
    "user_scopes",
    default=None,
    help="The tools the stdio user may use, e.g. 'recall' for read-only (default: all; ATLAS_USER_SCOPES).",
)
@config_option
@user_option
def serve(
    transport: str | None,
    host: str | None,
    port: int | None,
    insecure_no_auth: bool | None,
    user_scopes: str | None,
    config_file: str | None,
    user: str | None,
) -> None:
    """Serve the memory tools (stdio unless --transport http)."""
    settings = settings_from(
        config_file,
        transport=transport,
        host=host,
        port=port,
        insecure_no_auth=insecure_no_auth,
        user=user,
        user_scopes=_scopes_flag(user_scopes),
    )
    configure_logging(settings.log_level)
    for warning in settings.check_serving():
        log.warning(warning)
    listener = _listen(settings.host, settings.port) if settings.transport == "http" else None
    service = open_service(settings)
    _sweep_in_background(service, settings)
    try:
        if listener is not None:
            anyio.run(_serve_http, service, settings, listener)
        else:
            # A small store's caches load first, alone: loaded beside the MCP SDK's imports
            # (both hold the interpreter lock) they finished ~0.3 s after `initialize`, and the
            # first recall waited for them. The rest of the warm-up (model sessions, which
            # release the lock) then overlaps the imports.
            _load_small_store(service, settings.user)
            _warm_up_in_background(service, settings.user)
            anyio.run(_serve_stdio, service, settings)
    finally:
        service.close()


def _scopes_flag(value: str | None) -> list[str] | None:
    if value is None:
        return None
    try:
        return scopes.ordered(scopes.parse(value))
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint="--scopes") from exc


async def _serve_stdio(service: MemoryService, settings: Settings) -> None:
    from ..mcp.server import build_server
    from ..mcp.stdio import run_stdio

    log.info(
        "serving",
        transport="stdio",
        user=settings.user,
        scopes=scopes.ordered(settings.user_scopes),
        data_dir=str(settings.data_dir),
    )
    await run_stdio(build_server(service, settings.user, settings.profile, user_scopes=settings.user_scopes))


def _load_small_store(service: MemoryService, user: str) -> None:
    try:
        service.warm_rows(user)
    except Exception as exc:  # noqa: BLE001 - it only speeds up the first recall, which will say what is wrong
        log.warning("could not load the store's caches at start", error=str(exc))


FULL_COLLECTION_AFTER = 100  # middle collections between two full ones once start-up is frozen


def _warm_up_in_background(service: MemoryService, user: str) -> None:
    """Load the model session and the stdio user's vectors while the client is still idle,
    so the first recall does not pay for them (~1 s at 100k memories)."""

    def warm_up() -> None:
        service.warm(user)
        service.preload(user)  # once the first recall is answered
        # What start-up and the warm-up made (modules, models, the store's caches: ~1M objects
        # at 100k memories) lives as long as the process: out of the collector's sight, a full
        # collection no longer walks it (~0.1 s of CPU at 100k, once every ~60 recalls).
        gc.freeze()
        # What recalls keep from then on is mostly the memory cache's churn: at 100k memories
        # ~900 objects a recall outlive the young collections, and the default rule (a full
        # collection once those reach a quarter of what the last one kept) walked the ~100k
        # the caches hold every ~30 recalls (50-135 ms each). A full collection at most every
        # FULL_COLLECTION_AFTER middle ones (~900 recalls there) leaves cycles to the young
        # collections, which take nearly all; the collection now (of what the freeze left:
        # nothing) starts that count at zero rather than at start-up's.
        gc.set_threshold(*gc.get_threshold()[:2], FULL_COLLECTION_AFTER)
        gc.collect()

    threading.Thread(target=warm_up, name="atlas-warm-up", daemon=True).start()


SWEEP = Actor("atlas-mcp serve (sweep)", "server")  # who the audit trail names for a sweep's removals
FIRST_SWEEP_S = 60.0  # after start-up: the first recalls should not share the cores with it


def _sweep_in_background(service: MemoryService, settings: Settings) -> None:
    """Remove expired and aged-out memories ([retention]) soon after start, then every
    ``every_hours``; a failed sweep is logged and tried again next time."""
    rules, every = settings.retention.rules(), settings.retention.every_hours * 3600

    def sweep() -> None:
        wait = FIRST_SWEEP_S
        while True:
            time.sleep(wait)
            wait = every
            try:
                gone = service.prune(rules, actor=SWEEP)
            except Exception as exc:  # noqa: BLE001 - the next sweep tries again; serving goes on
                log.warning("could not remove expired memories", error=str(exc))
                continue
            if gone:
                log.info("removed expired or aged-out memories", count=len(gone))

    threading.Thread(target=sweep, name="atlas-sweep", daemon=True).start()


def _listen(host: str, port: int) -> socket.socket:
    """Bind before loading anything, so a taken port is one clear line, not a server's traceback."""
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        reason = (exc.strerror or str(exc)).split(" (while attempting")[
            0
        ]  # create_server appends the address
        hint = ": another server is using it, choose another --port" if exc.errno == errno.EADDRINUSE else ""
        raise ConfigurationError(f"cannot listen on {host}:{port}: {reason}{hint}") from exc


async def _serve_http(service: MemoryService, settings: Settings, listener: socket.socket) -> None:
    import uvicorn

    from ..consolidation import server_scheduler
    from ..mcp.http import build_http_app, describe
    from ..mcp.server import build_server

    server = build_server(service, settings.user, settings.profile, user_scopes=settings.user_scopes)
    scheduler = server_scheduler(server, service, settings)  # None when consolidation is off
    app = build_http_app(server, settings, service=service)
    log.info("serving", transport="http", **describe(settings))
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning", lifespan="on")
    # No user's warm-up here (``_warm_up_in_background``), but the rows of an upgraded store
    # still get what recall reads of them kept with them, once the first recall is answered.
    threading.Thread(target=service.keep_row_facts, name="atlas-row-facts", daemon=True).start()
    async with anyio.create_task_group() as background:
        if scheduler is not None:
            background.start_soon(scheduler.run)
        await uvicorn.Server(config).serve(sockets=[listener])
        background.cancel_scope.cancel()
