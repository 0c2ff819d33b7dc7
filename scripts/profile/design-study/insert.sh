#!/usr/bin/env bash
# insert.sh MODE: 100,000 jobs into the baseline schema in 20 statements of
# 5,000, on the private cluster of run.sh (PGPORT, PGDATA): `conflict`
# (INSERT ... ON CONFLICT (id) DO NOTHING, what an enqueue does so that a
# known id is a no-op), `plain` (the same INSERT without ON CONFLICT, safe
# only for ids nobody else can have chosen) or `copy` (COPY of CSV). Prints
# the cluster's CPU and WAL per job and jobs/s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
m=$1
P=(psql -h 127.0.0.1 -p "${PGPORT:-5434}" -U postgres -X -q -v ON_ERROR_STOP=1 -d postgres)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
{ echo "DROP SCHEMA IF EXISTS ins CASCADE; CREATE SCHEMA ins;"
  sed "s/__SCHEMA__/ins/g" "$here/../../../crates/postgres/migrations/V1__baseline.sql"; } | "${P[@]}" -f - >/dev/null 2>&1
"${P[@]}" -c "DROP SEQUENCE IF EXISTS public.idseq; CREATE SEQUENCE public.idseq; CHECKPOINT" >/dev/null
cols="id, queue, kind, state, payload, priority, attempts, max_attempts, available_at, created_at, updated_at"
rows="SELECT 'j' || lpad(nextval('public.idseq')::text, 12, '0'), 'default', 'noop', 'ready', '{}', 0, 0, 25, now(), now(), now() FROM generate_series(1, 5000)"
for b in $(seq 0 19); do
  case $m in
    conflict) echo "INSERT INTO ins.errand_jobs ($cols) $rows ON CONFLICT (id) DO NOTHING;" ;;
    plain) echo "INSERT INTO ins.errand_jobs ($cols) $rows;" ;;
    copy)
      python3 -c "
import sys, datetime
now = datetime.datetime.now(datetime.timezone.utc).isoformat()
b = int(sys.argv[1])
for i in range(5000):
    print(f'c{b * 5000 + i:012d},default,noop,ready,{{}},0,0,25,{now},{now},{now}')" "$b" > "$work/$b.csv"
      echo "\\copy ins.errand_jobs ($cols) FROM $work/$b.csv WITH (FORMAT csv)" ;;
    *) echo "insert.sh: MODE is conflict, plain or copy" >&2; exit 2 ;;
  esac
done > "$work/script.sql"
cpu() { python3 "$here/cpu.py"; }
lsn() { "${P[@]}" -Atc "SELECT pg_current_wal_lsn()"; }
c0=$(cpu); l0=$(lsn); t0=$(date +%s.%N)
"${P[@]}" -f "$work/script.sql"
t1=$(date +%s.%N); c1=$(cpu); l1=$(lsn)
w=$("${P[@]}" -Atc "SELECT pg_wal_lsn_diff('$l1', '$l0')")
n=$("${P[@]}" -Atc "SELECT count(*) FROM ins.errand_jobs")
python3 -c "import json; print(json.dumps({'mode': '$m', 'rows': $n, 'cpu_us': round(($c1 - $c0) * 10000 / 100000, 1), 'wal_b': round($w / 100000), 'jobs_s': round(100000 / ($t1 - $t0))}))"
