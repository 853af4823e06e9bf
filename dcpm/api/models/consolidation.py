"""Wire shapes of System 2: jobs and run records, consent per layer, the graph of schema nodes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dcpm.domain import UserId


class ConsolidateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field ("filter") is refused, not ignored

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
    """Layers to switch on or off; an unset one stays as it is. A field naming no layer is refused:
    dropping it would answer a misspelt withdrawal of consent as if it had been made."""

    model_config = ConfigDict(extra="forbid")

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
