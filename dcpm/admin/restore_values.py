"""What one row of an export may hold, checked before a restore writes anything.

An export is a file anyone can edit and re-checksum (dcpm.admin.export), and a restore writes its
rows as they are: SQLite keeps whatever a column is given. A value no add could store used to
load and break what came after it: metadata that is a list, NaN or nested hundreds of levels
(a 500 on every listing of the user, a user no delete could remove), a revision that is a word,
a memory id that is no UUID (every later restore, and start-up repair, failed on its vector
point). So every value must be what its column holds, under the rules an add keeps
(dcpm.stored_values), and the enumerations and ids be dcpm's own; else the restore is Invalid
and loads nothing.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Float, Integer, String
from sqlalchemy import inspect as sa_inspect

from dcpm.domain import (
    ANTICIPATION_CHARS,
    INT64_RANGE,
    ITEM_KINDS,
    MAX_ANTICIPATIONS,
    MEMORY_ID_VERSIONS,
    EventAction,
    NodeKind,
    NodeStatus,
    RawStatus,
    as_utc,
    canonical_uuid,
)
from dcpm.errors import Invalid
from dcpm.store.items import anticipation_lines
from dcpm.store.models import Document, UTCDateTime
from dcpm.stored_values import check_metadata, check_text

MEMORY_IDS = ("raw_input", "item", "node")  # a vector point each: ids in the one canonical UUID spelling
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("raw_input", "status"): tuple(RawStatus),
    ("item", "kind"): tuple(ITEM_KINDS),
    ("node", "kind"): tuple(NodeKind),
    ("node", "status"): tuple(NodeStatus),
    ("event", "action"): tuple(EventAction),
}


def check_values(name: str, model: Any, row: dict[str, Any]) -> None:
    """Invalid, naming the row and the column, unless every value of `row` (a `name` record)
    fits its column of `model` and dcpm's own rules for it."""
    for attr in sa_inspect(model).column_attrs:
        column = attr.columns[0]
        if attr.key not in row or (column.primary_key and isinstance(column.type, Integer)):
            continue  # absent: the column's default; a counter: this store's own (dcpm.admin.export)
        value, where = row[attr.key], f"the {name} row's {attr.key}"
        if value is None:
            if not column.nullable and column.default is None:
                raise Invalid(f"{where} is missing")
            continue
        _check_value(column.type, value, where)
        allowed = CHOICES.get((name, attr.key))
        if allowed is not None and value not in allowed:
            raise Invalid(f"{where} is {value!r}; dcpm writes one of {', '.join(allowed)}")
    if name == "item" and isinstance(row.get("anticipations"), str):
        _check_anticipations(row["anticipations"])
    if name in MEMORY_IDS and "id" in row:
        memory_id = row["id"]
        # the index keeps the other versions' ids for companion points (dcpm.index.anticipation)
        if canonical_uuid(memory_id) != memory_id or uuid.UUID(memory_id).version not in MEMORY_ID_VERSIONS:
            raise Invalid(f"the {name} row's id {memory_id!r} is not a memory id (a UUID of version 4 or 5, "
                          "in lower case)")


def _check_value(kind: Any, value: Any, where: str) -> None:
    if isinstance(kind, UTCDateTime):
        try:
            as_utc(datetime.fromisoformat(value))
        except (TypeError, ValueError, OverflowError):  # as_utc's InvalidMoment is a ValueError too
            raise Invalid(f"{where} is {value!r}, not an ISO-8601 time within years 1-9999") from None
    elif isinstance(kind, Document):
        if not isinstance(value, dict):
            raise Invalid(f"{where} must be a JSON object")
        check_metadata(value, where)
    elif isinstance(kind, Boolean):
        if not isinstance(value, bool):
            raise Invalid(f"{where} must be true or false")
    elif isinstance(kind, Integer):
        if isinstance(value, bool) or not isinstance(value, int) or not INT64_RANGE[0] <= value <= INT64_RANGE[1]:
            raise Invalid(f"{where} must be an integer of 64 bits")
    elif isinstance(kind, Float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise Invalid(f"{where} must be a finite number")
    elif isinstance(kind, String):  # Text too
        if not isinstance(value, str):
            raise Invalid(f"{where} must be text")
        check_text(value, where)
        if kind.length is not None and len(value) > kind.length:
            raise Invalid(f"{where} is {len(value)} characters; the column holds {kind.length}")


def _check_anticipations(lines: str) -> None:
    """An item's anticipations as extraction stores them (dcpm.store.items.anticipation_lines)."""
    if anticipation_lines(lines.split("\n")) != lines:
        raise Invalid(f"the item row's anticipations must be at most {MAX_ANTICIPATIONS} distinct lines of at most "
                      f"{ANTICIPATION_CHARS} characters, none empty")
