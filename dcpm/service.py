"""The composition root: one store, one index, one embedder, and the operations on them.

The HTTP routes and the CLI's direct mode both call this; neither holds business logic.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Callable

from sqlalchemy import func, select

from dcpm import indexing, reader
from dcpm.config import Settings
from dcpm.embedding import Embedder, load_embedder
from dcpm.errors import Invalid, NotFound
from dcpm.index import open_index
from dcpm.ingest import Turn, check_turns, persist_turns
from dcpm.maintenance import IndexMaintenance
from dcpm.schemas import (
    ITEM_KINDS,
    AddMemoryRequest,
    AddMemoryResponse,
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
from dcpm.store.models import Item, ItemRevision, RawInput, User

log = logging.getLogger("dcpm.service")
Progress = Callable[[int], None]


class MemoryService:
    def __init__(self, settings: Settings, *, embedder: Embedder | None = None, repair: bool = True):
        self.settings = settings
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.db = Database(settings.sqlalchemy_url)
        self.embedder = embedder or load_embedder(settings)
        self.index = open_index(settings, self.embedder.dim, self.embedder.sparse_uses_idf)
        self.query_encoder: reader.QueryEncoder = reader.FrozenQueryEncoder(self.embedder)
        self.maintenance = IndexMaintenance(self.index, settings)
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
        request_id = str(uuid.uuid4())
        status = "pending" if request.infer else "raw"
        with self.db.session() as session:
            rows = persist_turns(session, request.user_id, turns, request_id=request_id, status=status)
        self._index(raws=rows)
        message = "stored verbatim"
        if request.infer and not self.settings.llm_configured:
            message = "stored verbatim; extraction waits until an LLM is configured"
        return AddMemoryResponse(
            request_id=request_id, user_id=request.user_id, raw_ids=[r.id for r in rows],
            status="pending" if request.infer else "stored", message=message,
            operations=[Operation(op="RAW", id=r.id, text=r.text, kind="raw") for r in rows],
        )

    def _index(self, raws=(), items=()) -> None:  # type: ignore[no-untyped-def]
        written = indexing.index_rows(self.db, self.index, self.embedder, raws=raws, items=items)
        self.maintenance.note_writes(written)

    def import_turns(self, user_id: str, turns: list[Turn]) -> int:
        """Bulk raw ingest of one batch; turns carry deterministic ids, known ones are skipped."""
        check_turns(turns, self.settings)
        with self.db.session() as session:
            rows = persist_turns(session, user_id, turns, request_id=str(uuid.uuid4()), status="raw",
                                 skip_existing=True)
        if rows:
            self._index(raws=rows)
        return len(rows)

    # --- read ------------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> SearchResponse:
        return reader.search(self.db, self.index, self.query_encoder, self.settings, request)

    def list_memories(self, user_id: str, kind: str | None = None, limit: int = 50, offset: int = 0) -> ListResponse:
        self._require_user(user_id)
        if limit < 1 or limit > 1000 or offset < 0:
            raise Invalid("limit must be 1..1000 and offset >= 0")
        with self.db.session() as session:
            if kind == "raw":
                query = select(RawInput).where(RawInput.user_id == user_id)
                total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
                rows = session.scalars(query.order_by(RawInput.timestamp, RawInput.position).offset(offset).limit(limit))
                return ListResponse(user_id=user_id, total=total, items=[raw_out(r) for r in rows])
            if kind is not None and kind not in ITEM_KINDS:
                raise Invalid(f"unknown kind {kind!r}; use one of raw, {', '.join(ITEM_KINDS)}")
            query = select(Item).where(Item.user_id == user_id)
            if kind:
                query = query.where(Item.kind == kind)
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

    def users(self) -> list[UserOut]:
        with self.db.session() as session:
            raw_counts = dict(session.execute(select(RawInput.user_id, func.count()).group_by(RawInput.user_id)).all())
            item_counts = dict(session.execute(select(Item.user_id, func.count()).group_by(Item.user_id)).all())
            users = list(session.scalars(select(User).order_by(User.id)))
        return [UserOut(id=u.id, created_at=u.created_at, last_seen_at=u.last_seen_at,
                        raw_inputs=raw_counts.get(u.id, 0), items=item_counts.get(u.id, 0)) for u in users]

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

    def close(self) -> None:
        self.maintenance.stop()
        self.index.close()
        self.db.close()


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
