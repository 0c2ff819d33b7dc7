#!/usr/bin/env bash
# What counting every queue whole costs a drain: `errand bench burn-down`
# alone, then with `errand stats --count` run every second beside it (sixty
# times what the running services do), interleaved, ROUNDS times.
#
#   cargo build --release -p errand-cli
#   scripts/bench-count-ab.sh sqlite|postgres [JOBS (1000000)] [ROUNDS (2)]
#
# SQLite runs on a new file in $TMPDIR; PostgreSQL on a scratch schema of
# $PG (default postgres://postgres@127.0.0.1:5432/postgres), dropped first.
set -euo pipefail
backend=${1:?sqlite or postgres}
jobs=${2:-1000000}
rounds=${3:-2}
B=${B:-target/release/errand}
PG=${PG:-postgres://postgres@127.0.0.1:5432/postgres}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for round in $(seq 1 "$rounds"); do
  for mode in plain counting; do
    if [ "$backend" = sqlite ]; then
      db=(--db "$dir/ab.db")
      rm -f "$dir"/ab.db*
    else
      db=(--db "$PG" --schema count_ab)
      psql "$PG" -qc 'DROP SCHEMA IF EXISTS count_ab CASCADE' 2>/dev/null
    fi
    "$B" "${db[@]}" bench burn-down --jobs "$jobs" --json >"$dir/out.json" 2>/dev/null &
    pid=$!
    counts=0
    if [ "$mode" = counting ]; then
      while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        if "$B" "${db[@]}" stats --count --json >/dev/null 2>&1; then
          counts=$((counts + 1))
        fi
      done
    fi
    wait "$pid"
    rate=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs_per_sec"]))' "$dir/out.json")
    echo "$backend round $round $mode: $rate jobs/s ($counts counts beside it)"
  done
done
if [ "$backend" != sqlite ]; then
  psql "$PG" -qc 'DROP SCHEMA IF EXISTS count_ab CASCADE' 2>/dev/null
fi
