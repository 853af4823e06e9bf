"""Consolidation as the daemon runs it on request: a background job over one user or all,
whose progress is read back from the run records it writes (each run names its job), so the
daemon keeps serving meanwhile. The phases themselves live in `runs`, `triage`, `induction`
and `sweep`."""

from __future__ import annotations

import threading
import uuid

from dcpm.api.models import JobOut
from dcpm.consolidation.runs import Backends, all_users, run_consolidation
from dcpm.errors import NotFound, Unavailable
from dcpm.status import runs


class ConsolidationJobs:
    """Jobs started by this process. The thread registry only answers "is it still running" and
    "for whom"; what a job did is in the store, where any process can read it."""

    def __init__(self, backends: Backends):
        self.backends = backends
        self._threads: dict[str, tuple[threading.Thread, list[str]]] = {}
        self._lock = threading.Lock()

    def start(self, users: list[str] | None, dry_run: bool) -> JobOut:
        if self.backends.llm is None and not dry_run:
            raise Unavailable("consolidation needs an LLM: set DCPM_LLM_BASE_URL and DCPM_LLM_MODEL")
        job_id = str(uuid.uuid4())
        targets = users if users is not None else all_users(self.backends)
        thread = threading.Thread(target=run_consolidation, args=(self.backends, users),  # None: a pass over all
                                  kwargs={"dry_run": dry_run, "job_id": job_id},
                                  name=f"dcpm-consolidation-{job_id[:8]}", daemon=True)
        with self._lock:
            self._threads[job_id] = (thread, targets)
        thread.start()
        return self.job(job_id)

    def job(self, job_id: str) -> JobOut:
        with self._lock:
            thread, users = self._threads.get(job_id, (None, []))
        found = runs(self.backends.db, job_id=job_id)
        if thread is None and not found:
            raise NotFound(f"no consolidation job {job_id}")
        return JobOut(job_id=job_id, running=bool(thread and thread.is_alive()),
                      users=users or sorted({r.user_id for r in found}), runs=found)
