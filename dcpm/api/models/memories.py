"""Wire shapes of the two calls an assistant makes: add_memory (and bulk import) and search."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from dcpm.api.models.filters import METADATA_FILTER_HELP, MetadataFilter
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
    model_config = ConfigDict(extra="forbid")  # a misspelt field ("filter") is refused, not ignored

    user_id: UserId
    messages: list[Message] | None = Field(None, description="Turns to remember, oldest first.")
    text: str | None = Field(None, description="Shorthand for one user message.")
    session_id: str | None = Field(None, max_length=128)
    timestamp: datetime | None = Field(None, description="When the turns were said (default: now).")
    metadata: dict[str, Any] = Field(default_factory=dict)
    infer: bool = Field(True, description="Extract facts with the LLM; false stores the turns verbatim only.")
    wait: bool = Field(True, description="Wait for extraction (at most two LLM calls); false answers at once "
                                         "with 202 and extraction runs in the background.")
    _own_metadata: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def own_metadata(self) -> dict[str, str]:
        """Metadata dcpm records itself (dcpm.stored_values.OWN_PREFIX): set by the server with
        `recording`, never read from a body, so no client can write it."""
        return self._own_metadata

    def recording(self, own: dict[str, str]) -> AddMemoryRequest:
        self._own_metadata = dict(own)
        return self

    @model_validator(mode="after")
    def _one_source(self) -> AddMemoryRequest:
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
    model_config = ConfigDict(extra="forbid")  # a misspelt field ("filter") is refused, not ignored

    user_id: UserId
    query: str
    limit: int = Field(10, ge=1)
    kinds: list[ItemKind] = Field(default_factory=lambda: list(SEARCH_KINDS))
    as_of: datetime | None = Field(None, description="Answer with what was believed at this moment.")
    session_id: str | None = None
    context_tokens: int | None = Field(None, ge=0, description="Token budget of the rendered context block.")
    associative: bool = Field(True, description="Use the associative query adapter when one is loaded "
                                                "(false: the frozen embedder's query vector).")
    filters: MetadataFilter | None = Field(None, description=METADATA_FILTER_HELP)
    threshold: float | None = Field(None, ge=0, le=1, validation_alias=AliasChoices("threshold", "min_score"),
                                    description="Only memories scoring at least this (also `min_score`). "
                                                "Unset: every hit up to `limit`, and only those scoring at least "
                                                "the server's search_threshold go into the context block.")

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


class Provenance(BaseModel):
    """The raw turn an item was extracted from: the two are one memory, shown as one hit."""

    id: str
    text: str
    timestamp: datetime
    speaker: str | None = None
    role: str | None = None
    session_id: str | None = None
    score: float | None = Field(None, description="The turn's own score, when it was a candidate too.")


class SearchHit(BaseModel):
    id: str
    kind: str
    text: str
    score: float = Field(description="Relevance in [0, 1], comparable across queries: dense_weight * "
                                     "dense_relevance + lexical_weight * lexical_relevance.")
    dense_score: float = Field(description="Cosine of the query and memory vectors.")
    sparse_score: float = Field(description="BM25 score (0: no lexical match).")
    dense_relevance: float = Field(0.0, description="dense_score calibrated to [0, 1].")
    lexical_relevance: float = Field(0.0, description="sparse_score saturated to [0, 1), (s/k)^p / (1 + (s/k)^p), "
                                                      "counted as far as dense_score says the memory is related.")
    timestamp: datetime
    created_at: datetime
    session_id: str | None = None
    role: str | None = None
    speaker: str | None = None
    topic: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    chain: list[ChainLink] | None = None
    current: ChainLink | None = Field(None, description="For a hit on an old revision: what is believed now.")
    source: Provenance | None = Field(None, description="For an item: the turn it was extracted from. When "
                                                        "the turn scored higher, the hit's scores are the turn's.")


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
    threshold: float = Field(0.0, description="The score a hit needed to enter the context block (the request's "
                                              "threshold, which also dropped weaker hits, or search_threshold).")
    dense_weight: float = Field(1.0, description="score = dense_weight * dense_relevance + "
                                                 "(1 - dense_weight) * lexical_relevance.")


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

    model_config = ConfigDict(extra="forbid")  # a misspelt field ("filter") is refused, not ignored

    user_id: UserId
    turns: list[ImportTurn]


class ImportBatchResult(BaseModel):
    imported: int
