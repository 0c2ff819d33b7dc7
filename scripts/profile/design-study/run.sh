#!/usr/bin/env bash
# run.sh DESIGN [JOBS] (IDS=random for ids in no order): on a private PostgreSQL cluster (PGPORT, default
# 5434; PGDATA its data directory, for cpu.py), insert JOBS jobs (default
# 100,000, in statements of 5,000), then drain them with one pgbench client
# running claim 100 + acknowledge 100 cycles shaped like Errand's
# (claim_ready.sql resuming at its cursor, complete_many.sql). Prints one
# JSON line: the cluster's CPU per job (all its processes, from /proc), WAL
# bytes per job and jobs/s, for the insert and for the drain.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
d=$1; jobs=${2:-100000}
P=(psql -h 127.0.0.1 -p "${PGPORT:-5434}" -U postgres -X -q -v ON_ERROR_STOP=1 -d postgres)
"${P[@]}" -c "DROP SEQUENCE IF EXISTS public.idseq; CREATE SEQUENCE public.idseq" >/dev/null
# d0-d2 are the baseline schema (d1, d2 with one change each) and its
# statements; d3, d4 the narrow-hot-table design and its statements; d5 the
# baseline with the due order and leases in a table of their own, so that
# the claim and the acknowledgment are heap-only updates of the job. Each
# design's SQL is written out with its schema's name into a directory of
# its own.
sql=$(mktemp -d); trap 'rm -rf "$sql"' EXIT
case $d in
  d0|d1|d2)
    { echo "DROP SCHEMA IF EXISTS $d CASCADE; CREATE SCHEMA $d;"
      sed "s/__SCHEMA__/$d/g" "$here/../../../crates/postgres/migrations/V1__baseline.sql"
      if [ -f "$here/variant_$d.sql" ]; then cat "$here/variant_$d.sql"; fi; } > "$sql/setup.sql"
    kind=today ;;
  d5)
    { echo "DROP SCHEMA IF EXISTS $d CASCADE; CREATE SCHEMA $d;"
      sed "s/__SCHEMA__/$d/g" "$here/../../../crates/postgres/migrations/V1__baseline.sql"
      cat "$here/variant_$d.sql"; } > "$sql/setup.sql"
    kind=due ;;
  d3) sed "s/__S__/$d/g; s/__LISTING__/state <> 'running'/" "$here/setup_hot.sql" > "$sql/setup.sql"; kind=hot ;;
  d4) sed "s/__S__/$d/g; s/__LISTING__/state NOT IN ('running', 'done')/" "$here/setup_hot.sql" > "$sql/setup.sql"; kind=hot ;;
  *) echo "run.sh: no design $d (d0 to d5)" >&2; exit 2 ;;
esac
sed "s/__S__/$d/g" "$here/insert_$kind.sql" > "$sql/insert.sql"
# IDS=random: ids in no order (UUIDv4), as an application that brings its
# own may; by default they ascend, as Errand's UUIDv7 ids do.
if [ "${IDS:-}" = random ]; then
  sed -i "s/'j' || lpad(nextval('public.idseq')::text, 12, '0')/gen_random_uuid()::text/" "$sql/insert.sql"
fi
sed "s/__S__/$d/g" "$here/cycle_$kind.sql" > "$sql/cycle.sql"
"${P[@]}" -f "$sql/setup.sql" >/dev/null 2>&1
"${P[@]}" -c "CHECKPOINT" 
lsn() { "${P[@]}" -Atc "SELECT pg_current_wal_lsn()"; }
wal() { "${P[@]}" -Atc "SELECT pg_wal_lsn_diff('$2', '$1')"; }
c0=$(python3 "$here/cpu.py"); l0=$(lsn); t0=$(date +%s.%N)
/usr/lib/postgresql/15/bin/pgbench -h 127.0.0.1 -p "${PGPORT:-5434}" -U postgres -n -M prepared -c 1 -t $((jobs/5000)) -f "$sql/insert.sql" postgres >/dev/null 2>&1
t1=$(date +%s.%N); c1=$(python3 "$here/cpu.py"); l1=$(lsn)
"${P[@]}" -c "VACUUM ANALYZE" -c "CHECKPOINT"
c2=$(python3 "$here/cpu.py"); l2=$(lsn); t2=$(date +%s.%N)
/usr/lib/postgresql/15/bin/pgbench -h 127.0.0.1 -p "${PGPORT:-5434}" -U postgres -n -M prepared -c 1 -t $((jobs/100)) -D due=1970-01-01 -D cur=0 -f "$sql/cycle.sql" postgres > "${TMPDIR:-/tmp}/design-study-pgbench-$d.log" 2>&1
t3=$(date +%s.%N); c3=$(python3 "$here/cpu.py"); l3=$(lsn)
case $d in d3|d4) left=$("${P[@]}" -Atc "SELECT count(*) FROM $d.runs WHERE state <> 'done'");; *) left=$("${P[@]}" -Atc "SELECT count(*) FROM $d.errand_jobs WHERE state <> 'done'");; esac
python3 - "$d" "$jobs" "$c0" "$c1" "$c2" "$c3" "$(wal $l0 $l1)" "$(wal $l2 $l3)" "$t0" "$t1" "$t2" "$t3" "$left" <<'PY'
import sys, json
d, jobs, c0, c1, c2, c3, wi, wd, t0, t1, t2, t3, left = sys.argv[1:]
jobs = int(jobs)
us = lambda a, b: (int(b) - int(a)) * 10000 / jobs  # ticks are 10 ms
print(json.dumps({"design": d, "jobs": jobs, "left": int(left),
  "insert_cpu_us": round(us(c0, c1), 2), "insert_wal_b": round(int(wi) / jobs), "insert_jobs_s": round(jobs / (float(t1) - float(t0))),
  "drain_cpu_us": round(us(c2, c3), 2), "drain_wal_b": round(int(wd) / jobs), "drain_jobs_s": round(jobs / (float(t3) - float(t2)))}))
PY
