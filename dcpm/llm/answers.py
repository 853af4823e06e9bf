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


def decoding_schema(schema: dict) -> dict:
    """The answer's JSON schema as handed to a server's constrained decoding, without `maxLength`:
    llama.cpp turns each bound into one nested grammar rule per character, and its server dies on
    a text bound of 2000. The answer model still enforces every bound when the answer arrives."""
    if isinstance(schema, dict):
        return {key: decoding_schema(value) for key, value in schema.items() if key != "maxLength"}
    if isinstance(schema, list):
        return [decoding_schema(value) for value in schema]
    return schema
