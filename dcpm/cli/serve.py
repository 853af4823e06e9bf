"""The two long-running commands, `serve` (the daemon) and `mcp` (the Model Context Protocol
server): they parse their options and hand over to `dcpm.server.daemon.run_daemon` and
`dcpm.mcp.server.serve_mcp`, imported inside the commands so that `dcpm --help` loads neither
uvicorn nor the MCP SDK."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from dcpm.cli.output import settings


def serve(host: Annotated[Optional[str], typer.Option(help="Bind address (DCPM_HOST).")] = None,
          port: Annotated[Optional[int], typer.Option(help="Port (DCPM_PORT).")] = None,
          log_level: str = "info") -> None:
    """Run the daemon: HTTP API, writer and index upkeep. OpenAPI page at /docs."""
    from dcpm.server.daemon import run_daemon

    run_daemon(settings(), host, port, log_level)


def mcp(user: Annotated[Optional[str], typer.Option(help="The user every tool call acts for (DCPM_MCP_USER); "
                                                         "unset: the client names it in request metadata.")] = None,
        transport: Annotated[str, typer.Option(help="stdio (for Claude Desktop, Cursor) or http (streamable "
                                                    "HTTP at /mcp).")] = "stdio",
        host: Annotated[str, typer.Option(help="Bind address with --transport http.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port with --transport http.")] = 8421,
        allow_delete: Annotated[Optional[bool], typer.Option("--allow-delete/--no-allow-delete",
                                                             help="Offer the model delete_memory "
                                                                  "(DCPM_MCP_ALLOW_DELETE).")] = None,
        log_level: str = "warning") -> None:
    """Serve the memory over the Model Context Protocol. Uses the daemon when one serves the data
    directory, else opens the store itself. On stdio nothing but MCP goes to stdout."""
    import logging
    import sys

    from dcpm.mcp.server import serve_mcp

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    serve_mcp(settings(), user=user, transport=transport, host=host, port=port, allow_delete=allow_delete)
