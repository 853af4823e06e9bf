"""The composition root: one store, one index, one embedder, and the operations on them.

The HTTP routes and the CLI's direct mode both call this; neither holds business logic.
"""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from sqlalchemy import func, select

from dcpm import indexing, reader
from dcpm.auth import KeyStore
from dcpm.admin import delete as admin_delete
from dcpm.admin import edit as admin_edit
from dcpm.admin import export
from dcpm.adapter.encoder import load_query_encoder
from dcpm.config import Settings
from dcpm.consolidation.jobs import Consolidation
from dcpm.consolidation.runs import Engine
from dcpm.datadir import ensure_free_space
from dcpm.embedding import Embedder, load_embedder
from dcpm.errors import Invalid, NotFound, Unavailable
from dcpm.index import open_index
from dcpm.ingest import Turn, as_utc, check_turns, persist_turns
from dcpm.llm import LLMClient
from dcpm.maintenance import IndexMaintenance
from dcpm.recovery import RecoveryLoop
from dcpm.schemas import (
    ITEM_KINDS,
    AddMemoryRequest,
    AddMemoryResponse,
    ConsentOut,
    ConsentUpdate,
    ConsolidateRequest,
    DeleteResponse,
    DeleteUserResponse,
    EvidenceOut,
    GraphEdgeOut,
    GraphOut,
    JobOut,
    NodeOut,
    RunOut,
    HistoryEvent,
    HistoryResponse,
    ItemOut,
    ListResponse,
    Operation,
    RawOut,
    RevisionOut,
    SearchRequest,
    SearchResponse,
    UserOut,
    check_user_id,
)
from dcpm.store.db import Database
from dcpm.store.models import Edge, Event, Evidence, Item, ItemRevision, Node, RawInput, User
from dcpm.writer import Writer

if TYPE_CHECKING:
    from dcpm.client import Client

log = logging.getLogger("dcpm.service")
Progress = Callable[[int], None]


