"""System 1, the synchronous daytime writer (DCPM 2.2): extract, reconcile, upsert.

The raw input is already committed (status `pending`) when the writer starts. At most two LLM
calls run per request, outside any transaction; everything the request changes (items, chain
pointers, revisions, events, the raw input becoming `done`) is then written in one transaction,
so a crash either applies a request entirely or not at all, and a retry applies it once.
Writes of one user run one at a time in arrival order under a store lease, renewed while the
writer works. The apply transaction first fences that lease and claims the request's turns with
one conditional UPDATE, so a writer that lost its lease, or a second writer on the same request,
applies nothing. A request that fails is retried with backoff, and given up after
`writer_max_attempts` so the user's later requests go on (dcpm.write.recovery).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from dcpm.api.models import Operation
from dcpm.config import Settings
from dcpm.domain import EventAction, ItemKind, Op, RawStatus
from dcpm.embedding import Embedder, Encoded
from dcpm.errors import Conflict
from dcpm.index import IndexPoint, Scope, VectorIndex, projection
from dcpm.index.anticipation import with_anticipations
from dcpm.index.base import DENSE
from dcpm.llm import LLMClient, Usage
from dcpm.llm.budget import Budget
from dcpm.llm.prompts import extract, reconcile
from dcpm.metrics import WRITER_OVERHEAD, WRITES
from dcpm.store import events, leases
from dcpm.store.datadir import ensure_free_space
from dcpm.store.db import Database
from dcpm.store.items import NewItem, add_item, supersede, update_text
from dcpm.store.models import Item, RawInput, utcnow
from dcpm.write import recovery
from dcpm.write.reconcile import Candidate, Extracted, Planned, exact_duplicates, extracted_items, plan

log = logging.getLogger("dcpm.write.writer")


@dataclass
class WriteResult:
    request_id: str
    status: RawStatus  # done | pending | failed: the status of the request's turns
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
    shown: dict[str, str]  # candidate item id -> the text reconciliation saw


class Writer:
    def __init__(self, db: Database, index: VectorIndex, embedder: Embedder, settings: Settings,
                 llm: LLMClient | None, on_indexed: Callable[[int], None] | None = None):
        self.db, self.index, self.embedder, self.settings, self.llm = db, index, embedder, settings, llm
        self.on_indexed = on_indexed or (lambda n: None)
        self.budget = Budget(settings.llm_context_tokens, settings.llm_answer_tokens)

    def index_rows(self, raws: Sequence[RawInput] = (), items: Sequence[Item] = ()) -> None:
        """Vectors for rows just committed: row first, then vector (see dcpm.index.projection)."""
        self.on_indexed(projection.index_rows(self.db, self.index, self.embedder, raws=raws, items=items))

    # --- ordering ----------------------------------------------------------------------------
    def drain(self, user_id: str, until: str | None = None, force: bool = False,
              wait_seconds: float | None = None) -> dict[str, WriteResult]:
        """Process the user's pending requests oldest first, stopping at `until` or at the first
        that stays pending (later ones must not overtake it; one given up as failed no longer
        holds them back)."""
        results: dict[str, WriteResult] = {}
        wait = self.settings.writer_lease_seconds if wait_seconds is None else wait_seconds
        try:
            with leases.held(self.db, f"write:{user_id}", self.settings.writer_lease_seconds, wait) as holder:
                while True:
                    request_id, not_before = self._oldest_pending(user_id)
                    if request_id is None or (not force and not_before is not None and not_before > utcnow()):
                        break
                    result = self.process(request_id, holder)
                    results[request_id] = result
                    if result.status == RawStatus.PENDING or request_id == until:
                        break
        except Conflict as exc:  # busy, or the lease was lost (its new holder goes on)
            log.info("writer for %s stops: %s", user_id, exc.message)
        return results

    def _oldest_pending(self, user_id: str) -> tuple[str | None, datetime | None]:
        with self.db.session() as session:
            row = session.execute(
                select(RawInput.request_id, RawInput.next_attempt_at)
                .where(RawInput.user_id == user_id, RawInput.status == RawStatus.PENDING)
                .order_by(RawInput.created_at, RawInput.position).limit(1)).first()
        return (row[0], row[1]) if row else (None, None)

    # --- one request -------------------------------------------------------------------------
    def process(self, request_id: str, holder: str | None = None) -> WriteResult:
        """One request. `holder` holds the user's writer lease (from `drain`); its writes are
        fenced by it, and LeaseLost abandons the request to the lease's new holder. Any other
        failure is recorded with backoff (dcpm.write.recovery.record_failure)."""
        started = time.perf_counter()
        result = WriteResult(request_id=request_id, status=RawStatus.PENDING)
        if self.llm is None:
            result.error = "no LLM configured"
            return result
        try:
            prepared = self._prepare(request_id, result.usage)
            ensure_free_space(self.settings.data_dir, self.settings.min_free_disk_mb)
            if prepared is not None:
                result.operations = self._apply(request_id, prepared, result.usage, holder)
            result.status = RawStatus.DONE
        except leases.LeaseLost:
            raise
        except Exception as exc:  # every failure, not only the LLM's: none may retry without backoff
            result.error = recovery.failure_reason(exc)
            result.status = recovery.record_failure(self.db, self.settings, request_id, exc,
                                                    lambda session: self._fence(session, request_id, holder))
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
            timestamp=first.timestamp.isoformat(), speaker=first.speaker or first.role, budget=self.budget,
            anticipate=self.settings.anticipations)
        answer = self.llm.structured(system, user, extract.ExtractionAnswer, usage, "extract")
        extracted = extracted_items(answer, first.timestamp, self.settings.anticipations)
        vectors = self.embedder.encode_documents([e.text for e in extracted]) if extracted else None
        candidates = [self._candidates(first.user_id, e, vectors.dense[n], n) for n, e in enumerate(extracted)]
        duplicates = exact_duplicates(extracted, candidates)
        decisions: list = []
        # Items with no neighbour are plainly new: only the others need the reconcile call.
        keep = [n for n in range(len(extracted)) if n not in duplicates and candidates[n]]
        if keep:
            system, user = reconcile.render([extracted[n].text for n in keep], [candidates[n] for n in keep],
                                            self.budget)
            reconciled = self.llm.structured(system, user, reconcile.ReconcileAnswer, usage, "reconcile")
            # The prompt numbers only the kept items; map its numbers back to extracted positions.
            decisions = [d.model_copy(update={"item": keep[d.item - 1] + 1}) for d in reconciled.decisions
                         if 1 <= d.item <= len(keep)]
        planned = plan(extracted, candidates, decisions, skip=set(duplicates)) + list(duplicates.values())
        # A merged text written from a candidate cut to fit the prompt would lose the cut part.
        cut = {c.item_id for n in keep for c in candidates[n] if c.text not in user}
        planned = [Planned(Op.ADD, p.index, extracted[p.index].text, reason="target was cut to fit the prompt")
                   if p.op == Op.UPDATE and p.target_id in cut else p for p in planned]
        summary = (answer.summary or "").strip() or None
        shown = {c.item_id: c.text for listed in candidates for c in listed}
        return _Prepared(raws, extracted, vectors, sorted(planned, key=lambda p: p.index), summary, shown)

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

    def _fence(self, session: Session, request_id: str, holder: str | None) -> None:
        """First in a transaction written under the lease: is it still this writer's?"""
        if holder is not None:
            user_id = session.scalar(select(RawInput.user_id).where(RawInput.request_id == request_id).limit(1))
            leases.fence(session, f"write:{user_id}", holder, self.settings.writer_lease_seconds)

    def _apply(self, request_id: str, prepared: _Prepared, usage: Usage, holder: str | None) -> list[Operation]:
        raws = prepared.raws
        user_id, first = raws[0].user_id, raws[0]
        operations: list[Operation] = []
        new_items: list[tuple[Item, int | None]] = []  # (item, index of its precomputed vector)
        changed_validity: list[Item] = []
        with self.db.session() as session:
            self._fence(session, request_id, holder)
            if not _claim(session, [r.id for r in raws]):  # another worker applied it meanwhile
                return []
            # the request's metadata travels to what is extracted from it (Mem0 users filter by it); its
            # `session_id` is the turn's session as dcpm recorded it, never a client's key of that name
            meta = {key: value for key, value in (first.meta or {}).items() if key != "session_id"}
            meta.update({"session_id": first.session_id} if first.session_id else {})
            for step in prepared.planned:
                source = prepared.extracted[step.index]
                target = session.get(Item, step.target_id) if step.target_id else None
                if step.op in (Op.UPDATE, Op.SUPERSEDE) and (target is None or target.user_id != user_id
                                                             or target.superseded_by_id is not None
                                                             or target.text != prepared.shown.get(target.id)):
                    raise Conflict(f"item {step.target_id} changed after reconciliation; the request is retried")
                new = source.placed(first.timestamp, source_raw_id=first.id, metadata=meta, text=step.text)
                if step.op == Op.ADD:
                    item = add_item(session, user_id, new, request_id=request_id)
                    new_items.append((item, step.index))
                elif step.op == Op.SUPERSEDE:
                    item = supersede(session, target, new, request_id=request_id)
                    new_items.append((item, step.index))
                    changed_validity.append(target)
                elif step.op == Op.UPDATE:
                    item = update_text(session, target, step.text, raw_id=first.id, request_id=request_id,
                                       anticipations=[*target.anticipation_list, *source.anticipations])
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
            events.record(session, EventAction.EXTRACTED, user_id=user_id, subject_kind=ItemKind.RAW,
                          subject_id=first.id, request_id=request_id, operations=[o.op for o in operations],
                          llm_calls=usage.calls, tokens=usage.tokens)
        try:
            self._index(prepared, new_items, changed_validity)
        except Exception as exc:  # the request is applied; start-up repair indexes what is missing
            log.warning("request %s applied, its vectors wait for repair: %s", request_id, type(exc).__name__)
        return operations

    def _index(self, prepared: _Prepared, new_items: list[tuple[Item, int | None]], changed: list[Item]) -> None:
        """Vectors after the rows: reuse the vectors computed for reconciliation, embed the rest;
        then close the superseded revisions' validity (dcpm.index.projection keeps each write
        from bringing back a row deleted meanwhile, and leaves what a crash skips to repair)."""
        vectors = prepared.vectors
        reused = [(item, n) for item, n in new_items if n is not None and vectors is not None]
        points = with_anticipations(self.embedder, [
            IndexPoint(item.id, vectors.dense[n], vectors.sparse[n], projection.item_payload(item))
            for item, n in reused], [item for item, _ in reused]) if vectors is not None else []
        projection.store_points(self.db, self.index, self.embedder, points, [item for item, _ in reused])
        to_embed = [item for item, n in new_items if n is None]
        if to_embed:
            projection.index_rows(self.db, self.index, self.embedder, items=to_embed)
        projection.refresh_validity(self.db, self.index, changed)
        self.on_indexed(len(new_items))


def _claim(session: Session, raw_ids: list[str]) -> bool:
    """The apply step's claim on the request's turns, one conditional UPDATE: False when another
    writer applied them first (nothing is applied twice); Conflict when only some are left."""
    claimed = session.execute(
        update(RawInput).where(RawInput.id.in_(raw_ids), RawInput.status == RawStatus.PENDING)
        .values(status=RawStatus.DONE, error=None, next_attempt_at=None, attempts=RawInput.attempts + 1)
        .execution_options(synchronize_session=False)).rowcount
    if claimed and claimed != len(raw_ids):
        raise Conflict("the request's turns changed while it was extracted; the request is retried")
    return bool(claimed)
