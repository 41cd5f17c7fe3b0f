#!/bin/bash
# The official PostgreSQL image's first start, as compose.yaml uses it, from Debian's packages: an empty
# $PGDATA becomes a cluster whose superuser $POSTGRES_USER (default postgres) logs in over TCP with the
# password $POSTGRES_PASSWORD (scram-sha-256; over the local socket without one), with the database
# $POSTGRES_DB (default: the user's name). Then, and on every later start, the server runs in the
# foreground on every interface; arguments are passed on to it (-c name=value). PGPORT sets the port.
set -euo pipefail

: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD for the superuser}"
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
export PGDATA="${PGDATA:-/var/lib/postgresql/data}"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT  # a failed first start leaves no password behind
  printf '%s\n' "$POSTGRES_PASSWORD" > "$work/password"
  initdb --username="$user" --pwfile="$work/password" --auth-local=trust --auth-host=scram-sha-256 \
         --encoding=UTF8 >/dev/null
  rm -f "$work/password"
  printf 'host all all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then  # through a socket of its own while nothing else can connect
    pg_ctl --silent --wait -o "-c listen_addresses='' -k $work" start
    psql --host="$work" --username="$user" --dbname=postgres --quiet -v ON_ERROR_STOP=1 -v db="$db" \
         <<< 'CREATE DATABASE :"db";'
    pg_ctl --silent --wait -m fast stop
  fi
  rm -rf "$work"
  trap - EXIT
  echo "postgres-entrypoint: made a cluster in $PGDATA (user $user, database $db)"
fi
exec postgres -c listen_addresses='*' "$@"
