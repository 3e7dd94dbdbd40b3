"""case figures: each case's judged CPUs' figures, kernel and max_us limit kept at ingest

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28 13:00:00
"""

import json

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

COLUMNS = (
    ('worst_max_us', sa.Float()), ('worst_avg_us', sa.Float()),
    ('worst_p99_9_us', sa.Float()), ('p99_9_past_range', sa.Integer()),
    ('range_us', sa.Integer()), ('overflows', sa.BigInteger()), ('wakeups', sa.BigInteger()),
    ('kernel_source', sa.String(length=20)), ('kernel_sha256', sa.String(length=64)),
    ('kernel_package', sa.String(length=200)), ('kernel_version', sa.String(length=200)),
    ('limit_max_us', sa.Float()), ('cpus_over_limit', sa.Integer()),
)


def upgrade() -> None:
    with op.batch_alter_table('cases') as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
    op.create_index('ix_runs_pipeline_id', 'runs', ['pipeline_id'])
    op.create_index('ix_runs_ref_name', 'runs', ['ref_name'])
    op.create_index('ix_cases_series_verdicts', 'cases',
                    ['board', 'flavour', 'scenario', 'interval_us', 'kind', 'verdict'])
    _backfill()
    # after the backfill: the index is built once, not updated row by row
    op.create_index('ix_cases_over_limit', 'cases', ['cpus_over_limit'])


def _backfill() -> None:
    """Every stored case's figures, kernel and limit, as ingest keeps them now; by the
    tables' columns (not the models: they may describe a later revision), a page of
    cases at a time."""
    from rtlab.store.ingest import kernel_fields, over_limit, worst_figures
    from rtlab.store.models import CpuResult

    connection = op.get_bind()
    cases = sa.table('cases', sa.column('id'), sa.column('record'),
                     *(sa.column(name) for name, _ in COLUMNS))
    cpus = sa.table('cpu_results', sa.column('case_id'), sa.column('samples'),
                    sa.column('no_wakeup'), sa.column('gated'), sa.column('max_us'),
                    sa.column('avg_us'), sa.column('p99_9_us'),
                    sa.column('histogram_range_us'), sa.column('overflows'))
    limits = sa.table('case_thresholds', sa.column('case_id'), sa.column('metric'),
                      sa.column('value'))
    last = 0
    while True:
        page = connection.execute(sa.select(cases.c.id, cases.c.record).where(
            cases.c.id > last).order_by(cases.c.id).limit(500)).all()
        if not page:
            break
        ids = [row.id for row in page]
        found: dict[int, list[CpuResult]] = {}
        for row in connection.execute(sa.select(cpus).where(cpus.c.case_id.in_(ids))):
            found.setdefault(row.case_id, []).append(CpuResult(
                samples=row.samples, no_wakeup=bool(row.no_wakeup), gated=row.gated,
                max_us=row.max_us, avg_us=row.avg_us, p99_9_us=row.p99_9_us,
                histogram_range_us=row.histogram_range_us, overflows=row.overflows))
        limit_of: dict[int, float] = {}
        for row in connection.execute(sa.select(limits.c.case_id, limits.c.value).where(
                limits.c.case_id.in_(ids), limits.c.metric == 'max_us')):
            limit_of[row.case_id] = max(limit_of.get(row.case_id, row.value), row.value)
        for row in page:
            record = row.record if not isinstance(row.record, str) else json.loads(row.record)
            values = {**worst_figures(found.get(row.id, [])),
                      **kernel_fields(record if isinstance(record, dict) else {}),
                      'limit_max_us': limit_of.get(row.id),
                      'cpus_over_limit': over_limit(found.get(row.id, []),
                                                    limit_of.get(row.id))}
            connection.execute(sa.update(cases).where(cases.c.id == row.id).values(**values))
        last = ids[-1]


def downgrade() -> None:
    op.drop_index('ix_cases_over_limit', table_name='cases')
    op.drop_index('ix_cases_series_verdicts', table_name='cases')
    op.drop_index('ix_runs_ref_name', table_name='runs')
    op.drop_index('ix_runs_pipeline_id', table_name='runs')
    with op.batch_alter_table('cases') as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
