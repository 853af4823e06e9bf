"""Rows to vectors: the index is derived from the relational store, written after the rows.

A crash between the row commit and the vector upsert leaves `indexed_at` empty; `repair`
finds those rows at start-up and indexes them, and `rebuild` recreates the whole index. A write
that changes what a row's payload says (a supersede closes the old revision's validity, a
delete relinks a chain) clears `indexed_at` in its own transaction (`mark_stale`), so a crash
before the payload is written is repaired the same way.

Every upsert is checked against the store afterwards (`store_points`): the points of rows
deleted meanwhile are removed again, and rows changed meanwhile are indexed again from their
new state, so no index writer brings back a deleted vector or leaves a stale one behind.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Callable, Iterable, Sequence

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from dcpm.domain import ItemKind
from dcpm.embedding import Embedder
from dcpm.errors import StorageFull
from dcpm.index import IndexPoint, VectorIndex, user_idf
from dcpm.index.anticipation import expected_companions, with_anticipations
from dcpm.index.base import OPEN_END, metadata_payload
from dcpm.store.db import Database
from dcpm.store.models import Item, Node, RawInput, utcnow

log = logging.getLogger("dcpm.index")
Progress = Callable[[int], None]
MODELS = ((RawInput, "raws"), (Item, "items"), (Node, "nodes"))  # everything that has a vector


def raw_index_text(raw: RawInput) -> str:
    """Turns are embedded as "speaker: text", the form a reader sees them in."""
    return f"{raw.speaker}: {raw.text}" if raw.speaker else raw.text


def _epoch(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else OPEN_END


def raw_payload(raw: RawInput) -> dict:
    """A turn's payload carries its metadata as stored with its row, for metadata filters
    (`metadata.food`, see dcpm.index.base.metadata_key) evaluated by the index itself."""
    return {"user_id": raw.user_id, "kind": ItemKind.RAW, "session_id": raw.session_id or "",
            "valid_from": _epoch(raw.timestamp), "valid_to": OPEN_END, **metadata_payload(raw.meta)}


def item_payload(item: Item) -> dict:
    return {"user_id": item.user_id, "kind": item.kind, "chain_id": item.chain_id,
            "session_id": (item.meta or {}).get("session_id", ""),
            "valid_from": _epoch(item.valid_from), "valid_to": _epoch(item.valid_to), **metadata_payload(item.meta)}


def node_payload(node: Node) -> dict:
    return {"user_id": node.user_id, "kind": node.kind, "session_id": "", "valid_from": _epoch(node.created_at),
            "valid_to": OPEN_END}


def validity_payload(item: Item) -> dict:
    """The part of an item's payload that changes when a successor supersedes it."""
    return {"valid_from": _epoch(item.valid_from), "valid_to": _epoch(item.valid_to)}


def build_points(embedder: Embedder, raws: Sequence[RawInput] = (), items: Sequence[Item] = (),
                 nodes: Sequence[Node] = ()) -> list[IndexPoint]:
    texts = [raw_index_text(r) for r in raws] + [i.text for i in items] + [n.text for n in nodes]
    if not texts:
        return []
    encoded = embedder.encode_documents(texts)
    payloads = [raw_payload(r) for r in raws] + [item_payload(i) for i in items] + [node_payload(n) for n in nodes]
    ids = [r.id for r in raws] + [i.id for i in items] + [n.id for n in nodes]
    points = [IndexPoint(ids[n], encoded.dense[n], encoded.sparse[n], payloads[n]) for n in range(len(ids))]
    return with_anticipations(embedder, points, items)


def index_rows(db: Database, index: VectorIndex, embedder: Embedder,
               raws: Sequence[RawInput] = (), items: Sequence[Item] = (), nodes: Sequence[Node] = ()) -> int:
    """Embed, upsert, then mark the rows indexed. Returns the number of points written."""
    return store_points(db, index, embedder, build_points(embedder, raws, items, nodes), [*raws, *items, *nodes])


