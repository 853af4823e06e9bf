"""System 1, the synchronous daytime writer (DCPM 2.2): extract, reconcile, upsert.

The raw input is already committed (status `pending`) when the writer starts. At most two LLM
calls run per request, outside any transaction; everything the request changes (items, chain
pointers, revisions, events, the raw input becoming `done`) is then written in one transaction,
so a crash either applies a request entirely or not at all, and a retry applies it once.
Writes of one user run one at a time in arrival order under a store lease.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable, Sequence

from dateutil import parser as dateparser
from sqlalchemy import select

from dcpm.api.models import Operation
from dcpm.config import Settings
from dcpm.domain import EventAction, ItemKind, Op, RawStatus
from dcpm.embedding import Embedder, Encoded
from dcpm.errors import Conflict, StorageFull
from dcpm.index import IndexPoint, Scope, VectorIndex, projection
from dcpm.index.base import DENSE
from dcpm.llm import LLMClient, LLMFailure, Usage
from dcpm.llm.prompts import extract, reconcile
from dcpm.metrics import WRITER_OVERHEAD, WRITES
from dcpm.store import events, leases
from dcpm.store.datadir import ensure_free_space
from dcpm.store.db import Database
from dcpm.store.items import NewItem, add_item, supersede, update_text
from dcpm.store.models import Item, RawInput, utcnow
from dcpm.write.reconcile import Candidate, Extracted, Planned, exact_duplicates, plan

log = logging.getLogger("dcpm.write.writer")


@dataclass
class WriteResult:
    request_id: str
    status: RawStatus  # done | pending: the status of the request's turns
    operations: list[Operation] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    error: str | None = None

    @property
    def non_llm_seconds(self) -> float:
        return max(0.0, self.seconds - self.usage.seconds)


@dataclass
class _Prepared:
    """Everything the LLM decided for one request, ready to apply."""

    raws: list[RawInput]
    extracted: list[Extracted]
    vectors: Encoded | None  # of `extracted`, computed for reconciliation (None when nothing was extracted)
    planned: list[Planned]
    summary: str | None


class Writer:
    def __init__(self, db: Database, index: VectorIndex, embedder: Embedder, settings: Settings,
                 llm: LLMClient | None, on_indexed: Callable[[int], None] | None = None):
        self.db, self.index, self.embedder, self.settings, self.llm = db, index, embedder, settings, llm
        self.on_indexed = on_indexed or (lambda n: None)

    def index_rows(self, raws: Sequence[RawInput] = (), items: Sequence[Item] = ()) -> None:
        """Vectors for rows just committed: row first, then vector (see dcpm.index.projection)."""
        self.on_indexed(projection.index_rows(self.db, self.index, self.embedder, raws=raws, items=items))

    # --- ordering ----------------------------------------------------------------------------
    def drain(self, user_id: str, until: str | None = None, force: bool = False,
              wait_seconds: float | None = None) -> dict[str, WriteResult]:
        """Process the user's pending requests oldest first, stopping at `until` or at the first
        that stays pending (later ones must not overtake it)."""
        results: dict[str, WriteResult] = {}
        wait = self.settings.writer_lease_seconds if wait_seconds is None else wait_seconds
        try:
            with leases.held(self.db, f"write:{user_id}", self.settings.writer_lease_seconds, wait):
                while True:
                    request_id, not_before = self._oldest_pending(user_id)
                    if request_id is None or (not force and not_before is not None and not_before > utcnow()):
                        break
                    result = self.process(request_id)
                    results[request_id] = result
                    if result.status != RawStatus.DONE or request_id == until:
                        break
        except Conflict:
            log.info("writer for %s busy; request stays pending", user_id)
        return results

    def _oldest_pending(self, user_id: str) -> tuple[str | None, datetime | None]:
        with self.db.session() as session:
            row = session.execute(
                select(RawInput.request_id, RawInput.next_attempt_at)
                .where(RawInput.user_id == user_id, RawInput.status == RawStatus.PENDING)
                .order_by(RawInput.created_at, RawInput.position).limit(1)).first()
        return (row[0], row[1]) if row else (None, None)

    # --- one request -------------------------------------------------------------------------
    def process(self, request_id: str) -> WriteResult:
        started = time.perf_counter()
        result = WriteResult(request_id=request_id, status=RawStatus.PENDING)
        if self.llm is None:
            result.error = "no LLM configured"
            return result
        try:
            prepared = self._prepare(request_id, result.usage)
            ensure_free_space(self.settings.data_dir, self.settings.min_free_disk_mb)
            if prepared is not None:
                result.operations = self._apply(request_id, prepared, result.usage)
            result.status = RawStatus.DONE
        except (LLMFailure, StorageFull) as exc:
            result.error = exc.message
            self._record_failure(request_id, exc.message)
        result.seconds = time.perf_counter() - started
        WRITES.labels(outcome=result.status).inc()
        if result.status == RawStatus.DONE:
            WRITER_OVERHEAD.observe(result.non_llm_seconds)
        return result

    def _prepare(self, request_id: str, usage: Usage) -> _Prepared | None:
        assert self.llm is not None
        with self.db.session() as session:
            raws = list(session.scalars(select(RawInput).where(RawInput.request_id == request_id,
                                                               RawInput.status == RawStatus.PENDING)
                                        .order_by(RawInput.position)))
            if not raws:
                return None
            history = self._history(session, raws[0])
        first = raws[0]
        system, user = extract.render(
            turns=[f"{r.speaker or r.role}: {r.text}" for r in raws],
            history=[f"{h.speaker or h.role}: {h.text}" for h in history],
            timestamp=first.timestamp.isoformat(), speaker=first.speaker or first.role)
        answer = self.llm.structured(system, user, extract.ExtractionAnswer, usage, "extract")
        extracted = [Extracted(kind=i.kind, text=i.text.strip(), type=i.type, topic=i.topic, salience=i.salience,
                               event_time=_parse_time(i.event_time, first.timestamp))
                     for i in answer.items if i.text.strip()]
        vectors = self.embedder.encode_documents([e.text for e in extracted]) if extracted else None
        candidates = [self._candidates(first.user_id, e, vectors.dense[n], n) for n, e in enumerate(extracted)]
        duplicates = exact_duplicates(extracted, candidates)
        decisions: list = []
        # Items with no neighbour are plainly new: only the others need the reconcile call.
        keep = [n for n in range(len(extracted)) if n not in duplicates and candidates[n]]
        if keep:
            system, user = reconcile.render([extracted[n].text for n in keep], [candidates[n] for n in keep])
            reconciled = self.llm.structured(system, user, reconcile.ReconcileAnswer, usage, "reconcile")
            # The prompt numbers only the kept items; map its numbers back to extracted positions.
            decisions = [d.model_copy(update={"item": keep[d.item - 1] + 1}) for d in reconciled.decisions
                         if 1 <= d.item <= len(keep)]
        planned = plan(extracted, candidates, decisions, skip=set(duplicates)) + list(duplicates.values())
        summary = (answer.summary or "").strip() or None
        return _Prepared(raws, extracted, vectors, sorted(planned, key=lambda p: p.index), summary)

    def _history(self, session, first: RawInput) -> list[RawInput]:  # type: ignore[no-untyped-def]
        query = select(RawInput).where(RawInput.user_id == first.user_id, RawInput.created_at < first.created_at)
        if first.session_id:
            query = query.where(RawInput.session_id == first.session_id)
        recent = session.scalars(query.order_by(RawInput.created_at.desc(), RawInput.position.desc())
                                 .limit(self.settings.writer_history_turns))
        return list(reversed(list(recent)))

    def _candidates(self, user_id: str, item: Extracted, vector, number: int) -> list[Candidate]:  # type: ignore[no-untyped-def]
        """Top-k current items of the same user and kind (DCPM: k = 5)."""
        hits = self.index.query(DENSE, vector, Scope(user_id=user_id, kinds=(item.kind,), current_only=True),
                                self.settings.reconcile_top_k)
        if not hits:
            return []
        with self.db.session() as session:
            rows = {i.id: i for i in session.scalars(select(Item).where(
                Item.id.in_([h.id for h in hits]), Item.user_id == user_id, Item.superseded_by_id.is_(None)))}
        shown = [rows[h.id] for h in hits if h.id in rows]
        return [Candidate(f"{number + 1}.{j + 1}", row.id, row.text) for j, row in enumerate(shown)]

    def _apply(self, request_id: str, prepared: _Prepared, usage: Usage) -> list[Operation]:
        raws = prepared.raws
        user_id, first = raws[0].user_id, raws[0]
        operations: list[Operation] = []
        new_items: list[tuple[Item, int | None]] = []  # (item, index of its precomputed vector)
        changed_validity: list[Item] = []
        with self.db.session() as session:
            pending = set(session.scalars(select(RawInput.id).where(RawInput.request_id == request_id,
                                                                   RawInput.status == RawStatus.PENDING)))
            if not pending:  # another worker applied it meanwhile: apply nothing twice
                return []
            meta = {"session_id": first.session_id} if first.session_id else {}
            for step in prepared.planned:
                source = prepared.extracted[step.index]
                target = session.get(Item, step.target_id) if step.target_id else None
                if step.op in (Op.UPDATE, Op.SUPERSEDE) and (target is None or target.user_id != user_id
                                                             or target.superseded_by_id is not None):
                    step = Planned(Op.ADD, step.index, source.text, reason="target changed before apply")
                new = source.placed(first.timestamp, source_raw_id=first.id, metadata=meta, text=step.text)
                if step.op == Op.ADD:
                    item = add_item(session, user_id, new, request_id=request_id)
                    new_items.append((item, step.index))
                elif step.op == Op.SUPERSEDE:
                    item = supersede(session, target, new, request_id=request_id)
                    new_items.append((item, step.index))
                    changed_validity.append(target)
                elif step.op == Op.UPDATE:
                    item = update_text(session, target, step.text, raw_id=first.id, request_id=request_id)
                    new_items.append((item, None))
                else:
                    operations.append(Operation(op=Op.NONE, id=step.target_id or "", text=step.text, kind=source.kind,
                                                target=step.target_id))
                    continue
                operations.append(Operation(op=step.op, id=item.id, text=item.text, kind=item.kind,
                                            target=step.target_id, chain_id=item.chain_id))
            if prepared.summary:
                summary = add_item(session, user_id, NewItem(kind=ItemKind.SUMMARY, text=prepared.summary,
                                                             valid_from=first.timestamp, source_raw_id=first.id,
                                                             metadata=meta), request_id=request_id)
                new_items.append((summary, None))
                operations.append(Operation(op=Op.ADD, id=summary.id, text=summary.text, kind=ItemKind.SUMMARY,
                                            chain_id=summary.chain_id))
            for raw in session.scalars(select(RawInput).where(RawInput.id.in_(pending))):
                raw.status, raw.error, raw.next_attempt_at = RawStatus.DONE, None, None
                raw.attempts += 1
            events.record(session, EventAction.EXTRACTED, user_id=user_id, subject_kind=ItemKind.RAW,
                          subject_id=first.id, request_id=request_id, operations=[o.op for o in operations],
                          llm_calls=usage.calls, tokens=usage.tokens)
        self._index(prepared, new_items, changed_validity)
        return operations

    def _index(self, prepared: _Prepared, new_items: list[tuple[Item, int | None]], changed: list[Item]) -> None:
        """Vectors after the rows: reuse the vectors computed for reconciliation, embed the rest."""
        vectors = prepared.vectors
        points: list[IndexPoint] = []
        if vectors is not None:
            points = [IndexPoint(item.id, vectors.dense[n], vectors.sparse[n], projection.item_payload(item))
                      for item, n in new_items if n is not None]
        self.index.upsert(points)
        to_embed = [item for item, n in new_items if n is None]
        if to_embed:
            projection.index_rows(self.db, self.index, self.embedder, items=to_embed)
        for item in changed:
            self.index.set_payload([item.id], projection.validity_payload(item))
        if points:
            with self.db.session() as session:
                for point in points:
                    session.get(Item, point.id).indexed_at = utcnow()
        self.on_indexed(len(new_items))

    def _record_failure(self, request_id: str, error: str) -> None:
        with self.db.session() as session:
            rows = list(session.scalars(select(RawInput).where(RawInput.request_id == request_id,
                                                               RawInput.status == RawStatus.PENDING)))
            for raw in rows:
                raw.attempts += 1
                raw.error = error[:2000]
                delay = min(self.settings.recovery_interval_seconds * 2 ** (raw.attempts - 1),
                            self.settings.recovery_max_backoff_seconds)
                raw.next_attempt_at = utcnow() + timedelta(seconds=delay)
            if rows:
                events.record(session, EventAction.EXTRACTION_FAILED, user_id=rows[0].user_id,
                              subject_kind=ItemKind.RAW, subject_id=rows[0].id, request_id=request_id,
                              error=error[:500], attempt=rows[0].attempts)
        log.warning("request %s stays pending: %s", request_id, error)

    def users_with_pending(self, older_than_seconds: float = 0.0) -> list[str]:
        """Users with pending input; the recovery loop leaves fresh input to its own caller."""
        cutoff = utcnow() - timedelta(seconds=older_than_seconds)
        with self.db.session() as session:
            return list(session.scalars(select(RawInput.user_id).where(
                RawInput.status == RawStatus.PENDING, RawInput.created_at <= cutoff).distinct()))

    def outcome(self, request_id: str) -> WriteResult:
        """What happened to a request another worker processed: its status and operations, read
        back from the rows and the event log."""
        with self.db.session() as session:
            statuses = set(session.scalars(select(RawInput.status).where(RawInput.request_id == request_id)))
            changes = [events.change_of(e) for e in events.of_request(session, request_id,
                                                                      (EventAction.CREATED, EventAction.UPDATED))]
            items = {i.id: i for i in session.scalars(select(Item).where(Item.id.in_([c.item_id for c in changes])))}
        operations = []
        for change in changes:
            item = items.get(change.item_id)
            if item is not None and change.op is not None:  # a deleted item left only a tombstone
                operations.append(Operation(op=change.op, id=item.id, text=item.text, kind=item.kind,
                                            target=change.supersedes, chain_id=item.chain_id))
        return WriteResult(request_id, RawStatus.PENDING if RawStatus.PENDING in statuses else RawStatus.DONE,
                           operations)


def _parse_time(value: str | None, reference: datetime) -> datetime | None:
    if not value:
        return None
    try:
        return dateparser.parse(value, default=reference.replace(hour=0, minute=0, second=0, microsecond=0))
    except (ValueError, OverflowError):
        return None
