#!/usr/bin/env bash
# The production layout on one machine: a Prefect server on PostgreSQL, a process work pool with a
# worker, the deployments of deployments/prefect.yaml, and a Dask cluster for the flows' tasks.
#
#   deployments/production.sh start     # install what is missing, start everything, deploy
#   deployments/production.sh status    # what runs, with its pid
#   deployments/production.sh stop      # stop what start started: worker first, server, then PostgreSQL
#
# Then run a deployment with its tasks on the Dask cluster, e.g.
#   PREFECT_API_URL=http://127.0.0.1:4200/api .venv/bin/prefect deployment run evaluate/eval \
#       --param dataset=faq-b --param runner=dask --param dask_address=tcp://127.0.0.1:8786
#
# Everything it starts records its pid and log under .prod/ (git-ignored); PostgreSQL keeps its data in
# its own cluster ("hifirag", Debian's pg_createcluster) on port $HIFIRAG_PG_PORT, apart from any
# other cluster on the machine. The database password is generated once into .prod/pg-password
# (mode 600) and only ever passed in the server's environment. Settings (environment):
#   HIFIRAG_PG_PORT (5433)  PREFECT_PORT (4200)  DASK_PORT (8786)  DASK_WORKERS (2)  DASK_THREADS (2)
#   HIFIRAG_DATA_ROOT (warehouse/data): every worker and Dask worker must reach it at this same path.
#   SERVICE_HOST (127.0.0.1)  SERVICE_PORT (5010)  SERVICE_PROFILE (offline)  SERVICE_CONCURRENCY (4)
#   (the service reads the keys its profile needs from this script's environment)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="$ROOT/.prod"
BIN="$ROOT/.venv/bin"
PG_PORT="${HIFIRAG_PG_PORT:-5433}"
PREFECT_PORT="${PREFECT_PORT:-4200}"
DASK_PORT="${DASK_PORT:-8786}"
DASK_WORKERS="${DASK_WORKERS:-2}"
DASK_THREADS="${DASK_THREADS:-2}"
DATA_ROOT="${HIFIRAG_DATA_ROOT:-$ROOT/warehouse/data}"
SERVICE_HOST="${SERVICE_HOST:-127.0.0.1}"
SERVICE_PORT="${SERVICE_PORT:-5010}"
SERVICE_PROFILE="${SERVICE_PROFILE:-offline}"
SERVICE_CONCURRENCY="${SERVICE_CONCURRENCY:-4}"
API_URL="http://127.0.0.1:$PREFECT_PORT/api"
CLUSTER=hifirag

say() { printf '[production] %s\n' "$*"; }

pg_version() {  # the newest installed PostgreSQL server (the client alone has no bin/postgres)
  local v
  for v in $(ls /usr/lib/postgresql 2>/dev/null | sort -rn); do
    if [ -x "/usr/lib/postgresql/$v/bin/postgres" ]; then echo "$v"; return; fi
  done
}

as_postgres() { runuser -u postgres -- "$@"; }

ensure_postgresql() {
  if [ -z "$(pg_version)" ] || ! command -v pg_createcluster >/dev/null; then
    say "installing Debian's postgresql"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  fi
  local version; version="$(pg_version)"
  if ! pg_lsclusters -h | awk '{print $2}' | grep -qx "$CLUSTER"; then
    say "creating PostgreSQL $version cluster '$CLUSTER' on port $PG_PORT"
    pg_createcluster "$version" "$CLUSTER" --port "$PG_PORT" >/dev/null
  fi
  if pg_lsclusters -h | awk -v c="$CLUSTER" '$2 == c {print $4}' | grep -qx online; then
    say "PostgreSQL cluster '$CLUSTER' already running"
  else
    pg_ctlcluster "$version" "$CLUSTER" start
    echo "$version" > "$STATE/pg-started"  # stop ends only a cluster this script started
    say "PostgreSQL $version cluster '$CLUSTER' started on port $PG_PORT"
  fi
  if [ ! -s "$STATE/pg-password" ]; then
    (umask 077; "$BIN/python" -c 'import secrets; print(secrets.token_urlsafe(24))' > "$STATE/pg-password")
  fi
  local password; password="$(cat "$STATE/pg-password")"
  # the password travels on stdin, never on a command line or in a log
  as_postgres psql -q -p "$PG_PORT" -v ON_ERROR_STOP=1 -d postgres >/dev/null <<SQL
\set pw '$password'
SELECT format('CREATE ROLE hifirag LOGIN PASSWORD %L', :'pw') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'hifirag') \gexec
SELECT format('ALTER ROLE hifirag PASSWORD %L', :'pw') \gexec
SELECT 'CREATE DATABASE prefect OWNER hifirag' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'prefect') \gexec
SQL
}

