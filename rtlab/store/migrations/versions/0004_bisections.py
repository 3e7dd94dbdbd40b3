"""bisections: each ``rtlab bisect run`` and its steps

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27 08:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'bisections',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('bisection_key', sa.String(length=200), nullable=False),
        sa.Column('board', sa.String(length=100), nullable=False),
        sa.Column('flavour', sa.String(length=100), nullable=False),
        sa.Column('case_name', sa.String(length=100), nullable=False),
        sa.Column('good_commit', sa.String(length=64), nullable=False),
        sa.Column('bad_commit', sa.String(length=64), nullable=False),
        sa.Column('status', sa.String(length=30), nullable=False),
        sa.Column('culprit_commit', sa.String(length=64), nullable=True),
        sa.Column('culprit_option', sa.String(length=200), nullable=True),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('board_s', sa.Float(), nullable=False),
        sa.Column('started', sa.DateTime(timezone=True), nullable=False),
        sa.Column('result', sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('bisection_key'),
    )
    op.create_table(
        'bisection_steps',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('bisection_id', sa.Integer(), nullable=False),
        sa.Column('step', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=20), nullable=False),
        sa.Column('commit_sha', sa.String(length=64), nullable=False),
        sa.Column('options', sa.JSON(), nullable=False),
        sa.Column('outcome', sa.String(length=20), nullable=False),
        sa.Column('decided_by', sa.String(length=20), nullable=False),
        sa.Column('rounds', sa.Integer(), nullable=False),
        sa.Column('good_boots', sa.Integer(), nullable=False),
        sa.Column('step_boots', sa.Integer(), nullable=False),
        sa.Column('board_s', sa.Float(), nullable=False),
        sa.Column('confidence', sa.Float(), nullable=True),
        sa.Column('difference_us', sa.Float(), nullable=True),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(['bisection_id'], ['bisections.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('bisection_id', 'step'),
    )


def downgrade() -> None:
    op.drop_table('bisection_steps')
    op.drop_table('bisections')