def store_points(db: Database, index: VectorIndex, embedder: Embedder, points: Sequence[IndexPoint],
                 rows: Sequence[Any], again: bool = True) -> int:
    """Upsert the points of `rows` (read a moment ago), then compare with the store: a row
    deleted meanwhile loses its point again (deletes remove vectors before their commit, so an
    upsert from an older read would otherwise outlive the row), one changed meanwhile is indexed
    again from its new state, the others are marked indexed. Returns the points kept."""
    index.upsert(points)
    with db.session() as session:
        gone, moved = _settle(session, rows)
    if gone:
        index.delete(gone)
    if not moved or not again:
        return len(points) - len(gone)
    fresh = _reread(db, moved)
    lost = sorted({r.id for r in moved} - {r.id for r in fresh})
    if lost:
        index.delete(lost)
    rewritten = store_points(db, index, embedder, build_points(embedder, *_split(fresh)), fresh, again=False)
    return len(points) - len(gone) - len(moved) + rewritten


def _settle(session: Session, rows: Sequence[Any]) -> tuple[list[str], list[Any]]:
    """Mark indexed the rows that are as they were read; return the ids of those deleted and the
    rows changed since (left unindexed, for repair should nothing index them again)."""
    gone: list[str] = []
    moved: list[Any] = []
    for model, _ in MODELS:
        mine = [r for r in rows if isinstance(r, model)]
        if not mine:
            continue
        stamp = getattr(model, "updated_at", model.id)  # raw turns never change: the id stands in
        now = dict(session.execute(select(model.id, stamp).where(model.id.in_([r.id for r in mine]))).all())
        gone += [r.id for r in mine if r.id not in now]
        changed = [r for r in mine if r.id in now and now[r.id] != getattr(r, "updated_at", r.id)]
        moved += changed
        for ids, value in (([r.id for r in mine if r.id in now and r not in changed], utcnow()),
                           ([r.id for r in changed], None)):
            if ids:
                session.execute(update(model).where(model.id.in_(ids)).values(indexed_at=value))
    return gone, moved


def _reread(db: Database, rows: Sequence[Any]) -> list[Any]:
    with db.session() as session:
        return [row for model, _ in MODELS if (ids := [r.id for r in rows if isinstance(r, model)])
                for row in session.scalars(select(model).where(model.id.in_(ids)))]


def _split(rows: Sequence[Any]) -> tuple[list, list, list]:
    raws, items, nodes = ([r for r in rows if isinstance(r, model)] for model, _ in MODELS)
    return raws, items, nodes


def mark_stale(session: Session, rows: Sequence[Any]) -> None:
    """In the transaction that changes these rows' payload: they wait for re-indexing, so a crash
    before the index is told leaves them to start-up repair."""
    for row in rows:
        row.indexed_at = None


def refresh_validity(db: Database, index: VectorIndex, items: Sequence[Item], rounds: int = 3) -> None:
    """After the commit that changed these items' validity: write it into their payloads, then
    compare with the store, as `store_points` does. A delete writes its relinked survivors' payloads
    after its lease is gone, so a supersede committed meanwhile may have written its own (newer)
    validity first: an item changed since is written again from its new state, and one still
    changing after `rounds` is left unindexed for repair."""
    pending = list(items)
    for _ in range(rounds):
        if not pending:
            return
        for item in pending:
            index.set_payload([item.id], validity_payload(item))
        with db.session() as session:
            now = {i.id: i for i in session.scalars(select(Item).where(Item.id.in_([i.id for i in pending])))}
            for item in pending:
                session.execute(update(Item).where(Item.id == item.id, Item.updated_at == item.updated_at)
                                .values(indexed_at=utcnow()))
        pending = [now[i.id] for i in pending if i.id in now and now[i.id].updated_at != i.updated_at]
    if pending:
        with db.session() as session:
            session.execute(update(Item).where(Item.id.in_([i.id for i in pending])).values(indexed_at=None))


def remove_again(db: Database, index: VectorIndex, ids: Sequence[str]) -> int:
    """A delete's second removal of its points, after its commit and its lease: a row that has
    one of these ids again (the user restored meanwhile, and indexed) loses its point here too,
    so it is marked unindexed for the caller to index again. Returns how many were."""
    index.delete(list(ids))
    back = 0
    with db.session() as session:
        for model, _ in MODELS:
            for start in range(0, len(ids), 500):
                back += session.execute(update(model).where(model.id.in_(ids[start:start + 500]))
                                        .values(indexed_at=None)).rowcount or 0
    return back


def _batches(db: Database, model, only_unindexed: bool, batch: int) -> Iterable[list]:  # type: ignore[no-untyped-def]
    last_id = ""
    while True:
        with db.session() as session:
            query = select(model).where(model.id > last_id).order_by(model.id).limit(batch)
            if only_unindexed:
                query = query.where(model.indexed_at.is_(None))
            rows = list(session.scalars(query))
        if not rows:
            return
        last_id = rows[-1].id
        yield rows


