"""Wire shapes of the two calls an assistant makes: add_memory (and bulk import) and search."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from dcpm.domain import SEARCH_KINDS, ItemKind, Op, UserId


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
    op: Op
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
    kinds: list[ItemKind] = Field(default_factory=lambda: list(SEARCH_KINDS))
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
