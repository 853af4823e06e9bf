"""consolidation runs name the job that started them (was a key inside counts)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('consolidation_runs') as batch:
        batch.add_column(sa.Column('job_id', sa.String(length=36), nullable=True))
        batch.create_index('ix_consolidation_runs_job_id', ['job_id'])


def downgrade() -> None:
    with op.batch_alter_table('consolidation_runs') as batch:
        batch.drop_index('ix_consolidation_runs_job_id')
        batch.drop_column('job_id')
