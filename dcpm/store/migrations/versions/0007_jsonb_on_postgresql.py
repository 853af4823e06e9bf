"""JSON columns are jsonb on PostgreSQL (equality, containment, indexes); SQLite is unchanged

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-10
"""
from alembic import op
from sqlalchemy.dialects.postgresql import JSON, JSONB

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

COLUMNS = [('raw_inputs', 'metadata'), ('items', 'metadata'), ('events', 'detail'),
           ('consolidation_runs', 'counts'), ('consolidation_runs', 'llm_calls'), ('consolidation_runs', 'errors')]


def upgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    for table, column in COLUMNS:
        op.alter_column(table, column, type_=JSONB(), postgresql_using=f'"{column}"::jsonb')


def downgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    for table, column in COLUMNS:
        op.alter_column(table, column, type_=JSON(), postgresql_using=f'"{column}"::json')
