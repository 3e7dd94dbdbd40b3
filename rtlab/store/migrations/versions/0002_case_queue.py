"""case queue: the cases of a plan that several places share, and the places on it; the
tier a case ran in

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25 15:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('cases') as batch:
        batch.add_column(sa.Column('tier', sa.String(length=50), nullable=True))
    op.create_table('queued_cases',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('plan', sa.String(length=200), nullable=False),
    sa.Column('name', sa.String(length=300), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=12), nullable=False),
    sa.Column('place', sa.String(length=100), nullable=True),
    sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('verdict', sa.String(length=10), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('plan', 'name', name='uq_queued_cases_plan_name')
    )
    op.create_index(op.f('ix_queued_cases_plan'), 'queued_cases', ['plan'], unique=False)
    op.create_table('plan_workers',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('plan', sa.String(length=200), nullable=False),
    sa.Column('place', sa.String(length=100), nullable=False),
    sa.Column('state', sa.String(length=12), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('updated', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('plan', 'place', name='uq_plan_workers_plan_place')
    )
    op.create_index(op.f('ix_plan_workers_plan'), 'plan_workers', ['plan'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('cases') as batch:
        batch.drop_column('tier')
    op.drop_index(op.f('ix_plan_workers_plan'), table_name='plan_workers')
    op.drop_table('plan_workers')
    op.drop_index(op.f('ix_queued_cases_plan'), table_name='queued_cases')
    op.drop_table('queued_cases')
