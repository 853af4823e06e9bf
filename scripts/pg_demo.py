"""Try dcpm on PostgreSQL on this machine in one command: start a real PostgreSQL 16 with pgvector
(the `pgserver` package, in the `test` extra), create the database `dcpm`, and print the settings
that point any number of `dcpm serve` and `dcpm consolidate` processes at it. PostgreSQL runs while
this script does (Ctrl-C stops it); its files stay in the directory for the next start.

    pip install -e ".[test]"
    python scripts/pg_demo.py                     # PostgreSQL in ./.dcpm-postgres
    python scripts/pg_demo.py --dir /tmp/pg-demo  # elsewhere

Then, in other shells, paste the exports it prints and start two daemons on different ports:
`dcpm serve --port 8420` and `DCPM_DATA_DIR=~/.dcpm-2 dcpm serve --port 8421`.
"""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path

from dcpm.store.db import Database
from dcpm.testing import postgres


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path(".dcpm-postgres"), help="where PostgreSQL keeps its files")
    parser.add_argument("--database", default="dcpm")
    args = parser.parse_args()
    started = time.perf_counter()
    server = postgres.start(args.dir.resolve() / "pgdata", keep=True)
    database_url = postgres.create_database(server, args.database)
    Database(database_url).close()  # the migrations, applied once here instead of by the first daemon
    print(f"PostgreSQL 16 with pgvector is up ({time.perf_counter() - started:.1f} s), database {args.database!r}.")
    print("Point every daemon and worker at it:\n")
    print(f"export DCPM_DATABASE_URL='{database_url}'")
    print("export DCPM_INDEX_BACKEND=pgvector\n")
    print("Ctrl-C stops PostgreSQL (its files stay for the next start).", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops it as cleanly as Ctrl-C
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.cleanup()


if __name__ == "__main__":
    main()
