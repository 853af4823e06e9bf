"""API shapes shared by the HTTP server, the Python client and the CLI's --json output."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, field_validator, model_validator

USER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}$")
ITEM_KINDS = ("fact", "identity", "summary")
SEARCH_KINDS = ("raw", *ITEM_KINDS)
Kind = Literal["raw", "fact", "identity", "summary"]


def check_user_id(value: str) -> str:
    if not USER_ID.match(value or ""):
        raise ValueError("user_id must be 1-128 characters of letters, digits and _ . : @ -, "
                         "starting with a letter or digit")
    return value


UserId = Annotated[str, AfterValidator(check_user_id)]


class Message(BaseModel):
    role: str = Field("user", max_length=32)
    content: str
    name: str | None = Field(None, max_length=128, description="Speaker name, e.g. 'Caroline'.")
    timestamp: datetime | None = None

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("message content is empty")
        return value


class AddMemoryRequest(BaseModel):
    user_id: UserId
    messages: list[Message] | None = Field(None, description="Turns to remember, oldest first.")
    text: str | None = Field(None, description="Shorthand for one user message.")
    session_id: str | None = Field(None, max_length=128)
    timestamp: datetime | None = Field(None, description="When the turns were said (default: now).")
    metadata: dict[str, Any] = Field(default_factory=dict)
    infer: bool = Field(True, description="Extract facts with the LLM; false stores the turns verbatim only.")
    wait: bool = Field(True, description="Wait for extraction (at most two LLM calls); false answers at once "
                                         "with 202 and extraction runs in the background.")

    @model_validator(mode="after")
    def _one_source(self) -> "AddMemoryRequest":
        if self.messages is None and self.text is None:
            raise ValueError("give `messages` or `text`")
        if self.messages is not None and self.text is not None:
            raise ValueError("give either `messages` or `text`, not both")
        if self.text is not None and not self.text.strip():
            raise ValueError("text is empty")
        if self.messages is not None and not self.messages:
            raise ValueError("messages is empty")
        return self

    def turns(self) -> list[Message]:
        return self.messages if self.messages is not None else [Message(content=self.text or "")]


class Operation(BaseModel):
    op: Literal["ADD", "UPDATE", "SUPERSEDE", "NONE", "RAW"]
    id: str
    text: str
    kind: str
    target: str | None = None
    chain_id: str | None = None


class AddMemoryResponse(BaseModel):
    request_id: str
    user_id: str
    raw_ids: list[str]
    status: Literal["stored", "pending", "done", "failed"]
    operations: list[Operation] = Field(default_factory=list)
    message: str = ""
    llm_calls: int = 0
    tokens: int = 0
    error: str | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict, description="total, llm and non_llm time.")


class SearchRequest(BaseModel):
    user_id: UserId
    query: str
    limit: int = Field(10, ge=1)
    kinds: list[Kind] = Field(default_factory=lambda: list(SEARCH_KINDS))
    as_of: datetime | None = Field(None, description="Answer with what was believed at this moment.")
    session_id: str | None = None
    context_tokens: int | None = Field(None, ge=0, description="Token budget of the rendered context block.")
    associative: bool = Field(True, description="Use the associative query adapter when one is loaded "
                                                "(false: the frozen embedder's query vector).")

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is empty")
        return value


class ChainLink(BaseModel):
    id: str
    text: str
    revision: int
    valid_from: datetime
    valid_to: datetime | None
    current: bool = Field(description="The belief that holds now (or at as_of).")


class SearchHit(BaseModel):
    id: str
    kind: str
    text: str
    score: float
    dense_score: float
    sparse_score: float
    timestamp: datetime
    created_at: datetime
    session_id: str | None = None
    role: str | None = None
    speaker: str | None = None
    topic: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    chain: list[ChainLink] | None = None
    current: ChainLink | None = Field(None, description="For a hit on an old revision: what is believed now.")


class NodeHit(BaseModel):
    """A schema, intention or core schema surfaced because its evidence contains a hit."""

    id: str
    kind: str
    domain: str | None
    text: str
    evidence_count: int
    matched_evidence: list[str]
    reason: str


class SearchResponse(BaseModel):
    user_id: str
    query: str
    hits: list[SearchHit]
    nodes: list[NodeHit] = Field(default_factory=list, description="Graph nodes whose evidence contains a hit.")
    context: str
    encoder: str
    took_ms: float


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




class ImportTurn(BaseModel):
    id: str = Field(max_length=64, description="A UUID; `dcpm import` derives it from the line's content.")
    text: str
    role: str = Field("user", max_length=32)
    speaker: str | None = Field(None, max_length=128)
    session_id: str | None = Field(None, max_length=128)
    timestamp: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ImportBatch(BaseModel):
    """A batch of already-validated turns with deterministic ids (what `dcpm import` sends)."""

    user_id: UserId
    turns: list[ImportTurn]


class ImportBatchResult(BaseModel):
    imported: int


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


class ConsolidateRequest(BaseModel):
    user_id: UserId | None = Field(None, description="One user; omit with all=true for every user.")
    all: bool = False
    dry_run: bool = Field(False, description="Phase 1 only: report clusters, call no LLM, write nothing.")

    @model_validator(mode="after")
    def _one_target(self) -> "ConsolidateRequest":
        if (self.user_id is None) == (not self.all):
            raise ValueError("give user_id or all=true (not both)")
        return self


class RunOut(BaseModel):
    id: str
    user_id: str
    status: str
    phase: str
    dry_run: bool
    started_at: datetime
    finished_at: datetime | None
    counts: dict[str, Any]
    llm_calls: dict[str, Any]
    tokens: int
    errors: list[str]


class JobOut(BaseModel):
    job_id: str
    running: bool
    users: list[str]
    runs: list[RunOut]


class ConsentOut(BaseModel):
    user_id: str
    schemas: bool
    intentions: bool
    core_schemas: bool


class ConsentUpdate(BaseModel):
    schemas: bool | None = None
    intentions: bool | None = None
    core_schemas: bool | None = None


class GraphNodeOut(BaseModel):
    id: str
    kind: str
    domain: str | None
    text: str
    status: str
    evidence: list[str]


class GraphEdgeOut(BaseModel):
    source: str
    target: str
    type: str


class EvidenceOut(BaseModel):
    id: str
    kind: str
    text: str
    current: bool


class NodeOut(BaseModel):
    """A graph node with the items supporting it and its edges (`dcpm show NODE_ID`)."""

    id: str
    kind: str
    user_id: str
    domain: str | None
    text: str
    status: str
    behavior: str | None
    created_at: datetime
    evidence: list[EvidenceOut]
    edges: list[GraphEdgeOut]


class GraphOut(BaseModel):
    user_id: str
    nodes: list[GraphNodeOut]
    edges: list[GraphEdgeOut]


# --- deletes and edits by id (issue 7: MCP and Mem0 compatibility) --------------------------
class UpdateMemoryRequest(BaseModel):
    text: str = Field(description="The item's new text; the previous text is kept as a revision.")


class DeleteResponse(BaseModel):
    user_id: str
    deleted: list[str] = Field(description="Ids of the memories removed.")
    relinked: list[str] = Field(default_factory=list, description="Chain neighbours now linked to each other.")
    nodes_deleted: list[str] = Field(default_factory=list, description="Graph nodes left without evidence.")
    nodes_reinduce: list[str] = Field(default_factory=list,
                                      description="Nodes that lost part of their evidence, marked for re-induction.")
    raw_deleted: list[str] = Field(default_factory=list, description="Turns the deleted items were extracted from.")
    raw_kept: list[str] = Field(default_factory=list,
                                description="Such turns kept because another kept item was extracted from them.")


class DeleteUserResponse(BaseModel):
    user_id: str
    raw_inputs: int
    items: int
    nodes: int
    events_redacted: int
# --- end issue 7 ------------------------------------------------------------------------------


# --- access control (dcpm.auth) ----------------------------------------------------------------
class CreateKeyRequest(BaseModel):
    user_id: UserId = Field(description="The one user the key may act for.")
    label: str | None = Field(None, max_length=200, description="What the key is for, e.g. the back end's name.")


class ApiKeyOut(BaseModel):
    id: str
    prefix: str = Field(description="The key's first characters after `dcpm_`, to recognise it by.")
    user_id: str
    label: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class NewApiKey(ApiKeyOut):
    key: str = Field(description="The key itself, shown this once: only its hash is stored.")
