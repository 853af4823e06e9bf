"""`dcpm delete`: the hard delete of a memory, its chain, a graph node, a session or a whole user,
gone everywhere (rows, revisions, vectors, evidence, event text), after a confirmation."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from dcpm.cli.output import JsonFlag, dump, memory, out
from dcpm.errors import Invalid


def delete(memory_id: Annotated[Optional[str], typer.Argument(help="An item or raw turn id.")] = None,
           chain: Annotated[bool, typer.Option(help="Delete the item's whole supersedes chain.")] = False,
           node: Annotated[Optional[str], typer.Option(help="A schema / intention / core-schema node id.")] = None,
           user: Annotated[Optional[str], typer.Option(help="With --session: its user; alone: the whole user.")] = None,
           session: Annotated[Optional[str], typer.Option(help="A session id (needs --user).")] = None,
           yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
           purge: Annotated[bool, typer.Option("--purge", help="Return only once the vector shard holds no byte of "
                                                             "what was deleted (the daemon otherwise compacts it "
                                                             "within minutes); through a daemon, admin token "
                                                             "only.")] = False,
           as_json: JsonFlag = False) -> None:
    """Hard delete, gone everywhere: rows, revisions, vectors, evidence, event text.

    Examples: dcpm delete ID --chain; dcpm delete --user ana --session S --yes; dcpm delete --user ana"""
    targets = sum(x is not None for x in (memory_id, node, user))
    if targets != 1 or (session and not user) or (chain and not memory_id):
        raise Invalid("give one of: ID [--chain], --node ID, --user U [--session S]")
    if "" in (memory_id, node, user, session):  # read as missing below, `--session ""` would delete the whole user
        raise Invalid("'' is not an id: it is empty")
    from dcpm.domain import check_memory_id

    for value, what in ((memory_id, "memory"), (node, "graph node")):  # as `show` refuses them, before asking
        if value is not None:
            check_memory_id(value, what)
    what = (f"memory {memory_id}" + (" and its whole chain" if chain else "") if memory_id else
            f"node {node}" if node else f"session {session} of {user}" if session else f"EVERYTHING of user {user}")
    if not yes and not typer.confirm(f"Permanently delete {what}?"):
        raise typer.Exit(1)
    with memory() as mem:
        if memory_id:
            result = (mem.delete_chain(memory_id, compact=purge) if chain
                      else mem.delete_memory(memory_id, compact=purge))
        elif node:
            result = mem.delete_node(node, compact=purge)
        elif session:
            result = mem.delete_session(user, session, compact=purge)
        else:
            result = mem.delete_user(user, compact=purge)
    if as_json:
        return dump(result)
    for key, value in result.model_dump().items():
        if value and key != "user_id":
            out.print(f"{key.replace('_', ' ')}: {value if not isinstance(value, list) else len(value)}")
    for kept in getattr(result, "raw_kept", []):
        out.print(f"kept raw turn {kept}: another kept item was extracted from it")
