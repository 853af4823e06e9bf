"""Export and restore one user: every row of every kind, as JSONL behind a manifest.

The file's first line is the manifest (format version, schema revision, counts, a checksum of
the records); each further line is one row: `{"type": ..., "row": {...}}`. An export is read
in one transaction, so it is one consistent snapshot even while the daemon writes. Memory,
node and chain ids are kept, so a restored user answers searches exactly as before; the
store's own counters (event, revision and edge numbers) are not, so a restore fits into a
store in use. Vectors are not exported but rebuilt from the rows on restore (derived data).

The checksum only detects damage: anyone can edit their export. So a restore loads nothing
but the manifest user's own rows, refuses rows that point at another user's chain, request or
rows or that reuse another user's memory id, refuses values no add could store
(dcpm.admin.restore_values), and reports any row it cannot load as Invalid.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from sqlalchemy import Integer, select
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from dcpm import __version__
from dcpm.admin.restore_values import check_values
from dcpm.domain import check_user_id
from dcpm.errors import Conflict, DcpmError, Invalid, NotFound
from dcpm.store.datadir import replace_privately
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
MEMORY_TABLES = {"raw_input": RawInput, "item": Item, "node": Node}  # one id space (dcpm.inspection)
ID_BATCH = 500  # ids per IN (...) query


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
    """A row to insert; a counter primary key (events, revisions, edges) is left to this store."""
    values = {}
    for attr in sa_inspect(model).column_attrs:
        column = attr.columns[0]
        if attr.key not in data or (column.primary_key and isinstance(column.type, Integer)):
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
    with db.snapshot() as session:
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
    replace_privately(path, ("\n".join([json.dumps({"manifest": manifest})] + lines) + "\n").encode("utf-8"))
    return manifest


def read_export(path: Path) -> tuple[dict[str, Any], Iterator[tuple[str, dict]]]:
    if not path.is_file():
        raise Invalid(f"no such export file: {path}")
    try:
        text = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise Invalid(f"{path} is not a dcpm export (not UTF-8 text)") from None
    try:
        manifest = json.loads(text[0])["manifest"]
    except (IndexError, ValueError, KeyError, TypeError, RecursionError):  # RecursionError: [[[[... past the stack
        manifest = None
    if not isinstance(manifest, dict):
        raise Invalid(f"{path} is not a dcpm export (no manifest on its first line)")
    if manifest.get("format") != FORMAT:
        raise Invalid(f"{path} has export format {manifest.get('format')!r}; this dcpm reads {FORMAT}")
    body = text[1:]
    if hashlib.sha256("\n".join(body).encode()).hexdigest() != manifest.get("sha256"):
        raise Invalid(f"{path} is damaged: its records do not match the manifest's checksum")
    return manifest, ((record["type"], record["row"]) for record in map(json.loads, body))


def read_rows(path: Path) -> tuple[dict[str, Any], list[tuple[str, dict]]]:
    """The manifest and every (type, row) of an export, refused in words that name `path` (the CLI
    reads the file so before it sends it to a daemon, which knows it only as "the export")."""
    manifest, records = read_export(path)
    try:
        return manifest, [(str(name), dict(data)) for name, data in records]
    except (ValueError, TypeError, KeyError, RecursionError):
        raise Invalid(f"{path} has a record that is not a {{type, row}} object") from None


def restore_user(db: Database, path: Path) -> dict[str, Any]:
    """Load an export into this store (in one transaction). The user must not exist here yet."""
    manifest, rows = read_rows(path)
    user_id = str(manifest.get("user_id"))
    check_user_id(user_id)
    check_rows(user_id, rows)
    try:
        with db.session() as session:
            if session.get(User, user_id) is not None:
                raise Conflict(f"user {user_id!r} already exists in this store; delete it first")
            _refuse_shared_keys(session, user_id, rows)
            _load(session, rows)
    except (DcpmError, SQLAlchemyError, ValueError, TypeError, KeyError, AttributeError) as exc:
        if not isinstance(exc, Conflict) and _user_exists(db, user_id):  # a restore of the user won the race
            raise Conflict(f"user {user_id!r} was restored by another request at the same moment; "
                           "nothing of this one was loaded") from None
        if isinstance(exc, DcpmError):
            raise
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0][:200]
        raise Invalid(f"{path} could not be restored, nothing was loaded: {reason}") from None
    return manifest


def _user_exists(db: Database, user_id: str) -> bool:
    with db.session() as session:
        return session.get(User, user_id) is not None


def check_rows(user_id: str, rows: list[tuple[str, dict]]) -> None:
    """Every row is the user's own and points only at rows of the same export (pure)."""
    models = dict(TABLES)
    ids: dict[str, set] = {name: set() for name in models}
    for name, row in rows:
        if name not in models:
            raise Invalid(f"unknown record type {name!r} in the export")
        check_values(name, models[name], row)  # what an add could store, and ids dcpm's own
        owner = row.get("id") if name == "user" else row.get("user_id", user_id)
        if owner != user_id:
            raise Invalid(f"the export for {user_id!r} holds a {name} row of {owner!r}; a restore loads one "
                          "user's own rows only")
        ids[name].add(row.get("id"))
    wanted = {"item": {"supersedes_id": "item", "superseded_by_id": "item", "source_raw_id": "raw_input"},
              "item_revision": {"item_id": "item"}, "evidence": {"node_id": "node", "item_id": "item"},
              "edge": {"source_id": "node", "target_id": "node"}}
    for name, row in rows:
        for key, target in wanted.get(name, {}).items():
            if row.get(key) is not None and row[key] not in ids[target]:
                raise Invalid(f"a {name} row of the export points at {target} {row[key]}, which the export "
                              "does not hold")