def count_rows(db: Database, only_unindexed: bool) -> int:
    total = 0
    with db.session() as session:
        for model, _ in MODELS:
            query = select(func.count()).select_from(model)
            if only_unindexed:
                query = query.where(model.indexed_at.is_(None))
            total += int(session.scalar(query) or 0)
    return total


def index_all(db: Database, index: VectorIndex, embedder: Embedder, *, only_unindexed: bool,
              batch: int = 256, progress: Progress | None = None) -> int:
    written = 0
    for model, key in MODELS:
        for rows in _batches(db, model, only_unindexed, batch):
            written += _index_past_bad_rows(db, index, embedder, key, rows)
            if progress:
                progress(len(rows))
    return written


def _index_past_bad_rows(db: Database, index: VectorIndex, embedder: Embedder, key: str, rows: list) -> int:
    """Start-up repair and reindex index every row they can: a batch the index refuses is tried
    again row by row, and a row it still refuses is logged and left unindexed (in the store, not
    searchable), so one bad row cannot keep every user's search down. A full disk, or an index
    that no longer answers at all, stops the run with its own error."""
    try:
        return index_rows(db, index, embedder, **{key: rows})
    except StorageFull:
        raise
    except Exception:
        pass
    written, refused = 0, []
    for row in rows:
        try:
            written += index_rows(db, index, embedder, **{key: [row]})
        except StorageFull:
            raise
        except Exception as exc:
            refused.append((row.id, exc))
    if refused and len(refused) == len(rows):
        index.count()  # raises when the fault is the index's (down, unreachable), not the rows'
    for row_id, exc in refused:
        log.error("%s row %s could not be indexed and stays unsearchable: %s", key, row_id, str(exc)[:300])
    return written


def repair(db: Database, index: VectorIndex, embedder: Embedder, progress: Progress | None = None) -> int:
    """Start-up check: index rows whose vectors a crash left unwritten, and, when the index holds
    fewer points than there are rows (a lost or damaged index), every row it lacks (an item with
    anticipations has two points: dcpm.index.anticipation)."""
    written = index_all(db, index, embedder, only_unindexed=True, progress=progress)
    with db.session() as session:
        anticipating = int(session.scalar(select(func.count()).where(Item.anticipations.is_not(None))) or 0)
    if index.count() >= count_rows(db, only_unindexed=False) + anticipating:
        return written
    for model, key in MODELS:
        for rows in _batches(db, model, False, 512):
            wanted = {r.id: [r.id, *expected_companions([r])] for r in rows}  # its own point, and its companion
            present = index.existing([point for points in wanted.values() for point in points])
            missing = [r for r in rows if not present.issuperset(wanted[r.id])]
            if missing:
                written += _index_past_bad_rows(db, index, embedder, key, missing)
    return written


def rebuild(db: Database, index: VectorIndex, embedder: Embedder, progress: Progress | None = None) -> int:
    """`dcpm reindex`: write every row's point again from the relational store (fresh vectors, and
    payload fields added since a point was indexed, such as `metadata`), then remove points that
    no row has. Each point is overwritten in place, so searches meanwhile find every memory (by
    its old vector until its new one is written). An index of an older layout (BM25's IDF over
    every user: dcpm.index.user_idf) is emptied first, as its layout cannot change in place."""
    if index.idf_per_user != user_idf.per_user(None, index.sparse_uses_idf):
        index.clear()
    written = index_all(db, index, embedder, only_unindexed=False, progress=progress)
    stray = _points_without_rows(db, index)
    if stray:
        log.info("reindex removed %d points that no row of the store has", len(stray))
        index.delete(stray)
    return written


def _points_without_rows(db: Database, index: VectorIndex, batch: int = 1000) -> list[str]:
    """Ids in the index of no raw turn, item or node. Points are written only for committed rows
    and deletes remove them before and after their commit, so these are leftovers (of a crash
    between a delete's commit and its second removal, or of an index restored from a backup)."""
    stray: list[str] = []
    ids = list(index.ids())
    with db.session() as session:
        for start in range(0, len(ids), batch):
            chunk = ids[start:start + batch]
            present = {row_id for model, _ in MODELS
                       for row_id in session.scalars(select(model.id).where(model.id.in_(chunk)))}
            stray += [point_id for point_id in chunk if point_id not in present]
    return stray
