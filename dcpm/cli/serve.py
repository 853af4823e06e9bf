"""The two long-running commands, `serve` (the daemon) and `mcp` (the Model Context Protocol
server): they parse their options and hand over to `dcpm.server.daemon.run_daemon` and
`dcpm.mcp.server.serve_mcp`, imported inside the commands so that `dcpm --help` loads neither
uvicorn nor the MCP SDK."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from dcpm.cli.output import settings
from dcpm.errors import Invalid

OpenNetwork = Annotated[bool, typer.Option("--allow-open-network", help="Serve an address other machines reach even "
                                                                      "with no credential (DCPM_ALLOW_OPEN_NETWORK).")]


LogLevel = Annotated[str, typer.Option(help="critical, error, warning, info or debug.")]
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def log_level_named(level: str, extra: tuple[str, ...] = ()) -> str:
    """`level` in lower case, refused (not a traceback from logging or uvicorn) when it names none."""
    if level.lower() not in LOG_LEVELS + extra:
        raise Invalid(f"--log-level takes {', '.join(LOG_LEVELS + extra)}, not {level!r}")
    return level.lower()


def settings_with(allow_open_network: bool):  # type: ignore[no-untyped-def]
    """The settings, with --allow-open-network (when given) over DCPM_ALLOW_OPEN_NETWORK."""
    return settings(**({"allow_open_network": True} if allow_open_network else {}))


def serve(host: Annotated[Optional[str], typer.Option(help="Bind address (DCPM_HOST).")] = None,
          port: Annotated[Optional[int], typer.Option(min=1, max=65535, help="Port (DCPM_PORT).")] = None,
          allow_open_network: OpenNetwork = False, log_level: LogLevel = "info") -> None:
    """Run the daemon: HTTP API, writer and index upkeep. OpenAPI page at /docs.

    An address other than loopback (e.g. --host 0.0.0.0) is refused while no admin token is set and access control
    is off, since every caller would be the admin: set DCPM_API_TOKEN, or pass --allow-open-network.
    Requests must name the daemon in their Host header (loopback names, the bound address,
    DCPM_ALLOWED_HOSTS), and browsers may call it from its own pages only."""
    log_level = log_level_named(log_level, ("trace",))  # uvicorn's own level too
    from dcpm.server.daemon import run_daemon

    run_daemon(settings_with(allow_open_network), host, port, log_level)


def mcp(user: Annotated[Optional[str], typer.Option(help="The user every tool call acts for (DCPM_MCP_USER); "
                                                         "unset: the client names it in request metadata "
                                                         "(stdio only).")] = None,
        transport: Annotated[str, typer.Option(help="stdio (for Claude Desktop, Cursor) or http (streamable "
                                                    "HTTP at /mcp).")] = "stdio",
        host: Annotated[str, typer.Option(help="Bind address with --transport http (loopback unless "
                                               "--allow-open-network).")] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=1, max=65535, help="Port with --transport http.")] = 8421,
        allow_delete: Annotated[Optional[bool], typer.Option("--allow-delete/--no-allow-delete",
                                                             help="Offer the model delete_memory "
                                                                  "(DCPM_MCP_ALLOW_DELETE).")] = None,
        allow_open_network: OpenNetwork = False, log_level: LogLevel = "warning") -> None:
    """Serve the memory over the Model Context Protocol. Uses the daemon when one serves the data
    directory, else opens the store itself. On stdio nothing but MCP goes to stdout.

    The HTTP transport checks no credential and acts with this command's own (the admin token), so it
    needs --user (it never takes the user from request metadata, which any caller could set) and
    a loopback address; anyone who reaches its port acts as that user."""
    import logging
    import sys

    from dcpm.mcp.server import serve_mcp

    logging.basicConfig(level=log_level_named(log_level).upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    serve_mcp(settings_with(allow_open_network), user=user, transport=transport, host=host, port=port,
              allow_delete=allow_delete)
