"""The parts one process opens: the relational store and the API keys at once; the embedding
model, the vector index, the adapter, the LLM client, the writer and System 2 on first use (or
all at start, for the daemon). `dcpm.service.MemoryService` adds the operations on top."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import cached_property
from typing import TYPE_CHECKING

from dcpm.auth import KeyStore
from dcpm.config import Settings
from dcpm.store.datadir import make_data_dir
from dcpm.store.db import Database

if TYPE_CHECKING:  # each loads with the part that needs it, so that a command that only reads the
    # store imports none of them (scripts/bench_cold_start.py)
    from dcpm.consolidation.jobs import ConsolidationJobs
    from dcpm.embedding import Embedder
    from dcpm.index import VectorIndex
    from dcpm.index.upkeep import BackgroundLoop, IndexMaintenance
    from dcpm.llm import LLMClient
    from dcpm.read.query import QueryEncoder
    from dcpm.write.recovery import RecoveryLoop
    from dcpm.write.writer import Writer

log = logging.getLogger("dcpm.service")
Loading = Callable[[str], AbstractContextManager[object]]  # told what loads (e.g. the model) while it loads
SCRUB_RETRY_SECONDS = 30.0  # how often a scrub that readers blocked is tried again


class ProcessParts:
    """What one process opens. The relational store opens at once (and is migrated); the rest at
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
            from dcpm.embedding import load_embedder

            return self.__dict__.get("embedder") or load_embedder(self.settings)

    @cached_property
    def index(self) -> VectorIndex:
        with self._opening:
            if "index" in self.__dict__:
                return self.__dict__["index"]
            from dcpm.index import projection

            index = self._open_index(replace=False)
            self.__dict__["index"] = index
            if self._repair:  # the start-up check: rows a crash left without vectors
                repaired = projection.repair(self.db, index, self.embedder)
                if repaired:
                    log.warning("start-up check indexed %d rows whose vectors were missing", repaired)
                    self.maintenance.note_writes(repaired)
            return index

    def index_to_rebuild(self) -> VectorIndex:
        """The index for `reindex`: one still built for another embedder is replaced, not refused
        (the one way out of that refusal; it is derived data, rebuilt from the store)."""
        with self._opening:
            if "index" not in self.__dict__:
                self.__dict__["index"] = self._open_index(replace=True)
            return self.index

    def _open_index(self, replace: bool) -> VectorIndex:
        from dcpm.index import open_index

        return open_index(self.settings, self.embedder.dim, self.embedder.sparse_uses_idf,
                          embedder=self.embedder.fingerprint(), replace=replace)

    @cached_property
    def maintenance(self) -> IndexMaintenance:
        from dcpm.index.upkeep import IndexMaintenance

        with self._opening:
            return IndexMaintenance(self.index, self.settings)

    @cached_property
    def frozen_encoder(self) -> QueryEncoder:
        from dcpm.read.query import FrozenQueryEncoder

        return FrozenQueryEncoder(self.embedder)

    @cached_property
    def query_encoder(self) -> QueryEncoder:
        """Madeleine 4.5: an associative adapter replaces only the query vector; the index stays E(m)."""
        from dcpm.adapter.encoder import load_query_encoder

        with self._opening:
            return load_query_encoder(self.settings, self.embedder) or self.frozen_encoder

    @cached_property
    def writer(self) -> Writer:
        from dcpm.write.writer import Writer

        with self._opening:
            return Writer(self.db, self.index, self.embedder, self.settings, self.llm,
                          on_indexed=self.maintenance.note_writes)

    @cached_property
    def recovery(self) -> RecoveryLoop:
        from dcpm.write.recovery import RecoveryLoop

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

    @cached_property
    def scrubbing(self) -> BackgroundLoop:
        """Finishes a scrub after a delete that readers kept from finishing (Database.scrub_pending)."""
        from dcpm.index.upkeep import BackgroundLoop

        def step() -> None:
            if self.db.scrub_pending:
                self.db.scrub()
        return BackgroundLoop("scrub", step, SCRUB_RETRY_SECONDS, logger=log, immediately=True,
                              failure="the store could not be scrubbed; retrying")

    def start_background(self) -> None:
        """Index upkeep, the scrub retry, and the writer's recovery loop when an LLM is configured."""
        self.maintenance.start()
        self.scrubbing.start()
        if self.llm is not None:
            self.recovery.start()


    def close(self) -> None:
        """Stop background work and release the store; calling it twice is harmless."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        for part, stop in (("recovery", "stop"), ("maintenance", "stop"), ("scrubbing", "stop"), ("index", "close")):
            if part in self.__dict__:  # only what was opened
                getattr(self.__dict__[part], stop)()
        self.db.close()
