"""The composition root: implements the `Memory` contract (dcpm.api.protocol) on the parts one
process opens (`dcpm.parts`) by calling the module that owns each operation. The modules of the
write path, the read path, hard deletes and exports load with their first call, so commands that
only read the relational store answer without them."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

from dcpm import inspection, status
from dcpm.api import models as api
from dcpm.api.protocol import Memory
from dcpm.config import Settings
from dcpm.domain import MAX_EVENTS, MAX_RUNS, Turn, check_limit, spelled_as_stored
from dcpm.errors import DcpmError, StorageFull
from dcpm.parts import Loading, ProcessParts
from dcpm.store.datadir import DataDirLock, ensure_free_space, running_daemon

if TYPE_CHECKING:
    from dcpm.admin.delete import Deletion
    from dcpm.api.protocol import Progress

log = logging.getLogger("dcpm.service")
T = TypeVar("T")


class MemoryService(ProcessParts):
    """One process's memory: `ProcessParts` (opened at once, or on first use when `lazy`) and
    every operation of the `Memory` contract."""

    # --- the two calls an assistant makes ---------------------------------------------------
    def add_memory(self, request: api.AddMemoryRequest) -> api.AddMemoryResponse:
        from dcpm.write import remember

        return remember.add_memory(self.writer, self.recovery, request)

    def import_turns(self, user_id: str, turns: list[Turn]) -> int:
        from dcpm.write import remember

        return remember.import_turns(self.writer, user_id, turns)

    def search(self, request: api.SearchRequest) -> api.SearchResponse:
        encoder = self.query_encoder if request.associative else self.frozen_encoder
        from dcpm.read import search as read_search

        return read_search.search(self.db, self.index, encoder, self.settings, request)

    # --- inspection (dcpm.inspection) -------------------------------------------------------
    def list_memories(self, user_id: str, kind: str | None = None, limit: int = 50, offset: int = 0,
                      status: str | None = None, topic: str | None = None, since: datetime | None = None,
                      metadata: api.MetadataFilter | None = None) -> api.ListResponse:
        return inspection.list_memories(self.db, user_id, kind, limit, offset, status, topic, since,
                                        api.metadata_conditions(metadata))

    def get(self, memory_id: str) -> api.ItemOut | api.RawOut:
        return inspection.get(self.db, spelled_as_stored(memory_id))

    def history(self, memory_id: str) -> api.HistoryResponse:
        return inspection.history(self.db, spelled_as_stored(memory_id))

    def node(self, node_id: str) -> api.NodeOut:
        return inspection.node(self.db, spelled_as_stored(node_id))

    def users(self, only: str | None = None) -> list[api.UserOut]:
        return inspection.users(self.db, only)

    def events(self, user_id: str, limit: int = 200) -> list[api.HistoryEvent]:
        check_limit(limit, MAX_EVENTS)  # the route refuses these too; the CLI without a daemon comes here
        return inspection.user_events(self.db, user_id, limit)

    def owner_of(self, memory_id: str) -> str:
        return inspection.owner_of(self.db, spelled_as_stored(memory_id))

    def node_owner(self, node_id: str) -> str:
        return inspection.node_owner(self.db, spelled_as_stored(node_id))

    # --- edits and hard deletes (dcpm.admin) ------------------------------------------------
    def update_memory(self, memory_id: str, text: str) -> api.ItemOut:
        """New text for a current item as an UPDATE revision, re-embedded; returns the item."""
        memory_id = spelled_as_stored(memory_id)
        from dcpm.admin import edit as admin_edit

        self._room()
        admin_edit.revise_text(self.db, self.index, self.embedder, self.settings, memory_id, text)
        return self.get(memory_id)  # type: ignore[return-value]

    def delete_memory(self, memory_id: str, with_predecessors: bool = False,
                      compact: bool = False) -> api.DeleteResponse:
        memory_id = spelled_as_stored(memory_id)
        from dcpm.admin import delete as admin_delete

        return _deleted(self._deleting(lambda: admin_delete.delete_memory(
            self.db, self.index, self.settings, memory_id, with_predecessors=with_predecessors, compact=compact)))

    def delete_chain(self, memory_id: str, compact: bool = False) -> api.DeleteResponse:
        """Every revision of the item's belief, resolved under the writer lease."""
        memory_id = spelled_as_stored(memory_id)
        from dcpm.admin import delete as admin_delete

        return _deleted(self._deleting(lambda: admin_delete.delete_chain(self.db, self.index, self.settings, memory_id,
                                                                         compact=compact)))

    def delete_node(self, node_id: str, compact: bool = False) -> api.DeleteResponse:
        node_id = spelled_as_stored(node_id)
        from dcpm.admin import delete as admin_delete

        return _deleted(self._deleting(lambda: admin_delete.delete_node(self.db, self.index, self.settings, node_id,
                                                                        compact=compact)))

    def delete_session(self, user_id: str, session_id: str, compact: bool = False) -> api.DeleteResponse:
        from dcpm.admin import delete as admin_delete

        return _deleted(self._deleting(lambda: admin_delete.delete_session(self.db, self.index, self.settings, user_id,
                                                                           session_id, compact=compact)))

    def delete_user(self, user_id: str, compact: bool = False) -> api.DeleteUserResponse:
        from dcpm.admin import delete as admin_delete

        deletion = self._deleting(lambda: admin_delete.delete_user(self.db, self.index, self.settings, user_id,
                                                                   compact=compact))
        return api.DeleteUserResponse.model_validate(deletion, from_attributes=True)

    def _room(self) -> None:
        """Every write that reaches the vector shard keeps the disk reserve, deletes and edits too:
        the shard writes through memory-mapped files, and a mapped write into a full disk kills
        the process instead of failing (dcpm.store.datadir.ensure_free_space)."""
        ensure_free_space(self.settings.data_dir, self.settings.min_free_disk_mb)

    def _deleting(self, delete: Callable[[], T]) -> T:
        """A delete removes vectors before its commit (dcpm.admin.delete); when the commit fails
        (the disk filled meanwhile), the rolled-back rows get their vectors back now if there is
        room, else from start-up repair, which indexes every row the index lacks."""
        self._room()
        try:
            done = delete()
        except Exception as exc:
            if isinstance(exc, DcpmError) and not isinstance(exc, StorageFull):
                raise  # refused before anything was removed (not found, lease lost, invalid)
            from dcpm.index import projection

            try:
                self._room()
                self.maintenance.note_writes(projection.repair(self.db, self.index, self.embedder))
            except StorageFull:
                log.error("a delete was rolled back after its vectors were removed, on a full disk: they come "
                          "back at the next start")
            raise
        if getattr(done, "came_back", 0):  # rows restored while the delete ended lost their points again
            from dcpm.index import projection

            try:
                self.maintenance.note_writes(projection.repair(self.db, self.index, self.embedder))
            except Exception as exc:  # the delete is done; start-up repair indexes them
                log.warning("rows left unindexed after a delete wait for repair: %s", type(exc).__name__)
        return done

    # --- System 2 (dcpm.consolidation) ------------------------------------------------------
    def consolidate(self, request: api.ConsolidateRequest) -> api.JobOut:
        """Start a consolidation job in the background; poll `consolidation_job` for progress."""
        if request.user_id:
            inspection.known_user(self.db, request.user_id)
        self._room()
        return self.consolidation.start([request.user_id] if request.user_id else None, request.dry_run)

    def consolidation_job(self, job_id: str) -> api.JobOut:
        return self.consolidation.job(job_id)

    def runs(self, user_id: str | None = None, limit: int = 50) -> list[api.RunOut]:
        check_limit(limit, MAX_RUNS)  # SQLite reads LIMIT -1 as no limit at all
        return status.runs(self.db, user_id, limit)

    def consent(self, user_id: str, update: api.ConsentUpdate | None = None) -> api.ConsentOut:
        return inspection.consent(self.db, user_id, update)

    def graph(self, user_id: str) -> api.GraphOut:
        return inspection.graph(self.db, user_id)

    # --- operations -------------------------------------------------------------------------
    def backfill(self, progress: Progress | None = None, retry_failed: bool = False) -> int:
        from dcpm.write import remember

        return remember.backfill(self.writer, progress, retry_failed)

    def reindex(self, progress: Progress | None = None) -> int:
        """Write every vector again from the relational store (dcpm.index.projection.rebuild)."""
        from dcpm.index import projection

        started, total, done = time.perf_counter(), projection.count_rows(self.db, only_unindexed=False), 0

        def advance(rows: int) -> None:
            nonlocal done
            done += rows
            if progress:
                progress(done, total)

        self._room()
        index = self.index_to_rebuild()
        written = projection.rebuild(self.db, index, self.embedder, advance)
        index.optimize()
        log.info("reindexed %d points in %.1fs", written, time.perf_counter() - started)
        return written

    def export_user(self, user_id: str, path: Path) -> dict:
        """Everything of one user as JSONL behind a manifest (dcpm.admin.export)."""
        from dcpm.admin import export

        inspection.known_user(self.db, user_id)
        return export.export_user(self.db, user_id, path)

    def restore(self, path: Path) -> dict:
        """Load an export, then rebuild its vectors; the user answers searches as before."""
        from dcpm.admin import export
        from dcpm.index import projection

        ensure_free_space(self.settings.data_dir, self.settings.min_free_disk_mb)
        manifest = export.restore_user(self.db, path)
        self.maintenance.note_writes(projection.repair(self.db, self.index, self.embedder))
        return manifest

    def health(self) -> dict:
        """A lazy service (one CLI command) probes only what it opened: a model takes seconds to load."""
        opened = [part for part in ("index", "embedder") if part in self.__dict__ or not self._lazy]
        return status.health(self.db, (lambda: self.index) if "index" in opened else None,
                                 (lambda: self.embedder) if "embedder" in opened else None, self.settings)

    # --- access control (dcpm.auth) ---------------------------------------------------------
    def create_key(self, user_id: str, label: str | None = None) -> api.NewApiKey:
        return self.keys.create_key(user_id, label)

    def api_keys(self, user_id: str | None = None) -> list[api.ApiKeyOut]:
        return self.keys.api_keys(user_id)

    def revoke_key(self, key_ref: str) -> api.ApiKeyOut:
        return self.keys.revoke_key(key_ref)

def _deleted(deletion: Deletion) -> api.DeleteResponse:
    return api.DeleteResponse.model_validate(deletion, from_attributes=True)


@contextmanager
def open_memory(settings: Settings, *, background: bool = False, loading: Loading = nullcontext) -> Iterator[Memory]:
    """The daemon's client when one serves this data directory, else the store opened here under
    its lock: lazily, as suits one CLI command (`loading` hears what loads, e.g. the model), or with
    index upkeep and the writer's recovery loop when `background` (long-running: the MCP server)."""
    if running_daemon(settings.data_dir):  # only then is the HTTP client (httpx) loaded
        from dcpm.api.client import daemon_client

        client = daemon_client(settings)
        if client is not None:
            log.info("using the daemon that serves %s", settings.data_dir)
            with client:
                yield client
            return
    with ExitStack() as opened:  # closed in reverse: the service, then the lock
        lock = DataDirLock(settings.data_dir)
        lock.acquire()
        opened.callback(lock.release)
        service = opened.enter_context(closing(MemoryService(settings, lazy=not background, loading=loading)))
        if background:
            service.start_background()
        yield service
