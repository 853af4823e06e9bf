"""Field types for LLM answers bounded to the columns they go into: whatever a model (or a
prompt injection in the user's own turn) writes, the writer receives values it can store."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from dcpm.domain import LABEL_CHARS, label, without_nul  # an event time or a handle is shorter than a label


def _without_nul(value: Any) -> Any:
    return without_nul(value) if isinstance(value, str) else value


def _label(value: Any) -> Any:
    return label(value) if isinstance(value, str) else value


# Free text: PostgreSQL refuses NUL characters in text columns, so they are dropped.
Text = Annotated[str, BeforeValidator(_without_nul)]
# A short label: clamped (not refused) so an over-long topic costs no retry; the schema tells the model the limit.
Label = Annotated[str, BeforeValidator(_label), Field(max_length=LABEL_CHARS)]
