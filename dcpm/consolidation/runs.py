"""One consolidation run of one user: re-induction of what deletes left stale, then the three
phases, under a per-user lease, recorded so a run can be inspected, resumed after a crash, and
repeated without duplicating anything. A run that fails is recorded as failed and the next user
is consolidated all the same.

A pass over many users (`run_consolidation`) may run in many workers at once on one shared store
(`dcpm consolidate --all` from cron on several hosts, the nightly schedule of several daemons):
the per-user lease is the claim, so the users are split between the workers; a user whose run
ended after the pass began is not run again; and a user held elsewhere is come back to until its
holder has finished it or has died (its lease expired), in which case this worker takes it over."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable, Iterable

from sqlalchemy import select

from dcpm.consolidation.backends import Backends
from dcpm.consolidation.induction import induce_cluster
from dcpm.consolidation.reinduction import reinduce
from dcpm.consolidation.sweep import sweep
from dcpm.consolidation.triage import triage
from dcpm.domain import StrEnum
from dcpm.errors import Conflict, Unavailable
from dcpm.llm import LLMFailure, Usage
from dcpm.store import leases
from dcpm.store.consent import consent_of
from dcpm.store.db import Database
from dcpm.store.models import ConsolidationRun, User, utcnow

log = logging.getLogger("dcpm.consolidation")
Progress = Callable[[str, int, int], None]  # (phase, done, total)
HELD_POLL_SECONDS = 10.0  # how often a pass looks again at users other workers hold (sooner for short leases)


class RunStatus(StrEnum):
    """A run is `running` until it ends `done` or `failed`; one whose process died is
    `interrupted` (so recorded by the next run of its user, so listed as soon as its lease is
    not held: dcpm.status.runs); a user another worker consolidated during the
    same pass is reported `skipped`."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    SKIPPED = "skipped"


@dataclass
class RunReport:
    run_id: str
    user_id: str
    status: RunStatus
    counts: dict = field(default_factory=dict)
    llm_calls: dict = field(default_factory=dict)
    tokens: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _update(db: Database, run_id: str, **values) -> None:  # type: ignore[no-untyped-def]
    """Set fields of the run record; `finished_at=None` stamps the end by the shared clock."""
    with db.session() as session:
        run = session.get(ConsolidationRun, run_id)
        if "finished_at" in values and values["finished_at"] is None:
            values["finished_at"] = leases.now(session)
        for key, value in values.items():
            setattr(run, key, value)


def consolidate_user(backends: Backends, user_id: str, *, dry_run: bool = False, job_id: str | None = None,
                     progress: Progress | None = None, since: datetime | None = None) -> RunReport:
    """DCPM Algorithm 2 for one user. Raises Conflict when another run holds the user. With
    `since` (a pass's start, by `leases.now`), a user whose last run ended after it is skipped."""
    settings = backends.settings
    if backends.llm is None and not dry_run:
        raise Unavailable("consolidation needs an LLM: set DCPM_LLM_BASE_URL and DCPM_LLM_MODEL (or use --dry-run)")
    progress = progress or (lambda phase, done, total: None)
    lease = leases.consolidation_lease(user_id)
    with leases.held(backends.db, lease, settings.consolidation_lease_seconds, 0) as holder:
        started = time.perf_counter()
        if since is not None and _ended_since(backends.db, user_id, since, dry_run):
            return RunReport("", user_id, RunStatus.SKIPPED, errors=["consolidated by another worker in this pass"])
        with backends.db.session() as session:
            for stale in session.scalars(select(ConsolidationRun).where(ConsolidationRun.user_id == user_id,
                                                                        ConsolidationRun.status == RunStatus.RUNNING)):
                stale.status, stale.finished_at = RunStatus.INTERRUPTED, utcnow()  # we hold the lease: its owner died
            run = ConsolidationRun(user_id=user_id, dry_run=dry_run, holder=holder, job_id=job_id, counts={},
                                   started_at=leases.now(session))
            session.add(run)
        report = RunReport(run.id, user_id, RunStatus.RUNNING, counts=dict(run.counts))
        phase_usage = {"induce": Usage(), "sweep": Usage()}
        try:
            _phases(backends, user_id, run.id, dry_run, report, phase_usage, progress)
            report.status = RunStatus.DONE
        except LLMFailure as exc:
            report.status = RunStatus.FAILED
            report.errors.append(exc.message)
            log.warning("consolidation of %s stopped: %s (a later run resumes)", user_id, exc.message)
        except Exception as exc:  # recorded for this user; the run goes on with the next one
            report.status = RunStatus.FAILED
            report.errors.append(f"{type(exc).__name__}: consolidation stopped; see the daemon's log")
            log.exception("consolidation of %s failed (a later run resumes)", user_id)
        finally:
            report.llm_calls = {"triage": 0, **{phase: u.calls for phase, u in phase_usage.items()}}
            report.tokens = sum(u.tokens for u in phase_usage.values())
            report.seconds = round(time.perf_counter() - started, 3)
            ended = report.status if report.status != RunStatus.RUNNING else RunStatus.FAILED
            _update(backends.db, run.id, status=ended, finished_at=None, counts=report.counts,
                    llm_calls=report.llm_calls, tokens=report.tokens, errors={"messages": report.errors})
        return report


