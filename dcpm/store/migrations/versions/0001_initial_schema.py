"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""
import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('user_id', sa.String(length=128), nullable=False),
    sa.Column('at', sa.DateTime(), nullable=False),
    sa.Column('action', sa.String(length=32), nullable=False),
    sa.Column('subject_kind', sa.String(length=16), nullable=False),
    sa.Column('subject_id', sa.String(length=36), nullable=False),
    sa.Column('request_id', sa.String(length=36), nullable=True),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_events_subject_id'), ['subject_id'], unique=False)
        batch_op.create_index('ix_events_user_time', ['user_id', 'at'], unique=False)

    op.create_table('users',
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('raw_inputs',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('user_id', sa.String(length=128), nullable=False),
    sa.Column('request_id', sa.String(length=36), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('session_id', sa.String(length=128), nullable=True),
    sa.Column('role', sa.String(length=32), nullable=False),
    sa.Column('speaker', sa.String(length=128), nullable=True),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('timestamp', sa.DateTime(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('metadata', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('indexed_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('raw_inputs', schema=None) as batch_op:
        batch_op.create_index('ix_raw_inputs_request', ['request_id'], unique=False)
        batch_op.create_index('ix_raw_inputs_status', ['status'], unique=False)
        batch_op.create_index('ix_raw_inputs_user_time', ['user_id', 'timestamp'], unique=False)

    op.create_table('items',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('user_id', sa.String(length=128), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('type', sa.String(length=64), nullable=True),
    sa.Column('topic', sa.String(length=64), nullable=True),
    sa.Column('salience', sa.Float(), nullable=False),
    sa.Column('event_time', sa.DateTime(), nullable=True),
    sa.Column('valid_from', sa.DateTime(), nullable=False),
    sa.Column('valid_to', sa.DateTime(), nullable=True),
    sa.Column('chain_id', sa.String(length=36), nullable=False),
    sa.Column('supersedes_id', sa.String(length=36), nullable=True),
    sa.Column('superseded_by_id', sa.String(length=36), nullable=True),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('source_raw_id', sa.String(length=36), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('metadata', sa.JSON(), nullable=False),
    sa.Column('indexed_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['source_raw_id'], ['raw_inputs.id'], ),
    sa.ForeignKeyConstraint(['superseded_by_id'], ['items.id'], ),
    sa.ForeignKeyConstraint(['supersedes_id'], ['items.id'], ),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('items', schema=None) as batch_op:
        batch_op.create_index('ix_items_chain', ['chain_id'], unique=False)
        batch_op.create_index('ix_items_user_kind', ['user_id', 'kind'], unique=False)

    op.create_table('item_revisions',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('item_id', sa.String(length=36), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('op', sa.String(length=16), nullable=False),
    sa.Column('raw_id', sa.String(length=36), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['items.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('item_revisions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_item_revisions_item_id'), ['item_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('item_revisions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_item_revisions_item_id'))

    op.drop_table('item_revisions')
    with op.batch_alter_table('items', schema=None) as batch_op:
        batch_op.drop_index('ix_items_user_kind')
        batch_op.drop_index('ix_items_chain')

    op.drop_table('items')
    with op.batch_alter_table('raw_inputs', schema=None) as batch_op:
        batch_op.drop_index('ix_raw_inputs_user_time')
        batch_op.drop_index('ix_raw_inputs_status')
        batch_op.drop_index('ix_raw_inputs_request')

    op.drop_table('raw_inputs')
    op.drop_table('users')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index('ix_events_user_time')
        batch_op.drop_index(batch_op.f('ix_events_subject_id'))

    op.drop_table('events')
