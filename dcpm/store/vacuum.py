"""The PostgreSQL half of scrubbing after a hard delete (`Database.scrub`).

A DELETE (or the UPDATE that tombstones an event) leaves the old row versions in the table's
pages as dead tuples, text and all, until VACUUM. So after a hard delete the store's tables are
vacuumed, with INDEX_CLEANUP ON so that index entries pointing at the dead rows go too, even
when they are few (AUTO may skip them). Every store table is named: the delete's tables are the
ones with work to do, and VACUUM skips the pages of the others that its visibility map marks
all-visible (a table with dead rows also has each of its indexes read through once). The vector
index's tables are the index's own business (`VectorIndex.compact`).

What plain VACUUM guarantees, and what it does not:
- no tuple, dead or alive, holds the deleted text afterwards: no query, snapshot or index
  reaches it, and its space is free for the next writes;
- the bytes themselves stay in the page's free space until a later write overwrites them
  (PostgreSQL compacts a page without zeroing what it freed; measured: about a third of
  deleted rows remained readable in the file), and the write-ahead log keeps the inserts that
  wrote them until its segments are recycled and overwritten. The files change at the next
  checkpoint; a plain scrub does not force one.
- it cannot remove rows that a transaction begun before the delete may still see (another
  daemon's export, say); autovacuum removes them once that transaction ends.
`full=True` (a delete asked to `compact`) runs VACUUM FULL instead: each table is rewritten
into new files, the old ones are truncated and unlinked, and a CHECKPOINT (when the role may
run one) writes the result out, so no table file holds the text; the WAL caveat remains.
VACUUM FULL locks each table exclusively while it is rewritten, which stops every daemon's
reads and writes of it meanwhile: it is for an explicit request, not for every delete.

Both wait at most `wait_seconds` for each table's lock (a long transaction elsewhere) and
report False when one could not be had, as SQLite's checkpoint does when readers keep it busy.
"""

from __future__ import annotations

import logging

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

log = logging.getLogger("dcpm.store")
LOCK_NOT_AVAILABLE = "55P03"
INSUFFICIENT_PRIVILEGE = "42501"


def vacuum(engine: Engine, tables: list[str], wait_seconds: float, *, full: bool = False) -> bool:
    """VACUUM (FULL when `full`) the named tables outside any transaction, as VACUUM requires."""
    preparer = engine.dialect.identifier_preparer
    names = ", ".join(preparer.quote(name) for name in tables)
    options = "FULL" if full else "INDEX_CLEANUP ON"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql(f"SET lock_timeout = {max(1, int(wait_seconds * 1000))}")
        try:
            connection.exec_driver_sql(f"VACUUM ({options}) {names}")
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
                raise
            return False
        finally:
            connection.exec_driver_sql("RESET lock_timeout")
        if full:
            _checkpoint(connection)
    return True


def _checkpoint(connection) -> None:  # type: ignore[no-untyped-def]
    """Write the rewritten tables out now; a role without the right (superuser or
    pg_checkpoint) leaves it to the next scheduled checkpoint."""
    try:
        connection.exec_driver_sql("CHECKPOINT")
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != INSUFFICIENT_PRIVILEGE:
            raise
        log.info("the database role may not run CHECKPOINT: the scrubbed tables reach the disk at the next one")