def _refuse_shared_keys(session: Session, user_id: str, rows: list[tuple[str, dict]]) -> None:
    """Chains and requests are joined by key without a user check (chain walks, deletes): the
    restored user may not bring a chain_id or request_id this store already uses for another user
    (the user's own tombstones from an earlier delete do not count)."""
    chains = {row.get("chain_id") for name, row in rows if name == "item"}
    requests = {row.get("request_id") for name, row in rows if name in ("raw_input", "event")} - {None}
    if session.scalar(select(Item.id).where(Item.chain_id.in_(chains)).limit(1)) is not None:
        raise Invalid("the export continues a chain of another user of this store; nothing was loaded")
    used = (session.scalar(select(RawInput.id).where(RawInput.request_id.in_(requests)).limit(1))
            or session.scalar(select(Event.id).where(Event.request_id.in_(requests), Event.user_id != user_id)
                              .limit(1)))
    if used is not None:
        raise Invalid("the export reuses a request id of another user of this store; nothing was loaded")
    _refuse_taken_memory_ids(session, rows)


def _refuse_taken_memory_ids(session: Session, rows: list[tuple[str, dict]]) -> None:
    """Raw turns, items and nodes share one id space (a memory id names one of them, and its
    vector point): an id that names another user's memory in any of the three tables, or two
    kinds of the export at once, would take over that memory's vector and make it unreadable."""
    ids = [row.get("id") for name, row in rows if name in MEMORY_TABLES]
    if len(set(ids)) != len(ids):
        raise Invalid("the export gives two of its memories one id; nothing was loaded")
    for start in range(0, len(ids), ID_BATCH):
        batch = ids[start:start + ID_BATCH]
        for model in MEMORY_TABLES.values():
            if session.scalar(select(model.id).where(model.id.in_(batch)).limit(1)) is not None:
                raise Invalid("the export holds a memory id that names another user's memory in this store; "
                              "nothing was loaded")


def _load(session: Session, rows: list[tuple[str, dict]]) -> None:
    models = dict(TABLES)
    raws = {row.get("id") for name, row in rows if name == "raw_input"}
    pointers: list[tuple[str, dict]] = []
    previous = None
    for name, data in rows:
        if name != previous:
            session.flush()  # rows arrive table by table, parents first
            previous = name
        if name == "item":
            pointers.append((data["id"], {k: data.get(k) for k in CHAIN_POINTERS}))
            data = {**data, **{k: None for k in CHAIN_POINTERS}, "indexed_at": None}
        elif name in ("raw_input", "node"):
            data = {**data, "indexed_at": None}  # vectors are rebuilt here
        elif name == "item_revision" and data.get("raw_id") not in raws:
            data = {**data, "raw_id": None}  # the turn behind an edit was deleted before the export
        session.add(_from_json(models[name], data))
    session.flush()
    for item_id, links in pointers:
        item = session.get(Item, item_id)
        item.supersedes_id, item.superseded_by_id = links["supersedes_id"], links["superseded_by_id"]
