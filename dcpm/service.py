"""The composition root: builds the store, index, embedder, LLM client, writer and System 2 of one
process, and implements the `Memory` contract (dcpm.api.protocol) by calling the module that
owns each operation. Heavy parts (the embedding model, the vector index, the adapter) are
opened on first use, so commands that only read the relational store answer without them."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import AbstractContextManager, ExitStack, closing, contextmanager, nullcontext
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from dcpm import inspection
from dcpm.admin import delete as admin_delete, edit as admin_edit, export
from dcpm.api import models as api
from dcpm.api.protocol import Memory, Progress
from dcpm.auth import KeyStore
from dcpm.config import Settings
from dcpm.domain import Turn
from dcpm.embedding import Embedder, load_embedder
from dcpm.index import VectorIndex, open_index, projection
from dcpm.index.upkeep import IndexMaintenance
from dcpm.read import search as read_search
from dcpm.read.query import FrozenQueryEncoder, QueryEncoder
from dcpm.store.datadir import DataDirLock, ensure_free_space, make_data_dir, running_daemon_url
from dcpm.store.db import Database
from dcpm.write import remember
from dcpm.write.recovery import RecoveryLoop
from dcpm.write.writer import Writer

if TYPE_CHECKING:  # System 2 (scikit-learn, networkx) and the LLM client (openai) load on first use
    from dcpm.consolidation.jobs import ConsolidationJobs
    from dcpm.llm import LLMClient

log = logging.getLogger("dcpm.service")
Loading = Callable[[str], AbstractContextManager[object]]  # told what loads (e.g. the model) while it loads


class MemoryService:
    """One process's memory. The relational store opens at once (and is migrated); the rest at
    once too, unless `lazy`: then on first use, under a lock, so a command that only reads the
    store never loads a model (and a misconfigured adapter is refused when first needed)."""

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None, repair: bool = True,
                 lazy: bool = False, loading: Loading = nullcontext):
        self.settings = settings
        settings.check_shared_index()
        make_data_dir(settings.data_dir)  # 0700: the store holds personal data
        self.db = Database(settings.sqlalchemy_url)
        self.keys = KeyStore(self.db)
        self._repair, self._lazy = repair, lazy
        self._loading = loading
        self._opening = threading.RLock()
        if embedder is not None:
            self.__dict__["embedder"] = embedder
        if not lazy:
            self.open_all()

    # --- backends, opened on first use ------------------------------------------------------
    @cached_property
    def llm(self) -> LLMClient | None:
        from dcpm.llm import LLMClient

        return LLMClient(self.settings) if self.settings.llm_configured else None

    @cached_property
    def embedder(self) -> Embedder:
        with self._opening, self._loading(f"loading embedding model {self.settings.embedder}"):
            return self.__dict__.get("embedder") or load_embedder(self.settings)

    @cached_property
    def index(self) -> VectorIndex:
        with self._opening:
            if "index" in self.__dict__:
                return self.__dict__["index"]
            index = open_index(self.settings, self.embedder.dim, self.embedder.sparse_uses_idf)
            self.__dict__["index"] = index
            if self._repair:  # the start-up check: rows a crash left without vectors
                repaired = projection.repair(self.db, index, self.embedder)
                if repaired:
                    log.warning("start-up check indexed %d rows whose vectors were missing", repaired)
                    self.maintenance.note_writes(repaired)
            return index

    @cached_property
    def maintenance(self) -> IndexMaintenance:
        with self._opening:
            return IndexMaintenance(self.index, self.settings)

    @cached_property
    def frozen_encoder(self) -> QueryEncoder:
        return FrozenQueryEncoder(self.embedder)

    @cached_property
    def query_encoder(self) -> QueryEncoder:
        """Madeleine 4.5: an associative adapter replaces only the query vector; the index stays E(m)."""
        from dcpm.adapter.encoder import load_query_encoder

        with self._opening:
            return load_query_encoder(self.settings, self.embedder) or self.frozen_encoder

    @cached_property
    def writer(self) -> Writer:
        with self._opening:
            return Writer(self.db, self.index, self.embedder, self.settings, self.llm,
                          on_indexed=self.maintenance.note_writes)

    @cached_property
    def recovery(self) -> RecoveryLoop:
        return RecoveryLoop(self.writer, self.settings.recovery_interval_seconds)

    @cached_property
    def consolidation(self) -> ConsolidationJobs:
        from dcpm.consolidation.jobs import ConsolidationJobs
        from dcpm.consolidation.runs import Backends

        with self._opening:
            return ConsolidationJobs(Backends(self.db, self.index, self.embedder, self.llm, self.settings))

    def open_all(self) -> None:
        """Load everything now, so that no request pays for it and a bad setting stops the start."""
        _ = self.index, self.query_encoder, self.writer, self.consolidation

    def start_background(self) -> None:
        """Index upkeep, and the writer's recovery loop when an LLM is configured."""
        self.maintenance.start()
        if self.llm is not None:
            self.recovery.start()

    # --- the two calls an assistant makes ---------------------------------------------------
    def add_memory(self, request: api.AddMemoryRequest) -> api.AddMemoryResponse:
        return remember.add_memory(self.writer, self.recovery, request)

    def import_turns(self, user_id: str, turns: list[Turn]) -> int:
        return remember.import_turns(self.writer, user_id, turns)

    def search(self, request: api.SearchRequest) -> api.SearchResponse:
        encoder = self.query_encoder if request.associative else self.frozen_encoder
        return read_search.search(self.db, self.index, encoder, self.settings, request)

    # --- inspection (dcpm.inspection) -------------------------------------------------------
    def list_memories(self, user_id: str, kind: str | None = None, limit: int = 50, offset: int = 0,
                      status: str | None = None, topic: str | None = None, since: datetime | None = None,
                      metadata: api.MetadataFilter | None = None) -> api.ListResponse:
        return inspection.list_memories(self.db, user_id, kind, limit, offset, status, topic, since,
                                        api.metadata_conditions(metadata))

    def get(self, memory_id: str) -> api.ItemOut | api.RawOut:
        return inspection.get(self.db, memory_id)

    def history(self, memory_id: str) -> api.HistoryResponse:
        return inspection.history(self.db, memory_id)

    def node(self, node_id: str) -> api.NodeOut:
        return inspection.node(self.db, node_id)

    def users(self, only: str | None = None) -> list[api.UserOut]:
        return inspection.users(self.db, only)

    def events(self, user_id: str, limit: int = 200) -> list[api.HistoryEvent]:
        return inspection.user_events(self.db, user_id, limit)

    def owner_of(self, memory_id: str) -> str:
        return inspection.owner_of(self.db, memory_id)

    def node_owner(self, node_id: str) -> str:
        return inspection.node_owner(self.db, node_id)

    # --- edits and hard deletes (dcpm.admin) ------------------------------------------------
    def update_memory(self, memory_id: str, text: str) -> api.ItemOut:
        """New text for a current item as an UPDATE revision, re-embedded; returns the item."""
        admin_edit.revise_text(self.db, self.index, self.embedder, self.settings, memory_id, text)
        return self.get(memory_id)  # type: ignore[return-value]

    def delete_memory(self, memory_id: str, with_predecessors: bool = False, compact: bool = False) -> api.DeleteResponse:
        return _deleted(admin_delete.delete_memory(self.db, self.index, self.settings, memory_id,
                                                   with_predecessors=with_predecessors, compact=compact))

    def delete_chain(self, memory_id: str, compact: bool = False) -> api.DeleteResponse:
        """Every revision of the item's belief, resolved under the writer lease."""
        return _deleted(admin_delete.delete_chain(self.db, self.index, self.settings, memory_id, compact=compact))

    def delete_node(self, node_id: str, compact: bool = False) -> api.DeleteResponse:
        return _deleted(admin_delete.delete_node(self.db, self.index, self.settings, node_id, compact=compact))

    def delete_session(self, user_id: str, session_id: str, compact: bool = False) -> api.DeleteResponse:
        return _deleted(admin_delete.delete_session(self.db, self.index, self.settings, user_id, session_id,
                                                    compact=compact))

    def delete_user(self, user_id: str, compact: bool = False) -> api.DeleteUserResponse:
        deletion = admin_delete.delete_user(self.db, self.index, self.settings, user_id, compact=compact)
        return api.DeleteUserResponse.model_validate(deletion, from_attributes=True)

    # --- System 2 (dcpm.consolidation) ------------------------------------------------------
    def consolidate(self, request: api.ConsolidateRequest) -> api.JobOut:
        """Start a consolidation job in the background; poll `consolidation_job` for progress."""
        if request.user_id:
            inspection.known_user(self.db, request.user_id)
        return self.consolidation.start([request.user_id] if request.user_id else None, request.dry_run)

    def consolidation_job(self, job_id: str) -> api.JobOut:
        return self.consolidation.job(job_id)

    def runs(self, user_id: str | None = None, limit: int = 50) -> list[api.RunOut]:
        return inspection.runs(self.db, user_id, limit)

    def consent(self, user_id: str, update: api.ConsentUpdate | None = None) -> api.ConsentOut:
        return inspection.consent(self.db, user_id, update)

    def graph(self, user_id: str) -> api.GraphOut:
        return inspection.graph(self.db, user_id)

    # --- operations -------------------------------------------------------------------------
    def backfill(self, progress: Progress | None = None, retry_failed: bool = False) -> int:
        return remember.backfill(self.writer, progress, retry_failed)

    def reindex(self, progress: Progress | None = None) -> int:
        """Drop every vector and rebuild the index from the relational store."""
        started, total, done = time.perf_counter(), projection.count_rows(self.db, only_unindexed=False), 0

        def advance(rows: int) -> None:
            nonlocal done
            done += rows
            if progress:
                progress(done, total)

        written = projection.rebuild(self.db, self.index, self.embedder, advance)
        self.index.optimize()
        log.info("reindexed %d points in %.1fs", written, time.perf_counter() - started)
        return written

    def export_user(self, user_id: str, path: Path) -> dict:
        """Everything of one user as JSONL behind a manifest (dcpm.admin.export)."""
        inspection.known_user(self.db, user_id)
        return export.export_user(self.db, user_id, path)

    def restore(self, path: Path) -> dict:
        """Load an export, then rebuild its vectors; the user answers searches as before."""
        ensure_free_space(self.settings.data_dir, self.settings.min_free_disk_mb)
        manifest = export.restore_user(self.db, path)
        self.maintenance.note_writes(projection.repair(self.db, self.index, self.embedder))
        return manifest

    def health(self) -> dict:
        """A lazy service (one CLI command) probes only what it opened: a model takes seconds to load."""
        opened = [part for part in ("index", "embedder") if part in self.__dict__ or not self._lazy]
        return inspection.health(self.db, (lambda: self.index) if "index" in opened else None,
                                 (lambda: self.embedder) if "embedder" in opened else None, self.settings)

    # --- access control (dcpm.auth) ---------------------------------------------------------
    def create_key(self, user_id: str, label: str | None = None) -> api.NewApiKey:
        return self.keys.create_key(user_id, label)

    def api_keys(self, user_id: str | None = None) -> list[api.ApiKeyOut]:
        return self.keys.api_keys(user_id)

    def revoke_key(self, key_ref: str) -> api.ApiKeyOut:
        return self.keys.revoke_key(key_ref)

    def close(self) -> None:
        """Stop background work and release the store; calling it twice is harmless."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        for part, stop in (("recovery", "stop"), ("maintenance", "stop"), ("index", "close")):
            if part in self.__dict__:  # only what was opened
                getattr(self.__dict__[part], stop)()
        self.db.close()


def _deleted(deletion: admin_delete.Deletion) -> api.DeleteResponse:
    return api.DeleteResponse.model_validate(deletion, from_attributes=True)


@contextmanager
def open_memory(settings: Settings, *, background: bool = False, loading: Loading = nullcontext) -> Iterator[Memory]:
    """The daemon's client when one serves this data directory, else the store opened here under
    its lock: lazily, as suits one CLI command (`loading` hears what loads, e.g. the model), or with
    index upkeep and the writer's recovery loop when `background` (long-running: the MCP server)."""
    if running_daemon_url(settings.data_dir):  # only then is the HTTP client (httpx) loaded
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