def _ended_since(db: Database, user_id: str, since: datetime, dry_run: bool) -> bool:
    """Whether a run of the user (as dry as this one) ended, done or failed, at or after `since`."""
    with db.session() as session:
        return session.scalar(select(ConsolidationRun.id).where(
            ConsolidationRun.user_id == user_id, ConsolidationRun.finished_at >= since,
            ConsolidationRun.dry_run == dry_run,
            ConsolidationRun.status.in_((RunStatus.DONE, RunStatus.FAILED))).limit(1)) is not None


def _phases(backends: Backends, user_id: str, run_id: str, dry_run: bool, report: RunReport,
            usage: dict[str, Usage], progress: Progress) -> None:
    db, settings = backends.db, backends.settings
    stale = reinduce(backends, user_id, run_id, usage["induce"], dry_run)
    report.counts.update(nodes_stale=stale.stale, nodes_reinduced=stale.reinduced, nodes_removed=stale.removed)
    report.errors.extend(f"refused {reason}" for reason in stale.induced.refused)
    started = time.perf_counter()
    found = triage(db, backends.index, settings, user_id)
    report.counts.update(fresh_items=found.fresh_items, clusters=len(found.clusters), noise=found.noise,
                         clusters_already_done=found.already_done, clusters_done=0,
                         triage_seconds=round(time.perf_counter() - started, 3))
    _update(db, run_id, phase="induction", counts=dict(report.counts))
    if dry_run:
        report.counts["cluster_sizes"] = [len(c.item_ids) for c in found.clusters]
        return
    assert backends.llm is not None
    created, evidence, edges = len(stale.induced.created), stale.induced.evidence_added, stale.induced.edges
    for number, cluster in enumerate(found.clusters, 1):
        progress("induction", number - 1, len(found.clusters))
        induced = induce_cluster(db, backends.index, backends.embedder, backends.llm, settings, user_id, cluster,
                                 run_id, usage["induce"])
        created, evidence, edges = created + len(induced.created), evidence + induced.evidence_added, edges + induced.edges
        report.errors.extend(f"refused {reason}" for reason in induced.refused)
        report.counts.update(clusters_done=number, nodes_created=created, evidence_added=evidence, edges_added=edges)
        _update(db, run_id, counts=dict(report.counts))
    progress("induction", len(found.clusters), len(found.clusters))
    with db.session() as session:
        core_allowed = consent_of(session, user_id).core_schemas
    _update(db, run_id, phase="sweep")
    if not core_allowed:
        report.counts["sweep"] = "skipped: core schemas not enabled for this user"
        return
    progress("sweep", 0, 1)
    swept = sweep(db, backends.index, backends.embedder, backends.llm, settings, user_id, run_id, usage["sweep"])
    report.counts.update(schemas=swept.schemas, descriptions_written=swept.descriptions_written,
                         collision_groups=swept.collision_groups, core_schemas_created=len(swept.core_schemas_created))
    progress("sweep", 1, 1)


def all_users(backends: Backends) -> list[str]:
    with backends.db.session() as session:
        return list(session.scalars(select(User.id).order_by(User.id)))


def run_consolidation(backends: Backends, users: Iterable[str] | None = None, *, dry_run: bool = False,
                      job_id: str | None = None,
                      progress: Callable[[str, str, int, int], None] | None = None) -> list[RunReport]:
    """One pass: consolidate the given users (all when None), one after another, alongside any
    other workers passing over the same store (see the module's docstring). Returns once every
    user was consolidated in this pass, here or by another worker."""
    with backends.db.session() as session:
        since = leases.now(session)
    if users is None:  # a pass over everyone: workers started a little apart still split the users
        since -= timedelta(seconds=backends.settings.consolidation_pass_window_seconds)
    pending = list(dict.fromkeys(users if users is not None else all_users(backends)))
    reports: list[RunReport] = []
    poll = min(backends.settings.consolidation_lease_seconds / leases.HEARTBEATS_PER_TTL, HELD_POLL_SECONDS)
    while True:
        held = [user_id for user_id in pending if not _claim(backends, user_id, since, dry_run, job_id, progress,
                                                              reports)]
        if not held:
            return reports
        log.info("%d user(s) held by other workers: waiting for them to finish or their leases to expire", len(held))
        pending = held
        time.sleep(poll)


def _claim(backends: Backends, user_id: str, since: datetime, dry_run: bool, job_id: str | None,
           progress: Callable[[str, str, int, int], None] | None, reports: list[RunReport]) -> bool:
    """Consolidate one user of a pass unless another worker holds it; False when held."""
    on_progress = (lambda phase, done, total: progress(user_id, phase, done, total)) if progress else None
    try:
        reports.append(consolidate_user(backends, user_id, dry_run=dry_run, job_id=job_id, progress=on_progress,
                                        since=since))
    except Conflict:
        return False
    except Exception as exc:  # before a run record existed (the store was unreachable, ...)
        log.exception("consolidation of %s could not start", user_id)
        reports.append(RunReport(run_id="", user_id=user_id, status=RunStatus.FAILED,
                                 errors=[f"{type(exc).__name__}: consolidation could not start"]))
    return True
