"""Engine, sessions and migrations (applied at start-up and by `dcpm db upgrade`)."""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from dcpm.errors import StorageFull, Unavailable, is_disk_full, is_read_only
from dcpm.store.models import Base
from dcpm.store.vacuum import vacuum

if TYPE_CHECKING:  # Alembic is imported only when a migration runs (half a second of a CLI command)
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"  # Alembic's script location
BUSY_TIMEOUT_MS = 30_000  # how long a SQLite statement waits for another connection's lock
SCRUB_WAIT_SECONDS = 5.0  # how long a post-delete checkpoint waits for readers to move on


def make_engine(url: str) -> Engine:
    """`hide_parameters`: bound values are memory text; they stay out of error messages and logs."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, hide_parameters=True)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA secure_delete=ON")  # deleted rows are overwritten, not left in free pages
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True, hide_parameters=True)


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # configparser reads "%" as interpolation: a URL's escapes (a socket path's %2F) are doubled.
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    return config


def upgrade(engine: Engine) -> str | None:
    """Apply every pending migration; returns the revision the database is at afterwards. A store
    this dcpm cannot read (no database at all, or a schema a newer dcpm wrote) is Unavailable,
    and left as it is."""
    head = head_revision()
    stamped = stamped_revisions(engine)
    if head is not None and stamped == [head]:
        return head  # nothing to apply: one SELECT instead of loading Alembic and its scripts
    # Alembic 1.17+ logs one INFO line per built-in plugin it sets up on import; the migrations' own lines stay.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    from alembic import command
    from alembic.util import CommandError

    config = alembic_config(engine)
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    except CommandError:  # a revision none of this dcpm's migrations names
        raise Unavailable(f"the store is at schema revision {', '.join(stamped) or '?'}, which this dcpm does not "
                          "know: a newer dcpm wrote it; run that dcpm (or a newer one), or restore a backup") from None
    except DBAPIError as exc:
        if "file is not a database" not in str(exc.orig):
            raise
        raise Unavailable(f"{engine.url.database} is not a SQLite database; set the data directory (DCPM_DATA_DIR) "
                          "or DCPM_DATABASE_URL to dcpm's store") from None
    return current_revision(engine)


# `revision = '0006'` and `down_revision = '0005'` at the start of a line of a migration script
_REVISION_LINE = re.compile(r"""^(down_)?revision(?:\s*:[^=\n]*)?\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)


def head_revision() -> str | None:
    """The newest migration's id, read from the scripts' text without importing Alembic (a unit
    test holds it to Alembic's own answer). None unless exactly one revision has no successor
    (a merge's tuple of parents is not read): then Alembic decides, as before."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (MIGRATIONS_DIR / "versions").glob("*.py"):
        for down, revision in _REVISION_LINE.findall(script.read_text(encoding="utf-8")):
            (parents if down else revisions).add(revision)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def stamped_revisions(engine: Engine) -> list[str]:
    """The revisions Alembic recorded in the database; none before the first migration."""
    try:
        with engine.connect() as connection:
            return list(connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalars())
    except DBAPIError:  # no such table yet
        return []


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


class Database:
    """Owns the engine and hands out sessions; one per process."""

    def __init__(self, url: str, *, migrate: bool = True):
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.engine = make_engine(url)
        if migrate:
            upgrade(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # A scrub that readers kept from finishing leaves deleted text in SQLite's write-ahead log
        # until one succeeds: the daemon retries while this is set (dcpm.parts), and a process
        # starts with it set, as a crash may have come before the retry.
        self.scrub_pending = self.engine.url.get_backend_name() == "sqlite"

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed when the block ends, rolled back on error."""
        try:
            with self._sessions() as session:
                with session.begin():
                    yield session
        except (DBAPIError, OSError) as exc:  # PostgreSQL's read-only refusal is an InternalError
            if is_disk_full(exc):
                raise StorageFull("the disk under the data directory is full; the write was rolled back") from exc
            if is_read_only(exc):  # a file system remounted read-only, a database file whose mode changed
                raise Unavailable("the store refuses writes (its files or file system are read-only); "
                                  "the write was rolled back, reads still work") from exc
            raise

    @contextmanager
    def snapshot(self) -> Iterator[Session]:
        """A read-only session in one transaction that sees the store as of one moment, however
        many SELECTs it runs (an export): BEGIN on SQLite, where pysqlite opens no transaction
        for reads, REPEATABLE READ on PostgreSQL, where READ COMMITTED would see later commits."""
        with self.engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                connection.exec_driver_sql("BEGIN")
            elif connection.dialect.name == "postgresql":
                connection = connection.execution_options(isolation_level="REPEATABLE READ")
            with Session(bind=connection) as session:
                yield session
            connection.rollback()

    def scrub(self, wait_seconds: float = SCRUB_WAIT_SECONDS, *, full: bool = False) -> bool:
        """After a hard delete: clear the deleted text out of the store's files as far as the engine can.

        SQLite: fold the write-ahead log into the database and truncate it, so the old page
        images holding deleted text are gone (secure_delete zeroes the rest). SQLite answers
        BUSY while a reader still uses an older snapshot; the checkpoint waits up to
        `wait_seconds` for readers (SQLite's busy handler retries meanwhile) and returns False
        if it still could not truncate, for the caller to report.
        PostgreSQL: VACUUM the store's tables (VACUUM FULL with `full`; what each leaves on disk
        is in dcpm.store.vacuum), False if a table's lock was not had within `wait_seconds`."""
        backend = self.engine.url.get_backend_name()
        if backend == "postgresql":
            done = vacuum(self.engine, list(Base.metadata.tables), wait_seconds, full=full)
            self.scrub_pending = not done
            return done
        if backend != "sqlite":
            return True
        with self.engine.connect() as connection:
            connection.exec_driver_sql(f"PRAGMA busy_timeout={int(wait_seconds * 1000)}")
            try:
                busy, _, _ = connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
            finally:
                connection.exec_driver_sql(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self.scrub_pending = bool(busy)
        return not busy

    def ping(self) -> None:
        with self.engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")

    def close(self) -> None:
        self.engine.dispose()
