#!/bin/sh
# The first start makes the cluster (the user POSTGRES_USER with POSTGRES_PASSWORD, and the
# database POSTGRES_DB), as the upstream image does; every start then runs PostgreSQL in
# the foreground as the user postgres, so that the container ends when it does.
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    chown postgres "$pwfile"
    runuser -u postgres -- initdb --username="$user" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 -D "$PGDATA" >/dev/null
    rm -f "$pwfile"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    if [ "$db" != postgres ]; then
        runuser -u postgres -- pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
        runuser -u postgres -- psql -q -U "$user" -d postgres -c "CREATE DATABASE \"$db\""
        runuser -u postgres -- pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    fi
    echo "rtlab-results-db: cluster made in $PGDATA (user $user, database $db)"
fi
exec runuser -u postgres -- postgres -D "$PGDATA"
