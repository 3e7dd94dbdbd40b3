"""case exposure: each case's pipeline and the flavour its run was judged as, kept on the
case, and one index that holds everything a kernel's exposure pools

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28 15:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

# the exposure's groups in the index's order, then what it adds up: the report reads the
# index alone, a board's part of it as one range
EXPOSURE_INDEX = ('board', 'kind', 'kernel_source', 'kernel_sha256', 'kernel_package',
                  'kernel_version', 'scenario', 'interval_us', 'flavour', 'judged_as',
                  'verdict', 'limit_max_us', 'run_id', 'pipeline_id', 'wakeups',
                  'duration_s', 'started')


def upgrade() -> None:
    with op.batch_alter_table('cases') as batch:
        batch.add_column(sa.Column('pipeline_id', sa.String(length=50), nullable=True))
        batch.add_column(sa.Column('judged_as', sa.String(length=100), nullable=True))
    # from each case's run, in one statement that SQLite and PostgreSQL both take
    cases = sa.table('cases', sa.column('run_id'), sa.column('pipeline_id'),
                     sa.column('judged_as'))
    runs = sa.table('runs', sa.column('id'), sa.column('pipeline_id'),
                    sa.column('thresholds_flavour'))
    op.get_bind().execute(sa.update(cases).values(
        pipeline_id=sa.select(runs.c.pipeline_id).where(runs.c.id == cases.c.run_id)
        .scalar_subquery(),
        judged_as=sa.select(runs.c.thresholds_flavour).where(runs.c.id == cases.c.run_id)
        .scalar_subquery()))
    op.create_index('ix_cases_exposure', 'cases', list(EXPOSURE_INDEX))


def downgrade() -> None:
    op.drop_index('ix_cases_exposure', table_name='cases')
    with op.batch_alter_table('cases') as batch:
        batch.drop_column('judged_as')
        batch.drop_column('pipeline_id')
