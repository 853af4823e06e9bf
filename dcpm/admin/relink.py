"""The pure core of deleting from a supersedes chain: which survivors must point at whom once
some revisions are gone, so a chain never dangles (plain data in, plain data out)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from dcpm.store.chains import ChainNode


@dataclass(frozen=True)
class Relink:
    """New chain pointers of one surviving item."""

    id: str
    supersedes_id: str | None
    superseded_by_id: str | None
    valid_to: datetime | None


def relink(chain: Sequence[ChainNode], removed: set[str]) -> list[Relink]:
    """The survivors' new links once `removed` leave a chain (ordered oldest first, as
    `walk_chain` returns it): each survivor points at its nearest surviving neighbours, and one
    whose successor changed holds until the new successor's start (a new head holds open-ended).
    Only survivors whose links change are returned."""
    survivors = [node for node in chain if node.id not in removed]
    changes = []
    for position, node in enumerate(survivors):
        before = survivors[position - 1] if position else None
        after = survivors[position + 1] if position + 1 < len(survivors) else None
        supersedes = before.id if before else None
        superseded_by = after.id if after else None
        if supersedes == node.supersedes_id and superseded_by == node.superseded_by_id:
            continue
        valid_to = node.valid_to if superseded_by == node.superseded_by_id else (after.valid_from if after else None)
        changes.append(Relink(node.id, supersedes, superseded_by, valid_to))
    return changes
