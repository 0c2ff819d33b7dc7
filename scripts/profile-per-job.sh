#!/usr/bin/env bash
# What one job costs Errand, workload by workload, on PostgreSQL and on
# SQLite: CPU, statements and round trips, execution time, row versions,
# index entries, WAL and bytes written, each divided by the jobs of the
# measured phase (the drain of burn-down, retry-heavy and workflow; the
# inserts of enqueue), and the statements that took most of the time.
#
# Usage: scripts/profile-per-job.sh [JOBS (100000)] [WORKLOAD...]
#   WORKLOADs are errand bench workloads; default: burn-down retry-heavy
#   workflow enqueue (enqueue runs as --batch 5000). BACKENDS="pg sqlite"
#   (the default) picks the backends.
#
# It installs nothing. It needs:
#   - an errand release binary: ERRAND_BIN (default target/release/errand);
#   - psql and pg_waldump: PGBIN (default /usr/lib/postgresql/15/bin);
#   - a PostgreSQL cluster on this machine, PGBASE (its URL without a
#     database; default postgres://postgres@127.0.0.1:5433), that loads
#     pg_stat_statements (shared_preload_libraries; with
#     pg_stat_statements.track = all, statements run inside functions and
#     triggers are counted too) and keeps its WAL long enough for
#     pg_waldump to read a whole run (wal_keep_size of a few GB). Its data
#     directory (PGDATA, default: what the server says) must be readable
#     by this script. The script creates and drops the database
#     errand_profile there. A private cluster for this, on port 5433:
#       initdb -D /tmp/pgprof -U postgres --auth=trust   (as a non-root user)
#       echo "port = 5433
#       shared_preload_libraries = 'pg_stat_statements'
#       pg_stat_statements.track = all
#       shared_buffers = 1GB
#       wal_keep_size = 8GB" >> /tmp/pgprof/postgresql.conf
#       pg_ctl -D /tmp/pgprof -l /tmp/pgprof/server.log start
#   - python3;
#   - for SQLite's statement count (skipped, with a message, without it):
#     gdb. Each SQLite workload then runs a second time under gdb, with one
#     breakpoint on the line of SQLite's sqlite3Step that only a statement's
#     first step runs (SQLITE_STEP_LINE, default 94372: the SQLite that
#     libsqlite3-sys 0.38.2 compiles in; the script checks that gdb puts it
#     in sqlite3Step), counted between the measured phase's start and end
#     (errand bench reads /proc/self/io at both). The breakpoint stops the
#     process at every statement, which slows it and can change how work is
#     batched: that run's commits per job are shown beside its count.
#
# Where the figures come from: errand bench's profile (CPU of the errand
# process, of the PostgreSQL server's processes and of the rest of the
# machine; pg_stat_statements calls and execution time; row versions from
# pg_stat_user_tables; bytes written from /proc/self/io on SQLite), and
# pg_waldump over the phase's WAL (its start and end are in the profile):
# heap records per table and B-tree entries written per index.
#
# Results go to OUT (default /tmp/profile-per-job-<time>/): the bench's JSON
# per run, the WAL counts and relation lists (PostgreSQL) and file sizes
# (SQLite); the summary is printed at the end and can be printed again
# with: python3 scripts/profile/summary.py OUT
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
jobs=${1:-100000}
shift || true
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(burn-down retry-heavy workflow enqueue)
backends=${BACKENDS:-pg sqlite}
errand=${ERRAND_BIN:-$here/../target/release/errand}
pgbin=${PGBIN:-/usr/lib/postgresql/15/bin}
base=${PGBASE:-postgres://postgres@127.0.0.1:5433}
out=${OUT:-/tmp/profile-per-job-$(date -u +%Y%m%dT%H%M%S)}
db=errand_profile

fail() { echo "profile-per-job: $*" >&2; exit 2; }
[ -x "$errand" ] || fail "no errand binary at $errand: build one with cargo build --release -p errand-cli, or set ERRAND_BIN"
command -v python3 >/dev/null || fail "python3 is needed"
mkdir -p "$out"

# The workload's arguments to errand bench.
args_of() {
  case $1 in
    enqueue) echo "enqueue --batch 5000 --jobs $jobs" ;;
    *) echo "$1 --jobs $jobs" ;;
  esac
}

if [[ " $backends " == *" pg "* ]]; then
  [ -x "$pgbin/psql" ] && [ -x "$pgbin/pg_waldump" ] || fail "psql and pg_waldump are not in $pgbin: set PGBIN"
  psql=("$pgbin/psql" -X -q -v ON_ERROR_STOP=1)
  "${psql[@]}" "$base/postgres" -c "SELECT 1" >/dev/null || fail "cannot connect to $base/postgres: set PGBASE"
  loaded=$("${psql[@]}" -At "$base/postgres" -c "SHOW shared_preload_libraries")
  [[ $loaded == *pg_stat_statements* ]] || fail "the server at $base does not load pg_stat_statements (see the top of this script)"
  pgdata=${PGDATA:-$("${psql[@]}" -At "$base/postgres" -c "SHOW data_directory")}
  [ -r "$pgdata/pg_wal" ] || fail "cannot read $pgdata/pg_wal: run as a user who can, or set PGDATA"
  "${psql[@]}" "$base/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  "${psql[@]}" "$base/$db" -c "CREATE EXTENSION pg_stat_statements"
  {
    echo "server: $("${psql[@]}" -At "$base/postgres" -c "SELECT version()")"
    for s in shared_buffers synchronous_commit fsync wal_level max_wal_size wal_keep_size pg_stat_statements.track autovacuum; do
      echo "$s = $("${psql[@]}" -At "$base/postgres" -c "SHOW $s")"
    done
  } >"$out/pg-settings.txt"
