"""items keep their anticipations: situations in which they should come back (T-Mem)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04

Written by extraction beside each fact or identity item, one per line, and searched as a second
vector of the item (dcpm.index.anticipation). Items stored before have none.
"""
import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a store stamped back to an older revision (a rerun of the data migrations) may have it already
    if 'anticipations' in {c['name'] for c in sa.inspect(op.get_bind()).get_columns('items')}:
        return
    with op.batch_alter_table('items') as batch:
        batch.add_column(sa.Column('anticipations', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('items') as batch:
        batch.drop_column('anticipations')
