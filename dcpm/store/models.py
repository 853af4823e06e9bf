"""SQLAlchemy models. Schema changes go through Alembic migrations in `dcpm/store/migrations/`."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Index, Integer, String, Text, TypeDecorator
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from dcpm.domain import NodeStatus, RawStatus


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_id() -> str:
    return str(uuid.uuid4())


class UTCDateTime(TypeDecorator):
    """Stores naive UTC, returns aware UTC, so SQLite and PostgreSQL read back the same value."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return value.replace(tzinfo=timezone.utc) if value is not None else None


class Document(TypeDecorator):
    """JSON, and jsonb on PostgreSQL (migration 0007): json there has no equality, so no DISTINCT
    or = on it. Chosen per dialect when a connection first needs it, so that reading a SQLite
    store never imports the PostgreSQL dialect."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


class Base(DeclarativeBase):
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: Document()}


class User(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)


class RawInput(Base):
    """One verbatim turn of an add_memory call or an import; immutable ground truth (DCPM 2.2 i)."""

    __tablename__ = "raw_inputs"
    __table_args__ = (
        Index("ix_raw_inputs_user_time", "user_id", "timestamp"),
        Index("ix_raw_inputs_status", "status"),
        Index("ix_raw_inputs_request", "request_id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(String(128), ForeignKey("users.id"))
    request_id: Mapped[str] = mapped_column(String(36))
    position: Mapped[int] = mapped_column(Integer, default=0)
    session_id: Mapped[str | None] = mapped_column(String(128))
    role: Mapped[str] = mapped_column(String(32), default="user")
    speaker: Mapped[str | None] = mapped_column(String(128))
    text: Mapped[str] = mapped_column(Text)
    timestamp: Mapped[datetime]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    # raw: stored only (infer=false); pending: waits for extraction (a failure retries with backoff); done
    status: Mapped[str] = mapped_column(String(16), default=RawStatus.RAW)
    error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None]  # set after a failed extraction: retry with backoff
    indexed_at: Mapped[datetime | None]


class Item(Base):
    """A fact, identity item or summary; revisions form a doubly linked supersedes chain."""

    __tablename__ = "items"
    __table_args__ = (
        Index("ix_items_user_kind", "user_id", "kind"),
        Index("ix_items_chain", "chain_id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(String(128), ForeignKey("users.id"))
    kind: Mapped[str] = mapped_column(String(16))  # fact | identity | summary
    text: Mapped[str] = mapped_column(Text)
    type: Mapped[str | None] = mapped_column(String(64))
    topic: Mapped[str | None] = mapped_column(String(64))
    salience: Mapped[float] = mapped_column(Float, default=0.5)
    event_time: Mapped[datetime | None]
    valid_from: Mapped[datetime]  # when this belief started to hold (the source turn's time)
    valid_to: Mapped[datetime | None]  # when a successor replaced it; None while current
    chain_id: Mapped[str] = mapped_column(String(36))
    supersedes_id: Mapped[str | None] = mapped_column(String(36), ForeignKey("items.id"))
    superseded_by_id: Mapped[str | None] = mapped_column(String(36), ForeignKey("items.id"))
    revision: Mapped[int] = mapped_column(Integer, default=1)
    source_raw_id: Mapped[str | None] = mapped_column(String(36), ForeignKey("raw_inputs.id"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    indexed_at: Mapped[datetime | None]
    # Situations in which this should come back, one per line, written by extraction (dcpm.index.anticipation)
    anticipations: Mapped[str | None] = mapped_column(Text)

    @property
    def is_current(self) -> bool:
        return self.superseded_by_id is None

    @property
    def anticipation_list(self) -> list[str]:
        return self.anticipations.split("\n") if self.anticipations else []


class ItemRevision(Base):
    """Text an item had before an UPDATE changed it (the item's own history)."""

    __tablename__ = "item_revisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    item_id: Mapped[str] = mapped_column(String(36), ForeignKey("items.id"), index=True)
    revision: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    op: Mapped[str] = mapped_column(String(16))
    raw_id: Mapped[str | None] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Event(Base):
    """Append-only log of every change: what, when, why, which call."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_user_time", "user_id", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(128))
    at: Mapped[datetime] = mapped_column(default=utcnow)
    action: Mapped[str] = mapped_column(String(32))
    subject_kind: Mapped[str] = mapped_column(String(16))
    subject_id: Mapped[str] = mapped_column(String(36), index=True)
    request_id: Mapped[str | None] = mapped_column(String(36))
    detail: Mapped[dict[str, Any]] = mapped_column(default=dict)


class Lease(Base):
    """A named, expiring lock held in the store (per-user writer ordering, consolidation runs),
    so it holds across threads, processes and machines sharing one database."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    expires_at: Mapped[datetime]


class Node(Base):
    """A graph node induced by consolidation (DCPM 2.1): schema, intention or core schema."""

    __tablename__ = "nodes"
    __table_args__ = (Index("ix_nodes_user_kind", "user_id", "kind"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(String(128), ForeignKey("users.id"))
    kind: Mapped[str] = mapped_column(String(16))  # schema | intention | core_schema
    domain: Mapped[str | None] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    behavior: Mapped[str | None] = mapped_column(Text)  # behavioural description (phase 3), cached
    behavior_of: Mapped[str | None] = mapped_column(String(64))  # hash of the text it describes
    members_key: Mapped[str | None] = mapped_column(String(64), index=True)  # core schema: its member set
    status: Mapped[str] = mapped_column(String(24), default=NodeStatus.ACTIVE)  # active | needs_reinduction
    run_id: Mapped[str | None] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    indexed_at: Mapped[datetime | None]


class Evidence(Base):
    """The paper's evidence_vdb_ref: a node is supported by these items."""

    __tablename__ = "evidence"

    node_id: Mapped[str] = mapped_column(String(36), ForeignKey("nodes.id"), primary_key=True)
    item_id: Mapped[str] = mapped_column(String(36), ForeignKey("items.id"), primary_key=True, index=True)
    run_id: Mapped[str | None] = mapped_column(String(36))
    added_at: Mapped[datetime] = mapped_column(default=utcnow)


class Edge(Base):
    """A typed edge between two nodes of one user."""

    __tablename__ = "edges"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(128), index=True)
    source_id: Mapped[str] = mapped_column(String(36), ForeignKey("nodes.id"))
    target_id: Mapped[str] = mapped_column(String(36), ForeignKey("nodes.id"))
    type: Mapped[str] = mapped_column(String(48))
    run_id: Mapped[str | None] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ConsolidationRun(Base):
    """One consolidation run of one user: phase reached, counts, LLM use, errors."""

    __tablename__ = "consolidation_runs"
    __table_args__ = (Index("ix_runs_user_started", "user_id", "started_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(16), default="running")  # see dcpm.consolidation.runs.RunStatus
    phase: Mapped[str] = mapped_column(String(16), default="triage")
    dry_run: Mapped[bool] = mapped_column(default=False)
    holder: Mapped[str | None] = mapped_column(String(200))
    job_id: Mapped[str | None] = mapped_column(String(36), index=True)  # the job (consolidate, nightly) that ran it
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
    counts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    llm_calls: Mapped[dict[str, Any]] = mapped_column(default=dict)  # per phase
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    errors: Mapped[dict[str, Any]] = mapped_column(default=dict)  # {"messages": [...]}


class ClusterDone(Base):
    """A cluster the induction agent has handled, keyed by its member set: a resumed or repeated
    run skips it instead of inducing twice."""

    __tablename__ = "clusters_done"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(128))
    run_id: Mapped[str] = mapped_column(String(36))
    done_at: Mapped[datetime] = mapped_column(default=utcnow)


class Consent(Base):
    """Per-user opt-in of the inferred layers; core schemas are off until the user enables them."""

    __tablename__ = "consent"

    user_id: Mapped[str] = mapped_column(String(128), ForeignKey("users.id"), primary_key=True)
    schemas: Mapped[bool] = mapped_column(default=True)
    intentions: Mapped[bool] = mapped_column(default=True)
    core_schemas: Mapped[bool] = mapped_column(default=False)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiKey(Base):
    """A user-scoped API key (dcpm.auth). Only the key's SHA-256 is kept; the plaintext is shown
    once, when the key is created."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    prefix: Mapped[str] = mapped_column(String(16), unique=True)  # shown to humans: `dcpm_<prefix>_...`
    hash: Mapped[str] = mapped_column(String(64), unique=True)  # hex SHA-256 of the whole key
    user_id: Mapped[str] = mapped_column(String(128), index=True)  # the one user the key may act for
    label: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class AccessControl(Base):
    """That access control was switched on (dcpm.auth): one row, written with the first API key
    (or by migration 0006 where keys existed) and removed only by `dcpm keys reset-access`, so
    deleting users, and with them their keys, never opens the daemon again."""

    __tablename__ = "access_control"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)  # always 1: the table holds one row or none
    switched_on_at: Mapped[datetime] = mapped_column(default=utcnow)
    reason: Mapped[str] = mapped_column(String(200))  # e.g. "first API key 3f9a0c1e"; never a user id