fi

# The schema's tables and indexes, with their files, for walcount.py.
relations() { # schema
  "${psql[@]}" -At "$base/$db" -v schema="$1" <<'SQL'
SELECT json_agg(json_build_object(
         'relfilenode', c.relfilenode, 'name', c.relname, 'kind', c.relkind,
         'table', t.relname, 'predicate', pg_get_expr(i.indpred, i.indrelid),
         'definition', pg_get_indexdef(c.oid)) ORDER BY c.relname)
FROM pg_class c
LEFT JOIN pg_index i ON i.indexrelid = c.oid
LEFT JOIN pg_class t ON t.oid = i.indrelid
WHERE c.relnamespace = :'schema'::regnamespace AND c.relkind IN ('r', 'i')
SQL
}

profile_pg() { # workload
  local wl=$1 schema="prof_${1//-/_}" json="$out/pg-$1.json"
  echo "profile-per-job: PostgreSQL $wl" >&2
  "${psql[@]}" "$base/$db" -c "DROP SCHEMA IF EXISTS $schema CASCADE" -c "CHECKPOINT" 2>/dev/null
  # shellcheck disable=SC2046 # the arguments are words
  "$errand" --db "$base/$db" --schema "$schema" bench $(args_of "$wl") --json >"$json"
  relations "$schema" >"$out/pg-$wl.relations.json"
  local range
  range=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["profile"]; print(p["wal_start"], p["wal_end"])' "$json")
  # shellcheck disable=SC2086 # START END
  set -- $range
  "$pgbin/pg_waldump" -p "$pgdata/pg_wal" -s "$1" -e "$2" 2>"$out/pg-$wl.waldump.err" \
    | python3 "$here/profile/walcount.py" "$out/pg-$wl.relations.json" >"$out/pg-$wl.wal.json"
  "${psql[@]}" "$base/$db" -c "DROP SCHEMA $schema CASCADE" 2>/dev/null
}

# SQLite statements per job of the measured phase, counted by gdb (see the
# top); prints one JSON object.
sqlite_statements() { # workload
  local wl=$1 dir cmds
  dir=$(mktemp -d)
  cmds=$dir/count.gdb
  cat >"$cmds" <<GDB
set pagination off
set confirm off
set language c
set print thread-events off
set print inferior-events off
break sqlite3/sqlite3.c:${SQLITE_STEP_LINE:-94372}
info breakpoints
ignore 1 2000000000
catch syscall openat
condition 2 \$_streq((char *) \$rsi, "/proc/self/io")
commands 2
  silent
  echo MARK\\n
  info breakpoints 1
  continue
end
run
GDB
  # shellcheck disable=SC2046
  gdb -q -batch -nx -x "$cmds" --args "$errand" --db "$dir/bench.db" bench $(args_of "$wl") --json >"$dir/gdb.out" 2>&1 || true
  python3 - "$dir/gdb.out" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
head, *marks = text.split("MARK\n")
if not re.search(r"in sqlite3Step at ", head):
    sys.exit("profile-per-job: the breakpoint is not in sqlite3Step: set SQLITE_STEP_LINE to the line of 'db->nVdbeActive++' in sqlite3Step of the SQLite errand compiles in")
hits = [int(m.group(1)) if (m := re.search(r"already hit (\d+) time", x)) else 0 for x in marks]
report = json.loads(next(l for l in text.splitlines() if l.startswith('{"workload"')))
# Each read of /proc/self/io stops twice (the call and its return).
reads = hits[0::2]
n = report["jobs"]
print(json.dumps({"statements_per_job": (reads[-1] - reads[-2]) / n, "statements": reads[-1] - reads[-2],
                  "commits_per_job": report["commits_per_job"], "jobs_per_sec": report["jobs_per_sec"]}))
PY
  rm -rf "$dir"
}

profile_sqlite() { # workload
  local wl=$1 dir
  echo "profile-per-job: SQLite $wl" >&2
  dir=$(mktemp -d)
  # shellcheck disable=SC2046
  "$errand" --db "$dir/bench.db" bench $(args_of "$wl") --json >"$out/sqlite-$wl.json"
  python3 -c 'import json,os,sys
d=sys.argv[1]
print(json.dumps({f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}))' "$dir" >"$out/sqlite-$wl.files.json"
  rm -rf "$dir"
  if [ "$gdb" = yes ]; then
    echo "profile-per-job: SQLite $wl under gdb, counting statements" >&2
    sqlite_statements "$wl" >"$out/sqlite-$wl.statements.json"
  fi
}

gdb=no
if [[ " $backends " == *" sqlite "* ]]; then
  if command -v gdb >/dev/null; then gdb=yes; else echo "profile-per-job: gdb not found: SQLite statements are not counted" >&2; fi
fi

echo "profile-per-job: $jobs jobs; ${workloads[*]}; on $backends; results in $out" >&2
for wl in "${workloads[@]}"; do
  uptime >>"$out/uptime.txt"
  [[ " $backends " != *" pg "* ]] || profile_pg "$wl"
  [[ " $backends " != *" sqlite "* ]] || profile_sqlite "$wl"
done
uptime >>"$out/uptime.txt"
[[ " $backends " != *" pg "* ]] || "${psql[@]}" "$base/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
python3 "$here/profile/summary.py" "$out"
