"""The daemon's lifecycle (`dcpm serve`): own the data directory, open the whole service, start
the background loops and the nightly consolidation, announce the address in `daemon.json` so
that CLI commands go through the API, serve HTTP until stopped, then undo all of it."""

from __future__ import annotations

import logging
import secrets
import shutil
import signal
import sys
from pathlib import Path

from dcpm.config import Settings


def run_daemon(settings: Settings, host: str | None = None, port: int | None = None,
               log_level: str = "info") -> None:
    """Serve `settings.data_dir` on HOST:PORT (default: from settings) until the process is stopped.
    Another process holding the data directory is a Conflict; a network address with no
    credential is Invalid (dcpm.server.exposure); nothing is left behind on exit."""
    import uvicorn

    from dcpm.consolidation.schedule import schedule_nightly
    from dcpm.errors import Invalid
    from dcpm.server.app import create_app
    from dcpm.server.exposure import exposure_refusal
    from dcpm.service import MemoryService
    from dcpm.store.datadir import DataDirLock, clear_daemon, write_daemon

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    host = host or settings.host
    port = port or settings.port
    instance = secrets.token_hex(16)  # names this run in daemon.json and at /healthz/instance
    lock = DataDirLock(settings.data_dir)
    lock.acquire()
    _clear_transfers(settings.data_dir)
    service = MemoryService(settings, lazy=True)  # the store only, until the address is known to be safe
    try:
        refusal = exposure_refusal(settings, host, service.db)
        if refusal:
            raise Invalid(refusal)
        service.open_all()
        service.start_background()
        if service.llm is not None and settings.consolidation_schedule:
            schedule_nightly(service.consolidation.backends, settings.consolidation_cron)
        client_host = "127.0.0.1" if host in ("0.0.0.0", "::") else f"[{host}]" if ":" in host else host
        write_daemon(settings.data_dir, f"http://{client_host}:{port}", instance)
        print(f"dcpm serving {settings.data_dir} on http://{host}:{port} (OpenAPI: /docs)", file=sys.stderr,
              flush=True)
        signal.signal(signal.SIGTERM, _stop_on_terminate)
        uvicorn.run(create_app(service, bound_host=host, instance=instance), host=host, port=port,
                    log_level=log_level.lower())
    finally:
        clear_daemon(settings.data_dir)
        service.close()
        lock.release()


def _clear_transfers(data_dir: Path) -> None:
    """Exports and restores a crash cut short (dcpm.server.routes.operations); no other process
    stages one while this one holds the data directory."""
    from dcpm.server.routes.operations import TRANSFER_PREFIX

    for leftover in Path(data_dir).glob(f"{TRANSFER_PREFIX}*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _stop_on_terminate(signum: int, _frame: object) -> None:
    """uvicorn shuts down gracefully on SIGTERM, then raises the signal again under the handler it
    found. Python's default handler would kill the process there, before `run_daemon` closes the
    service: deleted points would stay in the vector shard, daemon.json would name a dead process.
    Raised as SystemExit instead, the `finally` runs, as it does for Ctrl-C, and the exit is a
    clean one (systemd and `docker stop` stop services with SIGTERM)."""
    raise SystemExit(0)
