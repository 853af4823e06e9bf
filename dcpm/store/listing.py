"""Pages of a user's rows for listings: one query's rows, or items and raw turns interleaved in
one order, counted and paged in SQL so a page is never filled or counted in Python."""

from __future__ import annotations

from sqlalchemy import Select, func, literal, select, union_all
from sqlalchemy.orm import Session

from dcpm.store.models import Item, RawInput


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
