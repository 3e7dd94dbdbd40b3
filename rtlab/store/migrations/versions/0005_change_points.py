"""change points: each case's tail summary (kept at ingest) and the change points found

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28 12:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('cases') as batch:
        batch.add_column(sa.Column('tail_samples', sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column('tail_first', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('tail_counts', sa.LargeBinary(), nullable=True))
    op.create_table(
        'change_points',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('board', sa.String(length=100), nullable=False),
        sa.Column('flavour', sa.String(length=100), nullable=False),
        sa.Column('scenario', sa.String(length=100), nullable=False),
        sa.Column('interval_us', sa.Integer(), nullable=False),
        sa.Column('ref_name', sa.String(length=255), nullable=False),
        sa.Column('last_before_case', sa.Integer(), nullable=False),
        sa.Column('first_after_case', sa.Integer(), nullable=False),
        sa.Column('good_commit', sa.String(length=64), nullable=True),
        sa.Column('bad_commit', sa.String(length=64), nullable=True),
        sa.Column('first_after_started', sa.DateTime(timezone=True), nullable=False),
        sa.Column('direction', sa.String(length=20), nullable=False),
        sa.Column('quantile', sa.Float(), nullable=False),
        sa.Column('before_us', sa.Float(), nullable=False),
        sa.Column('after_us', sa.Float(), nullable=False),
        sa.Column('ci_low_us', sa.Float(), nullable=False),
        sa.Column('ci_high_us', sa.Float(), nullable=False),
        sa.Column('p_value', sa.Float(), nullable=False),
        sa.Column('steps', sa.Integer(), nullable=False),
        sa.Column('found_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('accepted', sa.Text(), nullable=True),
        sa.Column('accepted_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('bisection', sa.String(length=300), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('board', 'flavour', 'scenario', 'interval_us', 'ref_name',
                            'first_after_case', name='uq_change_points_series_case'),
    )
    op.create_index('ix_change_points_series', 'change_points',
                    ['board', 'flavour', 'scenario', 'interval_us'])
    _backfill()


def _backfill() -> None:
    """The tail summary of every case stored before, from its CPUs' histograms, as ingest
    keeps it now; by the tables' columns (not the models: they may describe a later
    revision), a page of cases at a time (a lab's store holds hundreds of thousands)."""
    from rtlab.store.ingest import tail_summary
    from rtlab.store.models import CpuResult

    connection = op.get_bind()
    cases, cpus = sa.table('cases', sa.column('id'), sa.column('tail_samples'),
                           sa.column('tail_first'), sa.column('tail_counts')), sa.table(
        'cpu_results', sa.column('case_id'), sa.column('position'), sa.column('samples'),
        sa.column('no_wakeup'), sa.column('gated'), sa.column('overflows'),
        sa.column('max_us'), sa.column('histogram'))
    last = 0
    while True:
        ids = [row[0] for row in connection.execute(
            sa.select(cases.c.id).where(cases.c.id > last).order_by(cases.c.id).limit(500))]
        if not ids:
            break
        found: dict[int, list[CpuResult]] = {}
        for row in connection.execute(sa.select(cpus).where(cpus.c.case_id.in_(ids))
                                      .order_by(cpus.c.case_id, cpus.c.position)):
            found.setdefault(row.case_id, []).append(CpuResult(
                samples=row.samples, no_wakeup=bool(row.no_wakeup), gated=row.gated,
                overflows=row.overflows, max_us=row.max_us, histogram=row.histogram))
        for case_id, rows in found.items():
            summary = tail_summary(rows)
            if summary is not None:
                connection.execute(sa.update(cases).where(cases.c.id == case_id).values(
                    tail_samples=summary.samples, tail_first=summary.first,
                    tail_counts=summary.to_bytes()))
        last = ids[-1]


def downgrade() -> None:
    op.drop_index('ix_change_points_series', table_name='change_points')
    op.drop_table('change_points')
    with op.batch_alter_table('cases') as batch:
        batch.drop_column('tail_counts')
        batch.drop_column('tail_first')
        batch.drop_column('tail_samples')
