"""alembic's environment for the results store: always given a connection by
rtlab.store.migrate (never a URL from an ini file)."""

from alembic import context

from rtlab.store.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