running() { [ -s "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

launch() {  # name, then the command; its own session, so stop can end the whole process group
  local name="$1"; shift
  if running "$name"; then say "$name already running (pid $(cat "$STATE/$name.pid"))"; return; fi
  setsid "$@" >"$STATE/$name.log" 2>&1 < /dev/null &
  echo $! > "$STATE/$name.pid"
  say "$name started (pid $!, log .prod/$name.log)"
}

wait_for() {  # what, a test command, seconds
  local what="$1" test="$2" deadline=$((SECONDS + $3))
  until eval "$test" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then say "$what did not come up; see .prod/*.log"; exit 1; fi
    sleep 1
  done
  say "$what is up"
}

start() {
  mkdir -p "$STATE" "$DATA_ROOT"
  [ -x "$BIN/prefect" ] || make -C "$ROOT" setup
  ensure_postgresql
  local password; password="$(cat "$STATE/pg-password")"
  export PREFECT_SERVER_ANALYTICS_ENABLED=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  PREFECT_HOME="$STATE/prefect-server" \
  PREFECT_API_DATABASE_CONNECTION_URL="postgresql+asyncpg://hifirag:$password@127.0.0.1:$PG_PORT/prefect" \
    launch prefect-server "$BIN/prefect" server start --host 127.0.0.1 --port "$PREFECT_PORT"
  wait_for "the Prefect server ($API_URL)" \
    "$BIN/python -c \"import httpx, sys; sys.exit(httpx.get('$API_URL/health').status_code != 200)\"" 180

  export PREFECT_API_URL="$API_URL" PREFECT_HOME="$STATE/prefect-client"
  export HIFIRAG_DATA_ROOT="$DATA_ROOT" PREFECT_RESULTS_LOCAL_STORAGE_PATH="$DATA_ROOT/cache/prefect-results"
  launch dask-scheduler "$BIN/dask" scheduler --host 127.0.0.1 --port "$DASK_PORT" --no-dashboard
  wait_for "the Dask scheduler (tcp://127.0.0.1:$DASK_PORT)" "(exec 3<>/dev/tcp/127.0.0.1/$DASK_PORT)" 60
  (cd "$ROOT" && launch dask-workers "$BIN/dask" worker "tcp://127.0.0.1:$DASK_PORT" --nworkers "$DASK_WORKERS" \
    --nthreads "$DASK_THREADS" --no-dashboard)

  (cd "$ROOT" && "$BIN/prefect" work-pool inspect hifirag >/dev/null 2>&1) \
    || (cd "$ROOT" && "$BIN/prefect" work-pool create hifirag --type process >/dev/null)
  say "work pool 'hifirag' ready"
  (cd "$ROOT" && "$BIN/prefect" --no-prompt deploy --all --prefect-file deployments/prefect.yaml) \
    > "$STATE/deploy.log" 2>&1 || { say "deploy failed; see .prod/deploy.log"; exit 1; }
  say "deployments applied ($(grep -o "Deployment '[^']*' successfully" "$STATE/deploy.log" | wc -l) of them)"
  (cd "$ROOT" && launch prefect-worker "$BIN/prefect" worker start --pool hifirag)
  # The MMU-RAGent API: its questions join the day's service run in the same warehouse, and its
  # stages share the flows' stage cache (PREFECT_RESULTS_LOCAL_STORAGE_PATH above).
  (cd "$ROOT" && launch hifirag-service "$BIN/hifirag" serve --host "$SERVICE_HOST" --port "$SERVICE_PORT" \
    --profile "$SERVICE_PROFILE" --concurrency "$SERVICE_CONCURRENCY")
  wait_for "the MMU-RAGent API (http://$SERVICE_HOST:$SERVICE_PORT)" \
    "$BIN/python -c \"import httpx, sys; sys.exit(httpx.get('http://$SERVICE_HOST:$SERVICE_PORT/health').status_code != 200)\"" 300
  say "UI: http://127.0.0.1:$PREFECT_PORT  API: $API_URL  Dask: tcp://127.0.0.1:$DASK_PORT  MMU-RAGent API: http://$SERVICE_HOST:$SERVICE_PORT"
}

stop_one() {  # name, seconds to wait after SIGTERM before SIGKILL
  local name="$1" grace="$2"
  if ! running "$name"; then rm -f "$STATE/$name.pid"; return; fi
  local pid; pid="$(cat "$STATE/$name.pid")"
  kill -TERM -- "-$pid" 2>/dev/null || true
  local deadline=$((SECONDS + grace))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL -- "-$pid" 2>/dev/null || true; fi
  rm -f "$STATE/$name.pid"
  say "$name stopped"
}

stop() {
  # The service first: it stops taking questions, and those in flight (at most its deadline, 570 s)
  # finish and are recorded while the Prefect server is still there.
  stop_one hifirag-service 630
  # Then the worker: it ignored its first SIGTERM for over 30 s once (measured), and it must not
  # pick up new flow runs while the server goes away.
  stop_one prefect-worker 20
  stop_one dask-workers 20
  stop_one dask-scheduler 10
  stop_one prefect-server 30
  if [ -s "$STATE/pg-started" ]; then
    pg_ctlcluster "$(cat "$STATE/pg-started")" "$CLUSTER" stop
    rm -f "$STATE/pg-started"
    say "PostgreSQL cluster '$CLUSTER' stopped"
  fi
}

status() {
  for name in prefect-server dask-scheduler dask-workers prefect-worker hifirag-service; do
    if running "$name"; then say "$name: running (pid $(cat "$STATE/$name.pid"))"; else say "$name: stopped"; fi
  done
  pg_lsclusters -h 2>/dev/null | awk -v c="$CLUSTER" '$2 == c {print "[production] postgresql " $1 "/" $2 ": " $4 " on port " $3}'
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
