"""What the MCP tools answer with, as structured content: the HTTP API's answers cut to what a model
or its host acts on (texts, ids, dates, revision chains). Scores, encoder names, timings, request
ids and audit timestamps stay out, since a host may hand this to the model token for token."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field

from dcpm.api.models import (
    AddMemoryResponse,
    ChainLink,
    DeleteResponse,
    HistoryEvent,
    ItemOut,
    ListResponse,
    NodeHit,
    RawOut,
    SearchHit,
    SearchResponse,
)
from dcpm.domain import ItemKind


class Revision(BaseModel):
    id: str
    text: str
    date: dt.date = Field(description="When this revision became the belief.")
    current: bool = Field(description="The belief that holds now.")


class Memory(BaseModel):
    id: str = Field(description="Pass it to get_memory (or delete_memory).")
    kind: str = Field(description="raw (a turn as said), fact, identity or summary.")
    text: str
    date: dt.date = Field(description="When it was said, or when the belief started to hold.")
    speaker: str | None = Field(None, description="For a raw turn: who said it.")
    current: bool | None = Field(None, description="For an item: false when a later revision replaced it.")
    chain: list[Revision] | None = Field(None, description="The fact's revisions, oldest first, when it has several.")
    now: Revision | None = Field(None, description="For a hit on a replaced revision: what is believed now.")


class Pattern(BaseModel):
    id: str
    kind: str = Field(description="schema, intention or core_schema.")
    domain: str | None = None
    text: str
    evidence: int = Field(description="How many memories support it.")


class SearchResult(BaseModel):
    hits: list[Memory] = Field(description="Best match first.")
    nodes: list[Pattern] = Field(default_factory=list, description="Patterns inferred over many memories.")


class Event(BaseModel):
    at: dt.datetime
    action: str = Field(description="created, updated, superseded, ...")
    item_id: str


class MemoryDetail(BaseModel):
    memory: Memory
    history: list[Event] = Field(default_factory=list, description="Events of the item's chain, oldest first.")


class Listing(BaseModel):
    total: int = Field(description="How many memories of this kind the user has.")
    offset: int
    items: list[Memory]


class Change(BaseModel):
    op: str = Field(description="RAW (the turn kept verbatim), ADD, SUPERSEDE, UPDATE or NONE (already known).")
    id: str
    kind: str
    text: str
    replaces: str | None = Field(None, description="The memory this one revises.")


class Saved(BaseModel):
    status: Literal["stored", "pending", "done", "failed"]
    message: str = ""
    changes: list[Change]


class Deleted(BaseModel):
    deleted: list[str]
    relinked: list[str] = Field(default_factory=list, description="Chain neighbours now linked to each other.")


def revision(link: ChainLink) -> Revision:
    return Revision(id=link.id, text=link.text, date=link.valid_from.date(), current=link.current)


def revisions(chain: list[ChainLink] | None) -> list[Revision] | None:
    """A chain worth showing: one of two or more links (a lone link repeats the memory itself)."""
    return [revision(link) for link in chain] if chain and len(chain) > 1 else None


def hit_memory(hit: SearchHit) -> Memory:
    raw = hit.kind == ItemKind.RAW
    replaced = hit.current is not None and hit.current.id != hit.id
    return Memory(id=hit.id, kind=str(hit.kind), text=hit.text, date=hit.timestamp.date(),
                  speaker=(hit.speaker or hit.role) if raw else None,
                  current=None if raw else not replaced, chain=revisions(hit.chain),
                  now=revision(hit.current) if replaced and hit.current else None)


def stored_memory(found: ItemOut | RawOut) -> Memory:
    if isinstance(found, RawOut):
        return Memory(id=found.id, kind=str(found.kind), text=found.text, date=found.timestamp.date(),
                      speaker=found.speaker or found.role)
    return Memory(id=found.id, kind=str(found.kind), text=found.text, date=found.valid_from.date(),
                  current=found.current, chain=revisions(found.chain))


def pattern(node: NodeHit) -> Pattern:
    return Pattern(id=node.id, kind=node.kind, domain=node.domain, text=node.text, evidence=node.evidence_count)


def search_result(response: SearchResponse) -> SearchResult:
    return SearchResult(hits=[hit_memory(hit) for hit in response.hits], nodes=[pattern(n) for n in response.nodes])


def memory_detail(found: ItemOut | RawOut, history: list[HistoryEvent]) -> MemoryDetail:
    return MemoryDetail(memory=stored_memory(found),
                        history=[Event(at=e.at, action=e.action, item_id=e.item_id) for e in history])


def listing(response: ListResponse, offset: int) -> Listing:
    return Listing(total=response.total, offset=offset, items=[stored_memory(found) for found in response.items])


def saved(response: AddMemoryResponse) -> Saved:
    return Saved(status=response.status, message=response.error or response.message,
                 changes=[Change(op=str(o.op), id=o.id, kind=str(o.kind), text=o.text, replaces=o.target)
                          for o in response.operations])


def deleted(response: DeleteResponse) -> Deleted:
    return Deleted(deleted=response.deleted, relinked=response.relinked)
