"""Wire shapes of changes by id: text edits and hard deletes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class UpdateMemoryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field ("filter") is refused, not ignored

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