class MemoryService:
    def __init__(self, settings: Settings, *, embedder: Embedder | None = None, repair: bool = True):
        self.settings = settings
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.db = Database(settings.sqlalchemy_url)
        self.keys = KeyStore(self.db)  # user-scoped API keys (dcpm.auth)
        self.embedder = embedder or load_embedder(settings)
        self.index = open_index(settings, self.embedder.dim, self.embedder.sparse_uses_idf)
        # Madeleine 4.5: an associative adapter replaces only the query vector; the index stays E(m).
        self.frozen_encoder = reader.FrozenQueryEncoder(self.embedder)
        self.query_encoder: reader.QueryEncoder = (load_query_encoder(settings, self.embedder)
                                                   or self.frozen_encoder)
        self.maintenance = IndexMaintenance(self.index, settings)
        self.llm = LLMClient(settings) if settings.llm_configured else None
        self.writer = Writer(self.db, self.index, self.embedder, settings, self.llm,
                             on_indexed=self.maintenance.note_writes)
        self.recovery = RecoveryLoop(self.writer, settings.recovery_interval_seconds)
        self.consolidation = Consolidation(Engine(self.db, self.index, self.embedder, self.llm, settings))
        if repair:
            repaired = indexing.repair(self.db, self.index, self.embedder)
            if repaired:
                log.warning("start-up check indexed %d rows whose vectors were missing", repaired)
                self.maintenance.note_writes(repaired)

    # --- write -----------------------------------------------------------------------------
    def add_memory(self, request: AddMemoryRequest) -> AddMemoryResponse:
        """Raw persist, then index. Extraction (System 1 writer) picks up `pending` inputs."""
        turns = [Turn(text=m.content, role=m.role, speaker=m.name, session_id=request.session_id,
                      timestamp=m.timestamp or request.timestamp, metadata=request.metadata)
                 for m in request.turns()]
        check_turns(turns, self.settings)
        ensure_free_space(self.settings.data_dir, self.settings.min_free_disk_mb)
        request_id = str(uuid.uuid4())
        status = "pending" if request.infer else "raw"
        with self.db.session() as session:
            rows = persist_turns(session, request.user_id, turns, request_id=request_id, status=status)
        self._index(raws=rows)
        response = AddMemoryResponse(
            request_id=request_id, user_id=request.user_id, raw_ids=[r.id for r in rows],
            status="pending" if request.infer else "stored", message="stored verbatim",
            operations=[Operation(op="RAW", id=r.id, text=r.text, kind="raw") for r in rows],
        )
        if not request.infer:
            return response
        if self.llm is None:
            response.message = "stored verbatim; extraction waits until an LLM is configured (dcpm backfill)"
        elif not request.wait:
            self.recovery.submit(request.user_id)
            response.message = "stored verbatim; extraction runs in the background"
        else:
            result = self.writer.drain(request.user_id, until=request_id).get(request_id)
            if result is None:  # processed by another worker meanwhile, or still queued behind an earlier input
                result = self.writer.outcome(request_id)
            if result.status == "pending" and not result.error:
                response.message = "stored verbatim; waiting behind an earlier input of this user"
            else:
                response.status = "done" if result.status == "done" else "pending"
                response.operations += result.operations
                response.llm_calls, response.tokens, response.error = result.usage.calls, result.usage.tokens, result.error
                response.timings_ms = {"total": round(result.seconds * 1000, 2),
                                       "llm": round(result.usage.seconds * 1000, 2),
                                       "non_llm": round(result.non_llm_seconds * 1000, 2)}
                response.message = ("extracted" if result.status == "done"
                                    else "stored verbatim; extraction failed and will be retried")
        return response

    def backfill(self, progress: Progress | None = None) -> int:
        """Process everything pending now (e.g. after an LLM was configured); returns requests done."""
        if self.llm is None:
            raise Unavailable("no LLM configured: set DCPM_LLM_BASE_URL and DCPM_LLM_MODEL first")
        done = 0
        for user_id in self.writer.users_with_pending():
            results = self.writer.drain(user_id, force=True)
            done += sum(1 for r in results.values() if r.status == "done")
            if progress:
                progress(len(results))
        return done

    def history(self, item_id: str) -> HistoryResponse:
        """Every event of an item's chain: created, updated (before/after), superseded, by which input."""
        item = self.get(item_id)
        if not isinstance(item, ItemOut):
            raise Invalid(f"{item_id} is a raw input; history is kept for items")
        ids = [link.id for link in item.chain or []] or [item.id]
        with self.db.session() as session:
            events = list(session.scalars(select(Event).where(Event.subject_id.in_(ids)).order_by(Event.at, Event.id)))
        return HistoryResponse(item_id=item.id, chain_id=item.chain_id, events=[
            HistoryEvent(at=e.at, action=e.action, item_id=e.subject_id, request_id=e.request_id, detail=e.detail or {})
            for e in events])

    def _index(self, raws=(), items=()) -> None:  # type: ignore[no-untyped-def]
        written = indexing.index_rows(self.db, self.index, self.embedder, raws=raws, items=items)
        self.maintenance.note_writes(written)

    def import_turns(self, user_id: str, turns: list[Turn]) -> int:
        """Bulk raw ingest of one batch; turns carry deterministic ids, known ones are skipped."""
        check_turns(turns, self.settings)
        ensure_free_space(self.settings.data_dir, self.settings.min_free_disk_mb)
        with self.db.session() as session:
            rows = persist_turns(session, user_id, turns, request_id=str(uuid.uuid4()), status="raw",
                                 skip_existing=True)
        if rows:
            self._index(raws=rows)
        return len(rows)

    # --- read ------------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> SearchResponse:
        encoder = self.query_encoder if request.associative else self.frozen_encoder
        return reader.search(self.db, self.index, encoder, self.settings, request)

    def list_memories(self, user_id: str, kind: str | None = None, limit: int = 50, offset: int = 0,
                      status: str | None = None, topic: str | None = None,
                      since: datetime | None = None) -> ListResponse:
        """A user's items (or raw turns with kind="raw"), oldest first. `status` is current or
        superseded for items, raw / pending / done / failed for turns; `since` compares the time
        the belief started to hold (or the turn was said)."""
        self._require_user(user_id)
        if limit < 1 or limit > 1000 or offset < 0:
            raise Invalid("limit must be 1..1000 and offset >= 0")
        since = as_utc(since) if since else None
        with self.db.session() as session:
            if kind == "raw":
                query = select(RawInput).where(RawInput.user_id == user_id)
                if status:
                    query = query.where(RawInput.status == status)
                if since:
                    query = query.where(RawInput.timestamp >= since)
                total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
                rows = session.scalars(query.order_by(RawInput.timestamp, RawInput.position).offset(offset).limit(limit))
                return ListResponse(user_id=user_id, total=total, items=[raw_out(r) for r in rows])
            if kind is not None and kind not in ITEM_KINDS:
                raise Invalid(f"unknown kind {kind!r}; use one of raw, {', '.join(ITEM_KINDS)}")
            if status not in (None, "current", "superseded"):
                raise Invalid("status of items is current or superseded (raw turns: raw, pending, done, failed)")
            query = select(Item).where(Item.user_id == user_id)
            if kind:
                query = query.where(Item.kind == kind)
            if status:
                query = query.where(Item.superseded_by_id.is_(None) if status == "current"
                                    else Item.superseded_by_id.is_not(None))
            if topic:
                query = query.where(Item.topic == topic)
            if since:
                query = query.where(Item.valid_from >= since)
            total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
            rows = session.scalars(query.order_by(Item.valid_from, Item.created_at).offset(offset).limit(limit))
            return ListResponse(user_id=user_id, total=total, items=[item_out(i) for i in rows])

    def get(self, memory_id: str) -> ItemOut | RawOut:
        try:
            uuid.UUID(memory_id)
        except ValueError:
            raise Invalid(f"{memory_id!r} is not a memory id (a UUID)") from None
        with self.db.session() as session:
            raw = session.get(RawInput, memory_id)
            if raw is not None:
                return raw_out(raw)
            item = session.get(Item, memory_id)
            if item is None:
                raise NotFound(f"no memory with id {memory_id}")
            chain_nodes = list(session.scalars(select(Item).where(Item.chain_id == item.chain_id)))
            revisions = list(session.scalars(select(ItemRevision).where(ItemRevision.item_id == item.id)
                                             .order_by(ItemRevision.revision)))
        out = item_out(item)
        out.chain = reader._links(reader.walk_chain(chain_nodes), None)
        out.revisions = [RevisionOut(revision=r.revision, text=r.text, op=r.op, raw_id=r.raw_id,
                                     created_at=r.created_at) for r in revisions]
        return out

    def users(self, only: str | None = None) -> list[UserOut]:
        """Users with stored memories; `only` narrows the list to that one user (an API key's)."""
        with self.db.session() as session:
            raw_counts = dict(session.execute(select(RawInput.user_id, func.count()).group_by(RawInput.user_id)).all())
            item_counts = dict(session.execute(select(Item.user_id, func.count()).group_by(Item.user_id)).all())
            query = select(User).order_by(User.id)
            users = list(session.scalars(query if only is None else query.where(User.id == only)))
        return [UserOut(id=u.id, created_at=u.created_at, last_seen_at=u.last_seen_at,
                        raw_inputs=raw_counts.get(u.id, 0), items=item_counts.get(u.id, 0)) for u in users]

    def owner_of(self, memory_id: str) -> str:
        """The user a memory (item or raw turn) belongs to; Invalid for a non-id, NotFound if absent."""
        return admin_delete.owner_of(self.db, memory_id)

    def node(self, node_id: str) -> NodeOut:
        """A schema / intention / core-schema node with its evidence and edges."""
        with self.db.session() as session:
            node = session.get(Node, node_id)
            if node is None:
                raise NotFound(f"no graph node with id {node_id}")
            evidence = list(session.scalars(select(Item).join(Evidence, Evidence.item_id == Item.id)
                                            .where(Evidence.node_id == node_id).order_by(Item.valid_from)))
            edges = list(session.scalars(select(Edge).where((Edge.source_id == node_id) | (Edge.target_id == node_id))))
            return NodeOut(id=node.id, kind=node.kind, user_id=node.user_id, domain=node.domain, text=node.text,
                           status=node.status, behavior=node.behavior, created_at=node.created_at,
                           evidence=[EvidenceOut(id=i.id, kind=i.kind, text=i.text, current=i.is_current)
                                     for i in evidence],
                           edges=[GraphEdgeOut(source=e.source_id, target=e.target_id, type=e.type) for e in edges])

    def node_owner(self, node_id: str) -> str:
        """The user a graph node belongs to; NotFound if absent."""
        with self.db.session() as session:
            user_id = session.scalar(select(Node.user_id).where(Node.id == node_id))
        if user_id is None:
            raise NotFound(f"no graph node with id {node_id}")
        return user_id

    def _require_user(self, user_id: str) -> None:
        try:
            check_user_id(user_id)
        except ValueError as exc:
            raise Invalid(str(exc)) from None
        with self.db.session() as session:
            if session.get(User, user_id) is None:
                raise NotFound(f"unknown user {user_id!r}: nothing has been stored for this user")

    # --- operations ------------------------------------------------------------------------
    def health(self) -> dict:
        report: dict = {"status": "ok"}
        try:
            self.db.ping()
            report["store"] = {"ok": True, "url": self.db.engine.url.render_as_string(hide_password=True)}
        except Exception as exc:  # health reports, never raises
            report["store"] = {"ok": False, "error": str(exc)}
            report["status"] = "degraded"
        try:
            report["index"] = {"ok": True, "backend": self.index.backend, "points": self.index.count()}
        except Exception as exc:
            report["index"] = {"ok": False, "error": str(exc)}
            report["status"] = "degraded"
        report["embedder"] = {"ok": True, "name": self.embedder.name, "dim": self.embedder.dim,
                              "device": getattr(self.embedder, "device", "cpu")}
        report["llm"] = llm_reachability(self.settings)
        return report

    def reindex(self, progress: Progress | None = None) -> int:
        started = time.perf_counter()
        written = indexing.rebuild(self.db, self.index, self.embedder, progress)
        self.index.optimize()
        log.info("reindexed %d points in %.1fs", written, time.perf_counter() - started)
        return written

    # --- consolidation (System 2) ------------------------------------------------------------
    def consolidate(self, request: ConsolidateRequest) -> JobOut:
        """Start a consolidation job in the background; poll `consolidation_job` for progress."""
        if request.user_id:
            self._require_user(request.user_id)
        return self.consolidation.start_job([request.user_id] if request.user_id else None, request.dry_run)

    def consolidation_job(self, job_id: str) -> JobOut:
        return self.consolidation.job(job_id)

    def runs(self, user_id: str | None = None, limit: int = 50) -> list[RunOut]:
        return self.consolidation.runs(user_id, limit)

    def consent(self, user_id: str, update: ConsentUpdate | None = None) -> ConsentOut:
        self._require_user(user_id)
        return self.consolidation.consent(user_id, update)

    def graph(self, user_id: str) -> GraphOut:
        self._require_user(user_id)
        return self.consolidation.graph(user_id)

    # --- export / restore --------------------------------------------------------------------
    def export_user(self, user_id: str, path: Path) -> dict:
        """Everything of one user as JSONL behind a manifest (dcpm.admin.export)."""
        self._require_user(user_id)
        return export.export_user(self.db, user_id, path)

    def restore(self, path: Path) -> dict:
        """Load an export, then rebuild its vectors; the user answers searches as before."""
        ensure_free_space(self.settings.data_dir, self.settings.min_free_disk_mb)
        manifest = export.restore_user(self.db, path)
        self.maintenance.note_writes(indexing.repair(self.db, self.index, self.embedder))
        return manifest

    def close(self) -> None:
        """Stop background work and release the store; calling it twice is harmless."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self.recovery.stop()
        self.maintenance.stop()
        self.index.close()
        self.db.close()

    # --- deletes and edits by id ------------------------------------------------------------
    def delete_memory(self, memory_id: str, with_predecessors: bool = False) -> DeleteResponse:
        """Hard-delete an item (its chain re-linked around it) or a raw turn; see dcpm.admin.delete."""
        deletion = admin_delete.delete_memory(self.db, self.index, self.settings, memory_id,
                                              with_predecessors=with_predecessors)
        return DeleteResponse.model_validate(deletion, from_attributes=True)

    def delete_chain(self, memory_id: str) -> DeleteResponse:
        """An item's whole supersedes chain, every revision of the belief."""
        with self.db.session() as session:
            item = session.get(Item, memory_id)
            if item is None:
                raise NotFound(f"no item with id {memory_id}")
            head = session.scalar(select(Item.id).where(Item.chain_id == item.chain_id,
                                                        Item.superseded_by_id.is_(None)).limit(1))
        return self.delete_memory(head or memory_id, with_predecessors=True)

    def delete_node(self, node_id: str) -> DeleteResponse:
        return DeleteResponse.model_validate(admin_delete.delete_node(self.db, self.index, node_id),
                                             from_attributes=True)

    def delete_session(self, user_id: str, session_id: str) -> DeleteResponse:
        deletion = admin_delete.delete_session(self.db, self.index, self.settings, user_id, session_id)
        return DeleteResponse.model_validate(deletion, from_attributes=True)

    def events(self, user_id: str, limit: int = 200) -> list[HistoryEvent]:
        """The user's event log, newest first (deleted subjects show only tombstones)."""
        self._require_user(user_id)
        with self.db.session() as session:
            rows = session.scalars(select(Event).where(Event.user_id == user_id)
                                   .order_by(Event.at.desc(), Event.id.desc()).limit(limit))
            return [HistoryEvent(at=e.at, action=e.action, item_id=e.subject_id, request_id=e.request_id,
                                 detail=e.detail or {}) for e in rows]

    def delete_user(self, user_id: str) -> DeleteUserResponse:
        """Everything stored for a user, vectors included; events keep only tombstones."""
        deletion = admin_delete.delete_user(self.db, self.index, self.settings, user_id)
        return DeleteUserResponse.model_validate(deletion, from_attributes=True)

    def update_memory(self, memory_id: str, text: str) -> ItemOut:
        """New text for a current item as an UPDATE revision, re-embedded; returns the item."""
        admin_edit.revise_text(self.db, self.index, self.embedder, self.settings, memory_id, text)
        return self.get(memory_id)  # type: ignore[return-value]


