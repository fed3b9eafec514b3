"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-12-02 11:37:38.249460
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('agents',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('kubeconfig_path', sa.Text(), nullable=True),
    sa.Column('kube_context', sa.String(length=255), nullable=True),
    sa.Column('in_cluster', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('last_contact_at', sa.DateTime(), nullable=True),
    sa.Column('connection_state', sa.String(length=16), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('scheduler_leases',
    sa.Column('name', sa.String(length=32), nullable=False),
    sa.Column('holder', sa.String(length=128), nullable=False),
    sa.Column('expires_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )
    op.create_table('users',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('password_hash', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('session_version', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('agent_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('agent_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=24), nullable=False),
    sa.Column('created_by', sa.String(length=64), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('last_used_at', sa.DateTime(), nullable=True),
    sa.Column('revoked_at', sa.DateTime(), nullable=True),
    sa.Column('revoked_by', sa.String(length=64), nullable=True),
    sa.ForeignKeyConstraint(['agent_id'], ['agents.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('digest')
    )
    with op.batch_alter_table('agent_tokens', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_agent_tokens_agent_id'), ['agent_id'], unique=False)
        batch_op.create_index('uq_agent_tokens_active_name', ['agent_id', 'name'], unique=True, sqlite_where=sa.text('revoked_at IS NULL'), postgresql_where=sa.text('revoked_at IS NULL'))

    op.create_table('events',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('agent_id', sa.Integer(), nullable=False),
    sa.Column('type', sa.String(length=40), nullable=False),
    sa.Column('category', sa.String(length=16), nullable=False),
    sa.Column('level', sa.String(length=8), nullable=False),
    sa.Column('happened_at', sa.DateTime(), nullable=False),
    sa.Column('recorded_at', sa.DateTime(), nullable=False),
    sa.Column('user_name', sa.String(length=64), nullable=True),
    sa.Column('token_id', sa.Integer(), nullable=True),
    sa.Column('token_name', sa.String(length=64), nullable=True),
    sa.Column('commit_sha', sa.String(length=64), nullable=True),
    sa.Column('project', sa.String(length=255), nullable=True),
    sa.Column('message', sa.Text(), nullable=True),
    sa.Column('link', sa.Text(), nullable=True),
    sa.Column('details', sa.JSON(), nullable=True),
    sa.Column('dedupe_key', sa.String(length=400), nullable=True),
    sa.ForeignKeyConstraint(['agent_id'], ['agents.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sqlite_autoincrement=True,
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index('ix_events_agent_id', ['agent_id', 'id'], unique=False)
        batch_op.create_index('ix_events_feed', ['agent_id', 'happened_at', 'id'], unique=False)
        batch_op.create_index('ix_events_happened_at', ['happened_at'], unique=False)
        batch_op.create_index('uq_events_dedupe', ['agent_id', 'dedupe_key'], unique=True)

    op.create_table('personal_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=24), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('last_used_at', sa.DateTime(), nullable=True),
    sa.Column('revoked_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('digest')
    )
    with op.batch_alter_table('personal_tokens', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_personal_tokens_user_id'), ['user_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('personal_tokens', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_personal_tokens_user_id'))

    op.drop_table('personal_tokens')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index('uq_events_dedupe')
        batch_op.drop_index('ix_events_happened_at')
        batch_op.drop_index('ix_events_feed')
        batch_op.drop_index('ix_events_agent_id')

    op.drop_table('events')
    with op.batch_alter_table('agent_tokens', schema=None) as batch_op:
        batch_op.drop_index('uq_agent_tokens_active_name', sqlite_where=sa.text('revoked_at IS NULL'), postgresql_where=sa.text('revoked_at IS NULL'))
        batch_op.drop_index(batch_op.f('ix_agent_tokens_agent_id'))

    op.drop_table('agent_tokens')
    op.drop_table('users')
    op.drop_table('scheduler_leases')
    op.drop_table('agents')
