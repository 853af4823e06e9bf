"""The daemon's nightly consolidation (DCPM 2.3: System 2 runs while the assistant is quiet):
an APScheduler 3.x job for every user at the configured crontab time."""

from __future__ import annotations

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

from dcpm.consolidation.runs import Backends, run_consolidation


def schedule_nightly(backends: Backends, cron: str) -> BackgroundScheduler:
    """Start the job; `max_instances=1` and the per-user run leases keep two nights from overlapping."""
    scheduler = BackgroundScheduler(daemon=True)
    scheduler.add_job(lambda: run_consolidation(backends), CronTrigger.from_crontab(cron), id="consolidation",
                      max_instances=1, coalesce=True, misfire_grace_time=3600)
    scheduler.start()
    return scheduler
