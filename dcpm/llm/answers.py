"""Field types for LLM answers bounded to the columns they go into: whatever a model (or a
prompt injection in the user's own turn) writes, the writer receives values it can store."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

LABEL_CHARS = 64  # items.type and items.topic are String(64); an event time or a handle is shorter


def _without_nul(value: Any) -> Any:
    return value.replace("\x00", "") if isinstance(value, str) else value


def _label(value: Any) -> Any:
    value = _without_nul(value)
    return value.strip()[:LABEL_CHARS] if isinstance(value, str) else value


# Free text: PostgreSQL refuses NUL characters in text columns, so they are dropped.
Text = Annotated[str, BeforeValidator(_without_nul)]
# A short label: clamped (not refused) so an over-long topic costs no retry; the schema tells the model the limit.
Label = Annotated[str, BeforeValidator(_label), Field(max_length=LABEL_CHARS)]
