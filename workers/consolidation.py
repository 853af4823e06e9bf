"""Consolidation entry points: the daemon's nightly APScheduler job, `dcpm consolidate` (cron),
and workers on other machines that share PostgreSQL and a Qdrant server."""

from __future__ import annotations

import logging
from typing import Callable, Iterable

from sqlalchemy import select

from dcpm.consolidation.runs import Engine, RunReport, consolidate_user
from dcpm.errors import Conflict
from dcpm.store.models import User

log = logging.getLogger("dcpm.worker.consolidation")


def all_users(engine: Engine) -> list[str]:
    with engine.db.session() as session:
        return list(session.scalars(select(User.id).order_by(User.id)))


def run_consolidation(engine: Engine, users: Iterable[str] | None = None, *, dry_run: bool = False,
                      job_id: str | None = None,
                      progress: Callable[[str, str, int, int], None] | None = None) -> list[RunReport]:
    """Consolidate the given users (all when None), one after another. A user another worker
    holds right now is skipped and reported, never waited for."""
    reports = []
    for user_id in list(users) if users is not None else all_users(engine):
        on_progress = (lambda phase, done, total, user=user_id: progress(user, phase, done, total)) if progress else None
        try:
            reports.append(consolidate_user(engine, user_id, dry_run=dry_run, job_id=job_id, progress=on_progress))
        except Conflict:
            log.info("consolidation of %s skipped: another run holds it", user_id)
            reports.append(RunReport(run_id="", user_id=user_id, status="skipped", errors=["another run holds this user"]))
    return reports


def schedule_nightly(engine: Engine, cron: str):  # type: ignore[no-untyped-def]
    """Start the daemon's APScheduler job (3.x) for all users at the configured crontab time."""
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.cron import CronTrigger

    scheduler = BackgroundScheduler(daemon=True)
    scheduler.add_job(lambda: run_consolidation(engine), CronTrigger.from_crontab(cron), id="consolidation",
                      max_instances=1, coalesce=True, misfire_grace_time=3600)
    scheduler.start()
    return scheduler
