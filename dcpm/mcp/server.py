"""`dcpm mcp`: the memory served over the Model Context Protocol (Claude Desktop, Cursor, agent
frameworks) with the official SDK, on stdio or streamable HTTP.

The user every call acts for comes from the server's configuration (`dcpm mcp --user ana`,
DCPM_MCP_USER) or, when none is configured, from the client's request metadata
(`_meta["dcpm/user_id"]`, which the host application sets); never from a tool argument, which the
model writes. So a model cannot read, change or delete another user's memories by naming them,
and a memory id of another user reads as absent.

The tools are thin: they call the same operations as the HTTP API, on a daemon's client when one
serves the data directory and on a store opened here otherwise (`dcpm.service.open_memory`,
with the index upkeep and the writer's recovery loop running while the server does).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from dcpm import __version__
from dcpm.api.models import AddMemoryRequest, ItemOut, ListResponse, RawOut, SearchRequest, SearchResponse
from dcpm.api.protocol import Memory
from dcpm.domain import check_user_id
from dcpm.errors import Invalid, NotFound
from dcpm.mcp import render
from dcpm.mcp.results import (
    Deleted,
    Listing,
    MemoryDetail,
    Saved,
    SearchResult,
    deleted,
    listing,
    memory_detail,
    saved,
    search_result,
)
from dcpm.mcp.tool_server import MemoryToolServer, reply, validated

USER_META_KEY = "dcpm/user_id"
MAX_SEARCH_HITS = 50
MAX_LISTED = 100

INSTRUCTIONS = """\
Long-term memory of the person you are talking with, kept across conversations.
- Before answering anything personal (their preferences, plans, people, history, what they told
  you before), call search_memory. Each result line has the memory's date and id; a revised fact
  shows what was believed earlier or what holds now, and patterns inferred over many facts follow.
- When they tell you something durable about themselves (a preference, a fact of their life, a
  plan, a change of mind), call add_memory with it in one plain sentence. Earlier beliefs it
  replaces are kept as history automatically; do not search first to avoid duplicates.
