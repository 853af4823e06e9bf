"""A real PostgreSQL 16 for tests and the one-command demo, started from Python by the `pgserver`
package (it ships the server binaries and pgvector; the `test` extra installs it). It listens on
a Unix socket in its data directory only, so nothing outside this machine can reach it.

Tests take a fresh database per test with `CREATE DATABASE ... TEMPLATE`, a file copy of a
database already migrated once, which costs a fraction of a second instead of a migration run."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from dcpm.store.db import Database

TEMPLATE = "dcpm_template"  # migrated once per server; copied for every fresh database


def start(pgdata: Path, *, keep: bool = False) -> Any:
    """Start (or join) the server whose files live in `pgdata`; it stops when the last process
    using it exits, and its files go too unless `keep`."""
    import pgserver

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    return pgserver.get_server(pgdata, cleanup_mode="stop" if keep else "delete")


def keep_log(server: Any, destination: Path, lines: int = 60) -> str:
    """Copy the server's log (it lives in the data directory, deleted with it) to `destination`;
    returns a report of where it went and its last `lines` lines."""
    log = Path(server.log)
    if not log.exists():
        return f"\nPostgreSQL left no log at {log}\n"
    text = log.read_text(errors="replace")
    destination.write_text(text)
    tail = "\n".join(text.splitlines()[-lines:])
    return f"\nPostgreSQL's log, kept at {destination}; its end:\n{tail}\n"


def url(server: Any, database: str = "postgres") -> str:
    """The SQLAlchemy URL of one database on `server`, through psycopg 3."""
    return server.get_uri(database=database).replace("postgresql://", "postgresql+psycopg://", 1)


def _admin(server: Any, statement: str) -> None:
    engine = create_engine(url(server), isolation_level="AUTOCOMMIT")  # CREATE DATABASE runs outside a transaction
    try:
        with engine.connect() as connection:
            connection.execute(text(statement))
    finally:
        engine.dispose()


def migrated_template(server: Any) -> str:
    """Create the template database and bring it to the newest migration; returns its name."""
    _admin(server, f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
    _admin(server, f"CREATE DATABASE {TEMPLATE}")
    Database(url(server, TEMPLATE)).close()
    return TEMPLATE


def create_database(server: Any, name: str, template: str | None = None) -> str:
    """Create database `name` (a copy of `template` when given) unless it exists; returns its
    SQLAlchemy URL."""
    engine = create_engine(url(server))
    try:
        with engine.connect() as connection:
            exists = connection.execute(text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}).first()
    finally:
        engine.dispose()
    if not exists:
        _admin(server, f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
    return url(server, name)


def fresh_database(server: Any, template: str | None = None) -> str:
    """A new database with a name of its own (a copy of `template` when given); returns its URL."""
    return create_database(server, f"dcpm_{uuid.uuid4().hex[:12]}", template)


def drop_database(server: Any, database_url: str) -> None:
    """Drop a database made by `fresh_database`, ending connections a test left open."""
    name = database_url.rsplit("/", 1)[1].split("?", 1)[0]
    _admin(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
