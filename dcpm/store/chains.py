"""Supersedes chains (DCPM 2.2 iv): walking the doubly linked list of a belief's revisions."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, Sequence, TypeVar


class ChainNode(Protocol):
    id: str
    supersedes_id: str | None
    superseded_by_id: str | None
    valid_from: datetime
    valid_to: datetime | None


Node = TypeVar("Node", bound=ChainNode)


def walk_chain(nodes: Sequence[Node]) -> list[Node]:
    """Order one chain's nodes oldest to newest by following `superseded_by` from the root.

    Nodes not reachable from the root (a broken pointer) are appended by time so nothing is
    hidden; callers can compare lengths to detect damage.
    """
    by_id = {node.id: node for node in nodes}
    roots = [n for n in nodes if not n.supersedes_id or n.supersedes_id not in by_id]
    ordered: list[Node] = []
    seen: set[str] = set()
    for root in sorted(roots, key=lambda n: n.valid_from):
        node: Node | None = root
        while node is not None and node.id not in seen:
            ordered.append(node)
            seen.add(node.id)
            node = by_id.get(node.superseded_by_id) if node.superseded_by_id else None
    ordered.extend(sorted((n for n in nodes if n.id not in seen), key=lambda n: n.valid_from))
    return ordered


def believed_at(chain: Sequence[Node], as_of: datetime | None) -> Node | None:
    """The revision that held at `as_of` (the current head when `as_of` is None)."""
    if as_of is None:
        heads = [n for n in chain if n.superseded_by_id is None]
        return heads[-1] if heads else (chain[-1] if chain else None)
    holding = [n for n in chain if n.valid_from <= as_of and (n.valid_to is None or n.valid_to > as_of)]
    return holding[-1] if holding else None
