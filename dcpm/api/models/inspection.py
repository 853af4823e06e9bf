"""Wire shapes of what is stored: raw turns, items with chains and revisions, users, history."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from dcpm.api.models.memories import ChainLink


class RawOut(BaseModel):
    id: str
    kind: Literal["raw"] = "raw"
    user_id: str
    text: str
    role: str
    speaker: str | None
    session_id: str | None
    timestamp: datetime
    created_at: datetime
    status: str
    error: str | None = None
    metadata: dict[str, Any]


class RevisionOut(BaseModel):
    revision: int
    text: str
    op: str
    raw_id: str | None
    created_at: datetime


class ItemOut(BaseModel):
    id: str
    kind: str
    user_id: str
    text: str
    type: str | None
    topic: str | None
    salience: float
    event_time: datetime | None
    valid_from: datetime
    valid_to: datetime | None
    current: bool
    chain_id: str
    supersedes: str | None
    superseded_by: str | None
    revision: int
    source_raw_id: str | None
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any]
    # situations extraction expects this to come back in; searched beside the text (Settings.anticipations)
    anticipations: list[str] = []
    chain: list[ChainLink] | None = None
    revisions: list[RevisionOut] | None = None


class ListResponse(BaseModel):
    user_id: str
    total: int
    items: list[ItemOut | RawOut]


class UserOut(BaseModel):
    id: str
    created_at: datetime
    last_seen_at: datetime
    raw_inputs: int
    items: int
    memories: int | None = Field(None, description="What a listing of the user with no filter counts: every "
                                 "item, and the turns not (or not yet) extracted into any (None from a daemon "
                                 "older than this field).")


class HistoryEvent(BaseModel):
    at: datetime
    action: str
    item_id: str
    request_id: str | None
    detail: dict[str, Any]


class HistoryResponse(BaseModel):
    item_id: str
    chain_id: str
    events: list[HistoryEvent]
