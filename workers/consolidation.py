"""`python -m workers.consolidation [--user U | --all] [--dry-run]`: one consolidation pass (DCPM 2.3)
in a process of its own, for cron or a worker host. The same command as `dcpm consolidate`: it
asks the daemon that serves the data directory, or opens the store itself when none does."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from dcpm.cli.main import main as dcpm

    dcpm(["consolidate", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
