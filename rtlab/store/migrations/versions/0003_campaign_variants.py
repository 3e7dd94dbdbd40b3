"""campaign variants: which kernel variant a run measured (its name, kernel flavour,
extra fragments, the thresholds flavour it was judged by) and which campaign execution
it belongs to

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 20:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runs') as batch:
        batch.add_column(sa.Column('campaign', sa.String(length=100), nullable=True))
        batch.add_column(sa.Column('campaign_run', sa.String(length=200), nullable=True))
        batch.add_column(sa.Column('variant', sa.String(length=100), nullable=True))
        batch.add_column(sa.Column('kernel_flavour', sa.String(length=100), nullable=True))
        batch.add_column(sa.Column('fragments', sa.JSON(), nullable=True))
        batch.add_column(sa.Column('thresholds_flavour', sa.String(length=100),
                                   nullable=True))
    op.create_index(op.f('ix_runs_campaign_run'), 'runs', ['campaign', 'campaign_run'],
                    unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_runs_campaign_run'), table_name='runs')
    with op.batch_alter_table('runs') as batch:
        for column in ('thresholds_flavour', 'fragments', 'kernel_flavour', 'variant',
                       'campaign_run', 'campaign'):
            batch.drop_column(column)
