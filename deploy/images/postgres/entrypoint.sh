#!/bin/sh
# The fleet's PostgreSQL: creates the cluster on the first start, then runs the server in
# the foreground.
#   POSTGRES_USER / POSTGRES_DB  the role and database the runners use (default archmax)
#   POSTGRES_PASSWORD            that role's password (required)
#   POSTGRES_PORT                the port (default 5432; the fleet runs on the host's
#                                network, so each service needs its own)
#   POSTGRES_LISTEN              the addresses to listen on (default 127.0.0.1)
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
user="${POSTGRES_USER:-archmax}"
db="${POSTGRES_DB:-archmax}"
port="${POSTGRES_PORT:-5432}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    secret="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$secret"
    # The superuser is the password's role; connections on the container's own socket are
    # trusted (only this script uses it), TCP ones need the password (scram-sha-256).
    initdb --pgdata="$PGDATA" --username="$user" --pwfile="$secret" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$secret"
    pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses='' -c unix_socket_directories=/tmp" --wait start >/dev/null
    if [ "$db" != "postgres" ]; then
        createdb --host=/tmp --username="$user" --owner="$user" "$db"
    fi
    pg_ctl --pgdata="$PGDATA" --wait stop >/dev/null
    echo "archmax-postgres: created the cluster with role $user and database $db"
fi
exec postgres -D "$PGDATA" -c listen_addresses="${POSTGRES_LISTEN:-127.0.0.1}" -p "$port" \
    -c unix_socket_directories=/tmp
