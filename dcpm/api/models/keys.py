"""Wire shapes of access control: user-scoped API keys (dcpm.auth)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from dcpm.domain import UserId


class CreateKeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field ("filter") is refused, not ignored

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
