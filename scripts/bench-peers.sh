#!/usr/bin/env bash
# Errand beside graphile-worker and the raw SQL floor, measured in one run:
# every round runs each workload once, Errand and peer interleaved, so that
# the machine's load moves both alike. Only ratios taken in one such run
# mean anything on a shared machine.
#
# Usage: scripts/bench-peers.sh [ROUNDS (3)] [JOBS (100000)]
#
# It installs nothing. It needs:
#   - an errand release binary: ERRAND_BIN (default target/release/errand,
#     from `cargo build --release -p errand-cli`);
#   - psql and pgbench: PGBIN (default /usr/lib/postgresql/15/bin);
#   - a PostgreSQL cluster: PGBASE, its URL without a database (default
#     postgres://postgres@127.0.0.1:5432). The script creates and drops the
#     databases errand_peers, gw_peers and rawsql_peers there;
#   - python3, for the summary;
#   - for graphile-worker (skipped, with a message, without it): Node.js and
#     NODE_PATH naming a node_modules that holds graphile-worker 0.17.3 and
#     pg, made once with
#       mkdir -p /tmp/peer-node && cd /tmp/peer-node && npm init -y && npm i graphile-worker@0.17.3 pg
#
# Each measurement is one JSON line in OUT (default
# /tmp/bench-peers-<time>.jsonl); the summary (median, min and max of each
# workload, and the ratios) is printed at the end and can be printed again
# with: python3 scripts/peers/summary.py OUT
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-3}
jobs=${2:-100000}
errand=${ERRAND_BIN:-$here/../target/release/errand}
pgbin=${PGBIN:-/usr/lib/postgresql/15/bin}
base=${PGBASE:-postgres://postgres@127.0.0.1:5432}
out=${OUT:-/tmp/bench-peers-$(date -u +%Y%m%dT%H%M%S).jsonl}

fail() { echo "bench-peers: $*" >&2; exit 2; }
[ -x "$errand" ] || fail "no errand binary at $errand: build one with cargo build --release -p errand-cli, or set ERRAND_BIN"
[ -x "$pgbin/pgbench" ] && [ -x "$pgbin/psql" ] || fail "psql and pgbench are not in $pgbin: set PGBIN"
command -v python3 >/dev/null || fail "python3 is needed for the summary"
psql=("$pgbin/psql" -X -q -v ON_ERROR_STOP=1)
"${psql[@]}" "$base/postgres" -c "SELECT 1" >/dev/null || fail "cannot connect to $base/postgres: set PGBASE"

gw=yes
if ! command -v node >/dev/null; then
  gw=no; echo "bench-peers: node not found: graphile-worker is skipped" >&2
elif ! NODE_PATH=${NODE_PATH:-} node -e 'require("graphile-worker"); require("pg")' 2>/dev/null; then
  gw=no; echo "bench-peers: graphile-worker or pg not found on NODE_PATH: graphile-worker is skipped (see the top of this script)" >&2
fi

for db in errand_peers rawsql_peers; do
  "${psql[@]}" "$base/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
done
"${psql[@]}" "$base/rawsql_peers" -f "$here/peers/rawsql/schema.sql" >/dev/null

# Tags a JSON line with the round and the workload's name, then keeps it.
keep() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d["round"]=int(sys.argv[1]); d["name"]=sys.argv[2]; print(json.dumps(d))' "$1" "$2" >>"$out"; }

errand_pg() { # round name workload args...
  local round=$1 name=$2; shift 2
  local schema="peers_${name//-/_}"
  "${psql[@]}" "$base/errand_peers" -c "DROP SCHEMA IF EXISTS $schema CASCADE" 2>/dev/null
  "${psql[@]}" "$base/errand_peers" -c "CHECKPOINT"
  "$errand" --db "$base/errand_peers" --schema "$schema" bench "$@" --json | keep "$round" "errand-pg-$name"
  "${psql[@]}" "$base/errand_peers" -c "DROP SCHEMA $schema CASCADE" 2>/dev/null
}

errand_sqlite() { # round name workload args...
  local round=$1 name=$2; shift 2
  local dir; dir=$(mktemp -d)
  "$errand" --db "$dir/bench.db" bench "$@" --json | keep "$round" "errand-sqlite-$name"
  rm -rf "$dir"
}

rawsql() { # round clients
  local round=$1 clients=$2
  "${psql[@]}" "$base/rawsql_peers" -v jobs="$jobs" -f "$here/peers/rawsql/reset.sql" >/dev/null
  local per=$(( jobs / 100 / clients ))
  local text
  text=$("$pgbin/pgbench" -n -M simple -c "$clients" -j "$clients" -t "$per" -f "$here/peers/rawsql/cycle.sql" "$base/rawsql_peers" 2>&1)
  local tps left
  tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$text")
  left=$("$pgbin/psql" -X -Atq "$base/rawsql_peers" -c "SELECT count(*) FROM floor_jobs WHERE state <> 'done'")
  [ -n "$tps" ] || fail "pgbench printed no tps: $text"
  printf '{"peer":"raw SQL","workload":"burn-down","clients":%s,"jobs":%s,"jobs_per_sec":%s,"jobs_left":%s}\n' \
    "$clients" "$jobs" "$(python3 -c "print(round($tps*100))")" "$left" | keep "$round" "rawsql-$clients"
}

graphile() { # round
  [ "$gw" = yes ] || return 0
  PGBASE=$base node "$here/peers/graphile-worker/burn.js" "$jobs" 2 24 | keep "$1" "gw-burn-down"
  PGBASE=$base node "$here/peers/graphile-worker/latency.js" 1000 | keep "$1" "gw-latency"
}

echo "bench-peers: $rounds rounds of $jobs jobs; results in $out" >&2
for round in $(seq 1 "$rounds"); do
  echo "bench-peers: round $round" >&2
  errand_pg "$round" burn-down burn-down --jobs "$jobs"
  graphile "$round"
  errand_pg "$round" enqueue enqueue --batch 5000 --jobs "$jobs"
  rawsql "$round" 2
  errand_pg "$round" latency latency
  errand_pg "$round" retry-heavy retry-heavy --jobs "$jobs"
  errand_sqlite "$round" burn-down burn-down --jobs "$jobs"
done
"${psql[@]}" "$base/postgres" -c "DROP DATABASE IF EXISTS errand_peers WITH (FORCE)" -c "DROP DATABASE IF EXISTS rawsql_peers WITH (FORCE)" \
  -c "DROP DATABASE IF EXISTS gw_peers WITH (FORCE)"
python3 "$here/peers/summary.py" "$out"
