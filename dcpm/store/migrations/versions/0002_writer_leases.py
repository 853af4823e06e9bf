"""writer: leases and retry backoff for pending raw inputs

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""
import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('leases',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('holder', sa.String(length=200), nullable=False),
    sa.Column('expires_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )
    with op.batch_alter_table('raw_inputs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('next_attempt_at', sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('raw_inputs', schema=None) as batch_op:
        batch_op.drop_column('next_attempt_at')
    op.drop_table('leases')
