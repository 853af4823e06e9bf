"""Read models of how the daemon is doing rather than of what it stores: consolidation runs (a run
whose process died shows as interrupted) and the health report of the store, index, embedder and
LLM endpoint. Split from dcpm.inspection, whose models are of memories."""

from __future__ import annotations

from typing import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from dcpm.api.models import RunOut
from dcpm.config import Settings
from dcpm.embedding import Embedder
from dcpm.index import VectorIndex
from dcpm.store import leases
from dcpm.store.db import Database
from dcpm.store.models import ConsolidationRun


def runs(db: Database, user_id: str | None = None, limit: int = 50, job_id: str | None = None) -> list[RunOut]:
    """Consolidation run records, newest first (oldest first for one job)."""
    with db.session() as session:
        query = (select(ConsolidationRun).where(ConsolidationRun.job_id == job_id).order_by(ConsolidationRun.started_at)
                 if job_id else select(ConsolidationRun).order_by(ConsolidationRun.started_at.desc()).limit(limit))
        if user_id:
            query = query.where(ConsolidationRun.user_id == user_id)
        return [run_out(r, session) for r in session.scalars(query)]


def health(db: Database, index: Callable[[], VectorIndex] | None, embedder: Callable[[], Embedder] | None,
           settings: Settings) -> dict:
    """Store, index, embedder and LLM endpoint; reports every failure, never raises. An index or
    embedder given as None is not open in this process (a command that needs no model): not probed."""
    report: dict = {"status": "ok"}
    for part, probe in (("store", lambda: {"url": db.engine.url.render_as_string(hide_password=True),
                                           "ping": db.ping()}),
                        ("index", index and (lambda: {"backend": index().backend, "points": index().count()})),
                        ("embedder", embedder and (lambda: {"name": embedder().name, "dim": embedder().dim,
                                                            "device": embedder().device}))):
        if probe is None:
            report[part] = {"ok": None, "detail": "not opened by this process"}
            continue
        try:
            details = {k: v for k, v in probe().items() if k != "ping"}
            report[part] = {"ok": True, **details}
        except Exception as exc:
            report[part] = {"ok": False, "error": str(exc)}
            report["status"] = "degraded"
    from dcpm.llm import reachability  # the LLM client's stack only when health is asked
    report["llm"] = reachability(settings)
    return report


def run_out(run: ConsolidationRun, session: Session) -> RunOut:
    """A run marked running whose process no longer holds its lease died (kill -9): interrupted."""
    lease = leases.consolidation_lease(run.user_id)
    dead = run.status == "running" and not leases.still_held(session, lease, run.holder)
    return RunOut(id=run.id, user_id=run.user_id, status="interrupted" if dead else run.status, phase=run.phase,
                  dry_run=run.dry_run, started_at=run.started_at, finished_at=run.finished_at, counts=run.counts or {},
                  llm_calls=run.llm_calls or {}, tokens=run.tokens, errors=(run.errors or {}).get("messages", []))
