"""initial schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-23 14:30:22.281778
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_key', sa.String(length=200), nullable=False),
    sa.Column('place', sa.String(length=100), nullable=True),
    sa.Column('board', sa.String(length=100), nullable=False),
    sa.Column('flavour', sa.String(length=100), nullable=False),
    sa.Column('kernel_release', sa.String(length=200), nullable=True),
    sa.Column('kernel_version', sa.String(length=300), nullable=True),
    sa.Column('preemption', sa.String(length=50), nullable=True),
    sa.Column('realtime', sa.Boolean(), nullable=True),
    sa.Column('image_id', sa.String(length=100), nullable=True),
    sa.Column('sd_image_sha256', sa.String(length=64), nullable=True),
    sa.Column('pipeline_id', sa.String(length=50), nullable=True),
    sa.Column('job_id', sa.String(length=50), nullable=True),
    sa.Column('commit_sha', sa.String(length=64), nullable=True),
    sa.Column('ref_name', sa.String(length=255), nullable=True),
    sa.Column('merge_request_iid', sa.String(length=50), nullable=True),
    sa.Column('started', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished', sa.DateTime(timezone=True), nullable=True),
    sa.Column('ingested_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_key')
    )
    op.create_table('cases',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=300), nullable=False),
    sa.Column('node_id', sa.String(length=500), nullable=False),
    sa.Column('board', sa.String(length=100), nullable=False),
    sa.Column('flavour', sa.String(length=100), nullable=False),
    sa.Column('scenario', sa.String(length=100), nullable=True),
    sa.Column('interval_us', sa.Integer(), nullable=True),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('verdict', sa.String(length=10), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('started', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished', sa.DateTime(timezone=True), nullable=True),
    sa.Column('duration_s', sa.Integer(), nullable=True),
    sa.Column('record', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'name', 'started', name='uq_cases_run_name_started')
    )
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_cases_run_id'), ['run_id'], unique=False)
        batch_op.create_index('ix_cases_series',
                              ['board', 'flavour', 'scenario', 'interval_us', 'started'],
                              unique=False)

    op.create_table('case_thresholds',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('case_id', sa.Integer(), nullable=False),
    sa.Column('metric', sa.String(length=20), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('source', sa.String(length=300), nullable=True),
    sa.ForeignKeyConstraint(['case_id'], ['cases.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('case_thresholds', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_case_thresholds_case_id'), ['case_id'], unique=False)

    op.create_table('cpu_results',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('case_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('cpu', sa.Integer(), nullable=True),
    sa.Column('thread', sa.Integer(), nullable=True),
    sa.Column('samples', sa.BigInteger(), nullable=False),
    sa.Column('min_us', sa.Float(), nullable=True),
    sa.Column('avg_us', sa.Float(), nullable=True),
    sa.Column('max_us', sa.Float(), nullable=True),
    sa.Column('overflows', sa.BigInteger(), nullable=True),
    sa.Column('no_wakeup', sa.Boolean(), nullable=False),
    sa.Column('gated', sa.Boolean(), nullable=True),
    sa.Column('p50_us', sa.Float(), nullable=True),
    sa.Column('p99_us', sa.Float(), nullable=True),
    sa.Column('p99_9_us', sa.Float(), nullable=True),
    sa.Column('p99_99_us', sa.Float(), nullable=True),
    sa.Column('histogram_range_us', sa.Integer(), nullable=True),
    sa.Column('histogram', sa.LargeBinary(), nullable=True),
    sa.ForeignKeyConstraint(['case_id'], ['cases.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('cpu_results', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_cpu_results_case_id'), ['case_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('cpu_results', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_cpu_results_case_id'))

    op.drop_table('cpu_results')
    with op.batch_alter_table('case_thresholds', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_case_thresholds_case_id'))

    op.drop_table('case_thresholds')
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.drop_index('ix_cases_series')
        batch_op.drop_index(batch_op.f('ix_cases_run_id'))

    op.drop_table('cases')
    op.drop_table('runs')
