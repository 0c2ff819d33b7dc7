#!/usr/bin/env bash
# Errand beside its peers and floors, measured in one run: every round runs
# each workload once, Errand and peer interleaved, so that the machine's
# load moves both alike. Only ratios taken in one such run mean anything on
# a shared machine.
#
# Each round: on PostgreSQL, Errand's burn-down, River's and
# graphile-worker's, Errand's bulk enqueue, the raw SQL floor (pgbench),
# Errand's workflow drain, its idle latency and its retry-heavy drain; on
# SQLite, Errand's burn-down, the SQLite floor and Errand's workflow drain.
#
# Usage: scripts/bench-peers.sh [ROUNDS (3)] [JOBS (100000)]
#
# It installs nothing. It needs:
#   - an errand release binary: ERRAND_BIN (default target/release/errand,
#     from `cargo build --release -p errand-cli`);
#   - psql and pgbench: PGBIN (default /usr/lib/postgresql/15/bin);
#   - a PostgreSQL cluster: PGBASE, its URL without a database (default
#     postgres://postgres@127.0.0.1:5432). The script creates and drops the
#     databases errand_peers, gw_peers, river_peers and rawsql_peers there;
#   - python3, for the SQLite floor (its sqlite3 module; the line it
#     prints names the SQLite version) and the summary;
#   - for graphile-worker (skipped, with a message, without it): Node.js and
#     NODE_PATH naming a node_modules that holds graphile-worker 0.17.3 and
#     pg, made once with
#       mkdir -p /tmp/peer-node && cd /tmp/peer-node && npm init -y && npm i graphile-worker@0.17.3 pg
#   - for River (skipped, with a message, without it): the riverqueue
#     binary of River for Rust 0.3.0, RIVERQUEUE (default
#     /tmp/peer-cargo/bin/riverqueue), built once (about 6 minutes on two
#     cores) with
#       CARGO_TARGET_DIR=/tmp/peer-target cargo install riverqueue-cli --version 0.3.0 --locked --root /tmp/peer-cargo
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

river=${RIVERQUEUE:-/tmp/peer-cargo/bin/riverqueue}
rv=yes
if [ ! -x "$river" ]; then
  rv=no; echo "bench-peers: no riverqueue binary at $river: River is skipped (see the top of this script, or set RIVERQUEUE)" >&2
fi

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

sqlite_floor() { # round
  local dir; dir=$(mktemp -d)
  python3 "$here/peers/sqlite/floor.py" "$dir/floor.db" "$jobs" | keep "$1" "sqlite-floor"
  rm -rf "$dir"
}

river() { # round
  [ "$rv" = yes ] || return 0
  local url=$base/river_peers text line
  "${psql[@]}" "$base/postgres" -c "DROP DATABASE IF EXISTS river_peers WITH (FORCE)" -c "CREATE DATABASE river_peers"
  "$river" migrate-up --database-url "$url" >/dev/null
  # River's bench inserts its jobs (untimed, in batches of 5,000), starts
  # its client and times from the client's being ready to the last job
  # worked: its last line gives that drain's jobs per second, the figure
  # Errand's burn-down is compared with. Its event buffer holds --backlog
  # events: as many as jobs, or it reports 'receiver lagged'.
  text=$("$river" bench --database-url "$url" -n "$jobs" --backlog "$jobs" 2>&1) || fail "riverqueue bench failed: $text"
  line=$(grep 'total jobs worked' <<<"$text" | tail -n 1)
  [ -n "$line" ] || fail "riverqueue bench printed no 'total jobs worked' line: $text"
  python3 - "$line" "$jobs" "$("$pgbin/psql" -X -Atq "$url" -c "SELECT count(*) FROM river_job WHERE state <> 'completed'")" <<'PY' | keep "$1" "river-burn-down"
import json, re, sys
line, jobs, left = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
worked = re.search(r"total jobs worked \[\s*(\d+)\s*\]", line)
rate = re.search(r"overall job/sec \[\s*([\d.]+)\s*\]", line)
if not (worked and rate):
    sys.exit(f"bench-peers: cannot read River's line: {line}")
print(json.dumps({"peer": "River", "workload": "burn-down", "jobs": int(worked.group(1)),
                  "jobs_per_sec": round(float(rate.group(1))), "jobs_left": left, "line": line.strip()}))
PY
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
  river "$round"
  graphile "$round"
  errand_pg "$round" enqueue enqueue --batch 5000 --jobs "$jobs"
  rawsql "$round" 2
  errand_pg "$round" workflow workflow --jobs "$jobs"
  errand_pg "$round" latency latency
  errand_pg "$round" retry-heavy retry-heavy --jobs "$jobs"
  errand_sqlite "$round" burn-down burn-down --jobs "$jobs"
  sqlite_floor "$round"
  errand_sqlite "$round" workflow workflow --jobs "$jobs"
done
for db in errand_peers rawsql_peers gw_peers river_peers; do
  "${psql[@]}" "$base/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
done
python3 "$here/peers/summary.py" "$out"
