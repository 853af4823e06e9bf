"""`dcpm keys`: API keys that act for one user (dcpm.auth), a Typer sub-app registered as `keys`.

Key management is an admin operation. While a daemon serves the data directory it goes through
the daemon's admin routes with the admin token from settings; otherwise through the store opened
here, which needs only the relational store for key records (no vector index, no model).
`reset-access` alone always works on the store itself: no HTTP caller may open a daemon."""

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
        err.print("note: no admin token is set (DCPM_API_TOKEN). Access control is now on for good (deleting "
                  "users or revoking keys does not switch it off; `dcpm keys reset-access` does): the daemon "
                  "refuses calls without a credential, this CLI's too while a daemon runs. Set an admin token.")


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


@keys_app.command("reset-access")
def reset_access(yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False) -> None:
    """Switch access control off again (every key must be revoked first).

    The first API key switched it on for good: revoking keys or deleting their users never
    opens the daemon. With every key revoked, this turns it off; the
    daemon then answers callers without a credential as the admin, unless an admin token is set
    (DCPM_API_TOKEN). It changes the store directly (never over HTTP), so only someone who can
    write the data directory (or the database) can do it; a running daemon follows at once."""
    from dcpm.auth import reset_access as switch_off
    from dcpm.store.db import Database

    if not yes and not typer.confirm("Let callers without a credential in again (no admin token set: as the admin)?"):
        raise typer.Exit(1)
    config = settings()
    db = Database(config.sqlalchemy_url)
    try:
        switch_off(db)
    finally:
        db.close()
    if config.api_token.get_secret_value():
        out.print("access control is off in the store; it stays on while an admin token is set (DCPM_API_TOKEN)")
    else:
        out.print("access control is off: callers without a credential act as the admin again")


@keys_app.command("revoke")
def revoke(key: Annotated[str, typer.Argument(metavar="KEY_ID_OR_PREFIX", help="The key's id or prefix.")],
           as_json: JsonFlag = False) -> None:
    """Revoke a key: the daemon refuses it from the next request on."""
    with memory() as mem:
        revoked = mem.revoke_key(key)
    if as_json:
        return dump(revoked)
    out.print(f"revoked API key {revoked.prefix} of user {revoked.user_id}")