- Do not save small talk, one-off task details, or secrets they did not ask you to keep."""

MemoryId = Annotated[str, Field(description="A memory id as search_memory or list_memories show it.")]


def build_server(memory: Memory, *, user_id: str | None = None, allow_delete: bool = False) -> MCPServer:
    """The MCP server over `memory`, acting for `user_id` (or the user in each request's metadata
    when None). `delete_memory` is offered only with `allow_delete`."""
    if user_id:
        check_user_id(user_id)
    server = MemoryToolServer("dcpm", instructions=INSTRUCTIONS, version=__version__)

    def user_of(ctx: Context) -> str:
        if user_id:
            return user_id
        meta = ctx.request_context.meta or {}
        named = meta.get(USER_META_KEY)
        if not isinstance(named, str) or not named:
            raise Invalid(f"no user configured: start the server with --user (DCPM_MCP_USER) or send "
                          f"_meta[{USER_META_KEY!r}] with each request")
        return check_user_id(named)

    def owned(memory_id: str, user: str) -> ItemOut | RawOut:
        """The memory if it belongs to `user`; another user's memory reads exactly like a missing one."""
        found = memory.get(memory_id)
        if found.user_id != user:
            raise NotFound(f"no memory with id {memory_id}")
        return found

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def add_memory(text: Annotated[str, Field(description="One plain sentence about the user.")], ctx: Context,
                   session_id: str | None = None) -> Annotated[CallToolResult, Saved]:
        """Save something durable about the user, in one plain sentence ("Ana switched from coffee
        to green tea"): preferences, facts of their life, people, plans, changes of mind. Call it
        when they tell you such a thing. Facts are extracted and reconciled with what is known;
        a belief it replaces stays in that fact's history."""
        request = validated(AddMemoryRequest, user_id=user_of(ctx), text=text, session_id=session_id,
                            metadata={"source": "mcp"})
        result = saved(memory.add_memory(request))
        return reply(render.saved_text(result), result)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def search_memory(query: Annotated[str, Field(description="What to look for, in plain words.")], ctx: Context,
                      limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_HITS, description="Most hits to return.")] = 10,
                      threshold: Annotated[float | None, Field(ge=0, le=1, description=(
                          "Only memories at least this relevant (0-1); around 0.4 keeps unrelated memories out. "
                          "Leave it out to see the best matches whatever their score."))] = None,
                      ) -> Annotated[CallToolResult, SearchResult]:
        """Search the user's memories; call it before answering anything personal. Returns one line
        per memory, best match first, with its date and id: facts (with what was believed earlier,
        or what is believed now when a hit was replaced), the user's own words, then patterns
        inferred over many memories."""
        user = user_of(ctx)
        request = validated(SearchRequest, user_id=user, query=query, limit=limit, threshold=threshold)
        try:
            response = memory.search(request)
        except NotFound:  # nothing stored for this user yet
            response = SearchResponse(user_id=user, query=query, hits=[], context="", encoder="", took_ms=0.0)
        result = search_result(response)
        return reply(render.search_text(result), result)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def get_memory(memory_id: MemoryId, ctx: Context) -> Annotated[CallToolResult, MemoryDetail]:
        """One memory by id: its text, the revisions of its fact (oldest first) and its history."""
        found = owned(memory_id, user_of(ctx))
        history = memory.history(memory_id).events if isinstance(found, ItemOut) else []
        result = memory_detail(found, history)
        return reply(render.detail_text(result), result)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def list_memories(ctx: Context, kind: Literal["fact", "identity", "summary", "raw"] | None = None,
                      limit: Annotated[int, Field(ge=1, le=MAX_LISTED)] = 20,
                      offset: Annotated[int, Field(ge=0)] = 0) -> Annotated[CallToolResult, Listing]:
        """The user's memories, oldest first: facts, identity items and session summaries, or the
        verbatim turns with kind="raw". Prefer search_memory to find something specific."""
        user = user_of(ctx)
        try:
            response = memory.list_memories(user, kind=kind, limit=limit, offset=offset)
        except NotFound:
            response = ListResponse(user_id=user, total=0, items=[])
        result = listing(response, offset)
        return reply(render.listing_text(result), result)

    if allow_delete:
        @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
        def delete_memory(memory_id: MemoryId, ctx: Context) -> Annotated[CallToolResult, Deleted]:
            """Permanently delete one memory, only when the user asks you to forget it. The
            revision it replaced, if any, becomes the current belief again."""
            owned(memory_id, user_of(ctx))
            result = deleted(memory.delete_memory(memory_id))
            return reply(render.deleted_text(result), result)

    return server


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """On stdio, stdout is the MCP channel: while the store and models load, anything a library
    prints (to sys.stdout or straight to fd 1) goes to stderr instead. The SDK's stdio transport
    guards the channel the same way once it runs."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def serve_mcp(settings: Any, *, user: str | None = None, transport: str = "stdio", host: str = "127.0.0.1",
              port: int = 8421, allow_delete: bool | None = None) -> None:
    """`dcpm mcp`: open the memory (the daemon's client, or the store here with its background
    loops) and serve it on stdio or streamable HTTP until the client or the process stops.
    `user` and `allow_delete` default to DCPM_MCP_USER and DCPM_MCP_ALLOW_DELETE. HTTP is refused
    without a configured user or on a non-loopback address (dcpm.server.exposure)."""
    from dcpm.server.exposure import mcp_http_refusal
    from dcpm.service import open_memory

    if transport not in ("stdio", "http"):
        raise Invalid(f"unknown transport {transport!r}: use stdio or http")
    user = user or settings.mcp_user or None
    refusal = mcp_http_refusal(settings, host, user) if transport == "http" else None
    if refusal:
        raise Invalid(refusal)
    with contextlib.ExitStack() as stack:
        with stdout_to_stderr():
            memory = stack.enter_context(open_memory(settings, background=True))
        server = build_server(memory, user_id=user,
                              allow_delete=settings.mcp_allow_delete if allow_delete is None else allow_delete)
        if transport == "stdio":
            server.run("stdio")
        else:
            print(f"dcpm MCP server on http://{host}:{port}/mcp", file=sys.stderr, flush=True)
            server.run("streamable-http", host=host, port=port)
