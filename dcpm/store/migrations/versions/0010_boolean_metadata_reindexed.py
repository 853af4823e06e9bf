"""memories with boolean metadata get their vectors rewritten, so search can filter on them

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04

The embedded index's binding reads a filter on True or False as one on 1 or 0, so a search filter
on a boolean metadata value never matched (listing did). Points now also keep their boolean
metadata values as keywords (dcpm.index.base.METADATA_BOOLEANS). Rows that hold a boolean value
are marked unindexed here; start-up repair rewrites their points with it.
"""
import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

TABLES = ('raw_inputs', 'items')
BATCH = 1000


def upgrade() -> None:
    bind = op.get_bind()
    for name in TABLES:
        table = sa.table(name, sa.column('id', sa.String), sa.column('metadata', sa.JSON),
                         sa.column('indexed_at', sa.DateTime))
        text = sa.cast(table.c.metadata, sa.Text)
        maybe = sa.or_(text.like('%true%'), text.like('%false%'))  # a cheap first cut; the loop decides
        last = ''
        while True:
            rows = bind.execute(sa.select(table.c.id, table.c.metadata).where(maybe, table.c.id > last)
                                .order_by(table.c.id).limit(BATCH)).all()
            stale = [row_id for row_id, metadata in rows
                     if isinstance(metadata, dict) and any(isinstance(v, bool) for v in metadata.values())]
            if stale:
                bind.execute(table.update().where(table.c.id.in_(stale)).values(indexed_at=None))
            if len(rows) < BATCH:
                break
            last = rows[-1][0]


def downgrade() -> None:
    pass  # the keyword copies are harmless to an older dcpm
