"""access control, once switched on, is a flag of its own (no longer derived from key rows)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-08
"""
from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table('access_control',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('switched_on_at', sa.DateTime(), nullable=False),
    sa.Column('reason', sa.String(length=200), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    # A store that holds keys (revoked ones too) had access control on: it stays on.
    keys = op.get_bind().execute(sa.text("SELECT COUNT(*) FROM api_keys")).scalar()
    if keys:
        now = datetime.now(timezone.utc).replace(tzinfo=None)  # naive UTC, as UTCDateTime stores it
        op.execute(table.insert().values(id=1, switched_on_at=now, reason="API keys existed (migration 0006)"))


def downgrade() -> None:
    op.drop_table('access_control')
