"""Consolidation as the daemon runs it: background jobs whose progress is read back from the
run records, plus consent and graph inspection. The core lives in `runs`, `triage`, ..."""

from __future__ import annotations

import threading
import uuid

from sqlalchemy import select

from dcpm.consolidation.consent import consent_of, set_consent
from dcpm.consolidation.graph import user_graph
from dcpm.consolidation.runs import Engine, RunReport
from dcpm.errors import Unavailable
from dcpm.schemas import ConsentOut, ConsentUpdate, GraphEdgeOut, GraphNodeOut, GraphOut, JobOut, RunOut
from dcpm.store.models import ConsolidationRun
from workers.consolidation import all_users, run_consolidation


def run_out(run: ConsolidationRun) -> RunOut:
    return RunOut(id=run.id, user_id=run.user_id, status=run.status, phase=run.phase, dry_run=run.dry_run,
                  started_at=run.started_at, finished_at=run.finished_at, counts=run.counts or {},
                  llm_calls=run.llm_calls or {}, tokens=run.tokens, errors=(run.errors or {}).get("messages", []))


class Consolidation:
    def __init__(self, engine: Engine):
        self.engine = engine
        self._threads: dict[str, tuple[threading.Thread, list[str]]] = {}

    def run(self, users: list[str] | None, dry_run: bool, progress=None) -> list[RunReport]:  # type: ignore[no-untyped-def]
        return run_consolidation(self.engine, users, dry_run=dry_run, progress=progress)

    def start_job(self, users: list[str] | None, dry_run: bool) -> JobOut:
        """Run in a background thread so the daemon keeps serving; progress comes from the run rows."""
        if self.engine.llm is None and not dry_run:
            raise Unavailable("consolidation needs an LLM: set DCPM_LLM_BASE_URL and DCPM_LLM_MODEL")
        job_id = str(uuid.uuid4())
        targets = users if users is not None else all_users(self.engine)
        thread = threading.Thread(target=run_consolidation, args=(self.engine, targets),
                                  kwargs={"dry_run": dry_run, "job_id": job_id}, name=f"dcpm-consolidation-{job_id[:8]}",
                                  daemon=True)
        self._threads[job_id] = (thread, targets)
        thread.start()
        return self.job(job_id)

    def job(self, job_id: str) -> JobOut:
        thread, users = self._threads.get(job_id, (None, []))
        with self.engine.db.session() as session:
            runs = [r for r in session.scalars(select(ConsolidationRun).where(ConsolidationRun.user_id.in_(users))
                                               .order_by(ConsolidationRun.started_at))
                    if (r.counts or {}).get("job_id") == job_id]
        return JobOut(job_id=job_id, running=bool(thread and thread.is_alive()), users=users,
                      runs=[run_out(r) for r in runs])

    def runs(self, user_id: str | None = None, limit: int = 50) -> list[RunOut]:
        with self.engine.db.session() as session:
            query = select(ConsolidationRun).order_by(ConsolidationRun.started_at.desc()).limit(limit)
            if user_id:
                query = query.where(ConsolidationRun.user_id == user_id)
            return [run_out(r) for r in session.scalars(query)]

    def consent(self, user_id: str, update: ConsentUpdate | None = None) -> ConsentOut:
        with self.engine.db.session() as session:
            consent = set_consent(session, user_id, **update.model_dump()) if update else consent_of(session, user_id)
            return ConsentOut(user_id=user_id, schemas=consent.schemas, intentions=consent.intentions,
                              core_schemas=consent.core_schemas)

    def graph(self, user_id: str) -> GraphOut:
        with self.engine.db.session() as session:
            graph = user_graph(session, user_id)
        return GraphOut(
            user_id=user_id,
            nodes=[GraphNodeOut(id=n, kind=d["kind"], domain=d["domain"], text=d["text"], status=d["status"],
                                evidence=d["evidence"]) for n, d in graph.nodes(data=True)],
            edges=[GraphEdgeOut(source=a, target=b, type=d["type"]) for a, b, d in graph.edges(data=True)])
