"""Pages of a user's rows for listings: one query's rows, or items and raw turns interleaved in
one order, counted and paged in SQL so a page is never filled or counted in Python."""

from __future__ import annotations

from sqlalchemy import ColumnElement, Select, func, literal, select, union_all
from sqlalchemy.orm import Session

from dcpm.domain import RawStatus
from dcpm.store.models import Item, RawInput

# The turns a listing shows beside the items (what search finds, each once): not extracted into any.
UNEXTRACTED = RawInput.status != RawStatus.DONE


def per_user(session: Session, model: type[Item] | type[RawInput], *where: ColumnElement[bool]) -> dict[str, int]:
    """How many rows of `model` (meeting `where`) each user has."""
    return dict(session.execute(select(model.user_id, func.count()).where(*where).group_by(model.user_id)).all())


def page(session: Session, query: Select, order: tuple, offset: int, limit: int) -> tuple[int, list]:
    """The total the query selects, and one page of its rows in `order`."""
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    return total, list(session.scalars(query.order_by(*order).offset(offset).limit(limit)))


def page_together(session: Session, items: Select, turns: Select, offset: int,
                  limit: int) -> tuple[int, list[Item | RawInput]]:
    """The total of both queries (of Item and of RawInput rows), and one page of their rows
    ordered by when each started to hold or was said; a turn keeps its place in its request."""
    both = union_all(items.with_only_columns(Item.id, Item.valid_from.label("at"), Item.created_at.label("made"),
                                             literal(0).label("position")),
                     turns.with_only_columns(RawInput.id, RawInput.timestamp, RawInput.created_at,
                                             RawInput.position)).subquery()
    total = session.scalar(select(func.count()).select_from(both)) or 0
    ids = list(session.scalars(select(both.c.id).order_by(both.c.at, both.c.made, both.c.position, both.c.id)
                               .offset(offset).limit(limit)))
    found: dict[str, Item | RawInput] = {row.id: row for model in (Item, RawInput)
                                         for row in session.scalars(select(model).where(model.id.in_(ids)))}
    return total, [found[i] for i in ids if i in found]
