"""`dcpm keys`: API keys that act for one user (dcpm.auth), a Typer sub-app registered as `keys`.

Key management is an admin operation. While a daemon serves the data directory it goes through
the daemon's admin routes with the admin token from settings; otherwise through the store opened
here, which needs only the relational store for key records (no vector index, no model)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from dcpm.cli.output import JsonFlag, dump, err, memory, out, request, settings, when

keys_app = typer.Typer(help="API keys that act for one user (access control).", no_args_is_help=True)


@keys_app.command("create")
def create(user: Annotated[str, typer.Option("--user", help="The one user the key may act for.")],
           label: Annotated[Optional[str], typer.Option(help="What the key is for, e.g. the back end.")] = None,
           as_json: JsonFlag = False) -> None:
    """Make a key for USER and print it once (alone on stdout: `KEY=$(dcpm keys create --user ana)`).
    Only its hash is stored."""
    from dcpm.api.models import CreateKeyRequest

    wanted = request(CreateKeyRequest, user_id=user, label=label)
    with memory() as mem:
        made = mem.create_key(wanted.user_id, wanted.label)
    if as_json:
        return dump(made)
    err.print(f"API key {made.prefix} for user {made.user_id} (id {made.id}); it is shown only now:")
    out.print(made.key, markup=False, highlight=False, soft_wrap=True)
    if not settings().api_token.get_secret_value():
        err.print("note: no admin token is set (DCPM_API_TOKEN). With a key in the store the daemon refuses "
                  "calls without a credential, this CLI's too while a daemon runs: set an admin token.")


@keys_app.command("list")
def list_keys(user: Annotated[Optional[str], typer.Option(help="Only this user's keys.")] = None,
              as_json: JsonFlag = False) -> None:
    """Every key, revoked ones included (never the keys themselves, which are not stored)."""
    with memory() as mem:
        result = mem.api_keys(user)
    if as_json:
        return dump(result)
    table = Table(show_edge=False, title=f"{len(result)} API key(s)")
    for column in ("id", "prefix", "user", "label", "created", "last used", "revoked"):
        table.add_column(column, overflow="fold")
    for key in result:
        table.add_row(key.id, key.prefix, key.user_id, key.label or "", when(key.created_at), when(key.last_used_at),
                      when(key.revoked_at))
    out.print(table)


@keys_app.command("revoke")
def revoke(key: Annotated[str, typer.Argument(metavar="KEY_ID_OR_PREFIX", help="The key's id or prefix.")],
           as_json: JsonFlag = False) -> None:
    """Revoke a key: the daemon refuses it from the next request on."""
    with memory() as mem:
        revoked = mem.revoke_key(key)
    if as_json:
        return dump(revoked)
    out.print(f"revoked API key {revoked.prefix} of user {revoked.user_id}")