@contextmanager
def open_memory(settings: Settings, *, background: bool = False) -> Iterator["MemoryService | Client"]:
    """The daemon's client when one serves this data directory, else the store opened here under
    the data directory's lock. `background` starts index upkeep and the writer's recovery loop,
    for long-running processes such as the MCP server."""
    from dcpm.client import daemon_client
    from dcpm.datadir import DataDirLock

    client = daemon_client(settings)
    if client is not None:
        log.info("using the daemon that serves %s", settings.data_dir)
        with client:
            yield client
        return
    lock = DataDirLock(settings.data_dir)
    lock.acquire()
    try:
        service = MemoryService(settings)
        try:
            if background:
                service.maintenance.start()
                if service.llm is not None:
                    service.recovery.start()
            yield service
        finally:
            service.close()
    finally:
        lock.release()


def llm_reachability(settings: Settings) -> dict:
    """Whether the configured OpenAI-compatible endpoint answers `GET /models` (2 s budget)."""
    if not settings.llm_configured:
        return {"configured": False, "ok": None, "detail": "no LLM configured: raw-only mode"}
    import httpx

    headers = {}
    if settings.llm_api_key.get_secret_value():
        headers["Authorization"] = f"Bearer {settings.llm_api_key.get_secret_value()}"
    try:
        response = httpx.get(settings.llm_base_url.rstrip("/") + "/models", headers=headers, timeout=2.0)
        return {"configured": True, "ok": response.status_code < 500, "status_code": response.status_code}
    except httpx.HTTPError as exc:
        return {"configured": True, "ok": False, "detail": type(exc).__name__}


def raw_out(raw: RawInput) -> RawOut:
    return RawOut(id=raw.id, user_id=raw.user_id, text=raw.text, role=raw.role, speaker=raw.speaker,
                  session_id=raw.session_id, timestamp=raw.timestamp, created_at=raw.created_at,
                  status=raw.status, error=raw.error, metadata=raw.meta or {})


def item_out(item: Item) -> ItemOut:
    return ItemOut(id=item.id, kind=item.kind, user_id=item.user_id, text=item.text, type=item.type,
                   topic=item.topic, salience=item.salience, event_time=item.event_time,
                   valid_from=item.valid_from, valid_to=item.valid_to, current=item.is_current,
                   chain_id=item.chain_id, supersedes=item.supersedes_id, superseded_by=item.superseded_by_id,
                   revision=item.revision, source_raw_id=item.source_raw_id, created_at=item.created_at,
                   updated_at=item.updated_at, metadata=item.meta or {})
