"""Export and restore one user: every row of every kind, as JSONL behind a manifest.

The file's first line is the manifest (format version, schema revision, counts, a checksum of
the records); each further line is one row: `{"type": ..., "row": {...}}`. Ids are kept, so
a restored user answers searches exactly as before; vectors are not exported but rebuilt from
the rows on restore (they are derived data).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select

from dcpm import __version__
from dcpm.errors import Conflict, Invalid, NotFound
from dcpm.store.db import Database, current_revision
from dcpm.store.models import (
    ClusterDone,
    Consent,
    ConsolidationRun,
    Edge,
    Event,
    Evidence,
    Item,
    ItemRevision,
    Node,
    RawInput,
    User,
    UTCDateTime,
)

FORMAT = "dcpm-export/1"
# Restore order respects foreign keys; items' own chain pointers are set in a second pass.
TABLES = [("user", User), ("raw_input", RawInput), ("item", Item), ("item_revision", ItemRevision),
          ("event", Event), ("node", Node), ("evidence", Evidence), ("edge", Edge), ("consent", Consent),
          ("consolidation_run", ConsolidationRun), ("cluster_done", ClusterDone)]
CHAIN_POINTERS = ("supersedes_id", "superseded_by_id")


def _rows_of(session, model, user_id: str) -> list:  # type: ignore[no-untyped-def]
    if model is User:
        return [session.get(User, user_id)]
    if model is ItemRevision:
        return list(session.scalars(select(ItemRevision).join(Item, Item.id == ItemRevision.item_id)
                                    .where(Item.user_id == user_id).order_by(ItemRevision.id)))
    if model is Evidence:
        return list(session.scalars(select(Evidence).join(Node, Node.id == Evidence.node_id)
                                    .where(Node.user_id == user_id)))
    key = getattr(model, "id", None) or getattr(model, "key", None)
    return list(session.scalars(select(model).where(model.user_id == user_id).order_by(key)))


def _to_json(row) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    out = {}
    for attr in sa_inspect(type(row)).column_attrs:
        value = getattr(row, attr.key)
        out[attr.key] = value.isoformat() if isinstance(value, datetime) else value
    return out


def _from_json(model, data: dict[str, Any]):  # type: ignore[no-untyped-def]
    values = {}
    for attr in sa_inspect(model).column_attrs:
        if attr.key not in data:
            continue
        value = data[attr.key]
        if value is not None and isinstance(attr.columns[0].type, UTCDateTime):
            value = datetime.fromisoformat(value)
        values[attr.key] = value
    return model(**values)


def export_user(db: Database, user_id: str, path: Path) -> dict[str, Any]:
    """Write the user's export to `path`; returns the manifest."""
    lines: list[str] = []
    counts: dict[str, int] = {}
    with db.session() as session:
        if session.get(User, user_id) is None:
            raise NotFound(f"unknown user {user_id!r}")
        for name, model in TABLES:
            rows = [r for r in _rows_of(session, model, user_id) if r is not None]
            counts[name] = len(rows)
            lines.extend(json.dumps({"type": name, "row": _to_json(r)}, sort_keys=True) for r in rows)
    manifest = {"format": FORMAT, "dcpm_version": __version__, "schema_revision": current_revision(db.engine),
                "user_id": user_id, "exported_at": datetime.now().astimezone().isoformat(), "counts": counts,
                "sha256": hashlib.sha256("\n".join(lines).encode()).hexdigest()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text("\n".join([json.dumps({"manifest": manifest})] + lines) + "\n", encoding="utf-8")
    tmp.replace(path)
    return manifest


def read_export(path: Path) -> tuple[dict[str, Any], Iterator[tuple[str, dict]]]:
    if not path.is_file():
        raise Invalid(f"no such export file: {path}")
    text = path.read_text(encoding="utf-8").splitlines()
    try:
        manifest = json.loads(text[0])["manifest"]
    except (IndexError, ValueError, KeyError, TypeError):
        raise Invalid(f"{path} is not a dcpm export (no manifest on its first line)") from None
    if manifest.get("format") != FORMAT:
        raise Invalid(f"{path} has export format {manifest.get('format')!r}; this dcpm reads {FORMAT}")
    body = text[1:]
    if hashlib.sha256("\n".join(body).encode()).hexdigest() != manifest.get("sha256"):
        raise Invalid(f"{path} is damaged: its records do not match the manifest's checksum")
    return manifest, ((record["type"], record["row"]) for record in map(json.loads, body))


def restore_user(db: Database, path: Path) -> dict[str, Any]:
    """Load an export into this store (in one transaction). The user must not exist here yet."""
    manifest, records = read_export(path)
    models = dict(TABLES)
    pointers: list[tuple[str, dict]] = []
    with db.session() as session:
        if session.get(User, manifest["user_id"]) is not None:
            raise Conflict(f"user {manifest['user_id']!r} already exists in this store; delete it first")
        previous = None
        for name, data in records:
            if name not in models:
                raise Invalid(f"unknown record type {name!r} in {path}")
            if name != previous:
                session.flush()  # rows arrive table by table, parents first
                previous = name
            if name == "item":
                pointers.append((data["id"], {k: data.get(k) for k in CHAIN_POINTERS}))
                data = {**data, **{k: None for k in CHAIN_POINTERS}, "indexed_at": None}
            elif name in ("raw_input", "node"):
                data = {**data, "indexed_at": None}  # vectors are rebuilt here
            session.add(_from_json(models[name], data))
        session.flush()
        for item_id, links in pointers:
            item = session.get(Item, item_id)
            item.supersedes_id, item.superseded_by_id = links["supersedes_id"], links["superseded_by_id"]
    return manifest
