"""What a stored value may hold, checked before anything is written.

A turn's text and metadata travel on after their row: into the vector index's payload (for
metadata filters), a JSON column, and every answer that shows the memory. Each has limits a JSON
body does not: Qdrant's payload takes finite numbers and 64-bit integers only, answers stop
serialising past some depth, SQLite and PostgreSQL take only valid Unicode, and PostgreSQL no NUL
character. A value past one of them used to be stored and then break what came after it (a 500
on every listing of the user, a vector log no start could read), so it is refused with its
request instead."""

from __future__ import annotations

import math
from typing import Any

from dcpm.domain import INT64_RANGE
from dcpm.errors import Invalid

MAX_METADATA_DEPTH = 32  # levels of nesting; Mem0 and dcpm's own metadata are flat or nearly
# Metadata keys dcpm writes itself, beside the caller's (the agent or app a Mem0 request names
# beside its user, dcpm.server.mem0.filters): a caller's metadata may not use them, so a memory's
# agent or app is always one dcpm recorded, never one a client made up.
OWN_PREFIX = "dcpm_"


def check_text(value: str, what: str) -> None:
    if "\x00" in value:
        raise Invalid(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Invalid(f"{what} is not valid Unicode text: it holds a lone surrogate (such as \\ud800)") from None


def check_metadata(metadata: Any, what: str) -> None:
    """Nesting, numbers, keys and strings of one metadata object, walked without recursion (a
    deep object must not exhaust the stack of the check meant to refuse it)."""
    pending = [(metadata, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, (dict, list)) and depth > MAX_METADATA_DEPTH:
            raise Invalid(f"{what} is nested deeper than {MAX_METADATA_DEPTH} levels")
        if isinstance(value, dict):
            for key, child in value.items():
                check_text(str(key), f"a key of {what}")
                pending.append((child, depth + 1))
        elif isinstance(value, list):
            pending.extend((child, depth + 1) for child in value)
        elif isinstance(value, str):
            check_text(value, f"a value of {what}")
        elif isinstance(value, float) and not math.isfinite(value):
            raise Invalid(f"{what} holds {value}: numbers must be finite")
        elif isinstance(value, int) and not isinstance(value, bool) and not INT64_RANGE[0] <= value <= INT64_RANGE[1]:
            raise Invalid(f"{what} holds the integer {value}, which does not fit in 64 bits")


def check_callers_keys(metadata: dict[str, Any], what: str) -> None:
    """A caller's metadata keeps out of the keys dcpm records itself (OWN_PREFIX)."""
    for key in metadata:
        if str(key).startswith(OWN_PREFIX):
            raise Invalid(f"{what} uses the key {key!r}; keys beginning {OWN_PREFIX!r} are dcpm's own")
