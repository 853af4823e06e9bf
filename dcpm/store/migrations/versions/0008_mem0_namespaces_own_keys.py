"""Mem0 namespaces (an agent_id or app_id given beside a user) move to dcpm's own metadata keys

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

An add kept a namespace in the memory's metadata as `agent_id` / `app_id`, keys a client's own
metadata could also set, so a client could name the agent of its memory. Namespaces now live
under `dcpm_agent_id` / `dcpm_app_id`, which client metadata may not use. Rows written before
keep what they showed: their `agent_id` / `app_id` keys move to the new keys, and the rows are
marked unindexed so that start-up repair rewrites their points (the index filters on the same
metadata keys).
"""
import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

TABLES = ('raw_inputs', 'items')
MOVES = {'agent_id': 'dcpm_agent_id', 'app_id': 'dcpm_app_id'}
BATCH = 1000


def _move(metadata: dict, moves: dict[str, str]) -> dict | None:
    """The metadata with each old key under its new one; None when nothing moves."""
    if not isinstance(metadata, dict):
        return None
    moved = dict(metadata)
    for old, new in moves.items():
        if old in moved and new not in moved:
            moved[new] = moved.pop(old)
    return moved if moved.keys() != metadata.keys() else None


def _rewrite(moves: dict[str, str]) -> None:
    bind = op.get_bind()
    for name in TABLES:
        table = sa.table(name, sa.column('id', sa.String), sa.column('metadata', sa.JSON),
                         sa.column('indexed_at', sa.DateTime))
        text = sa.cast(table.c.metadata, sa.Text)
        maybe = sa.or_(*(text.like(f'%{old}%') for old in moves))  # a cheap first cut; _move decides
        last = ''
        while True:
            rows = bind.execute(sa.select(table.c.id, table.c.metadata).where(maybe, table.c.id > last)
                                .order_by(table.c.id).limit(BATCH)).all()
            for row_id, metadata in rows:
                moved = _move(metadata, moves)
                if moved is not None:
                    bind.execute(table.update().where(table.c.id == row_id).values(metadata=moved, indexed_at=None))
            if len(rows) < BATCH:
                break
            last = rows[-1][0]


def upgrade() -> None:
    _rewrite(MOVES)


def downgrade() -> None:
    _rewrite({new: old for old, new in MOVES.items()})
