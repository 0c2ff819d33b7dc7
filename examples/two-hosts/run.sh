#!/usr/bin/env bash
# Two worker "hosts" and one HTTP API sharing one PostgreSQL database, with
# no containers: two `errand work` processes (host-a and host-b) and one
# `errand serve`, all on a fresh schema. Jobs go in through the HTTP API;
# the script waits until every one is done, checks that each ran exactly
# once and that both hosts took a share, prints who ran what, then stops
# everything and drops the schema.
#
#   bash examples/two-hosts/run.sh [ERRAND_BINARY]
#
# The errand binary: the argument, else $ERRAND, else built here with cargo.
# DATABASE_URL: the server (default postgres://postgres@127.0.0.1:5432/postgres).
# JOBS: how many jobs (default 40).
# Needs bash and psql (to drop the schema at the end); enqueues with curl
# when it is installed, with `errand enqueue` otherwise.
#
# On real hosts each machine runs its own `errand work` with the same --db
# and --schema; nothing else needs to be shared.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
jobs=${JOBS:-40}
errand=${1:-${ERRAND:-}}

die() { echo "two-hosts: $*" >&2; exit 1; }

if [ -z "$errand" ]; then
    echo "two-hosts: building errand (cargo build -p errand-cli)" >&2
    (cd "$root" && cargo build --quiet -p errand-cli --bin errand)
    errand="${CARGO_TARGET_DIR:-$root/target}/debug/errand"
fi
[ -x "$errand" ] || die "no errand binary at $errand (pass one, or set ERRAND)"
command -v psql >/dev/null || die "psql is needed to drop the schema afterwards (apt-get install postgresql-client)"
case "$jobs" in '' | *[!0-9]*) die "JOBS must be a number, not '$jobs'" ;; esac
[ "$jobs" -ge 2 ] || die "JOBS must be at least 2 (two hosts should both get work)"

schema="two_hosts_$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/errand-two-hosts.XXXXXX")
pids=()
db=(--db "$url" --schema "$schema")

# Stops what was started (TERM, then KILL after 10 s), drops the schema,
# removes the scratch directory. Runs however the script ends.
cleanup() {
    local status=$?
    local pid n
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        n=0
        while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    psql "$url" -X -q -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 ||
        echo "two-hosts: could not drop schema $schema" >&2
    if [ "$status" -ne 0 ]; then
        for f in "$work"/*.log; do
            [ -s "$f" ] && { echo "--- $(basename "$f")" >&2; tail -n 20 "$f" >&2; }
        done
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Polls a command (every 0.1 s, at most $1 seconds) until it succeeds.
wait_for() {
    local limit=$1 what=$2 n=0
    shift 2
    until "$@"; do
        n=$((n + 1))
        [ "$n" -le $((limit * 10)) ] || die "gave up after ${limit}s waiting for $what"
        sleep 0.1
    done
}

echo "two-hosts: schema $schema on ${url##*@}"
"$errand" "${db[@]}" migrate >/dev/null

# The handler of every job: a little work, then one line "JOB-ID HOST" in a
# shared file (short appends from several processes do not interleave).
cat >"$work/handler.sh" <<'EOF'
#!/bin/sh
sleep 0.1
printf '%s %s\n' "$ERRAND_JOB_ID" "$HOST_NAME" >>"$RAN"
EOF
: >"$work/ran.txt"

for host in host-a host-b; do
    HOST_NAME=$host RAN="$work/ran.txt" ERRAND_LOG=warn \
        "$errand" "${db[@]}" work --concurrency 2 --exec "sh $work/handler.sh" \
        >"$work/$host.log" 2>&1 &
    pids+=($!)
done
ERRAND_LOG=warn "$errand" "${db[@]}" serve --bind 127.0.0.1:0 >"$work/serve.log" 2>&1 &
pids+=($!)

listening() { grep -qs '^listening on http://' "$work/serve.log"; }
wait_for 30 "errand serve to listen" listening
api=$(sed -n 's/^listening on //p' "$work/serve.log" | head -n 1)
# Both workers have completed a claim cycle (so both are listening for work).
two_workers() { "$errand" "${db[@]}" stats | grep -q '^workers: 2 reporting'; }
wait_for 30 "both workers to report" two_workers

if command -v curl >/dev/null; then
    echo "two-hosts: enqueueing $jobs jobs with POST $api/v1/jobs"
    # With ERRAND_TOKEN set, errand serve wants it on every request.
    auth=()
    [ -z "${ERRAND_TOKEN:-}" ] || auth=(-H "Authorization: Bearer $ERRAND_TOKEN")
    for i in $(seq 1 "$jobs"); do
        code=$(curl -s -o "$work/answer.json" -w '%{http_code}' -X POST "$api/v1/jobs" \
            -H 'Content-Type: application/json' "${auth[@]}" \
            -d "{\"kind\": \"crunch\", \"id\": \"job-$i\", \"payload\": {\"n\": $i}}")
        [ "$code" = 201 ] || die "POST /v1/jobs answered $code: $(cat "$work/answer.json")"
    done
else
    echo "two-hosts: curl is not installed; enqueueing $jobs jobs with errand enqueue"
    for i in $(seq 1 "$jobs"); do
        "$errand" "${db[@]}" enqueue --kind crunch --id "job-$i" --payload "{\"n\": $i}" >/dev/null
    done
fi

count_done() { "$errand" "${db[@]}" jobs --state done --limit 10000 | grep -c '^job-' || true; }
all_done() { [ "$(count_done)" -eq "$jobs" ]; }
wait_for 120 "all $jobs jobs to be done" all_done

# Every job ran exactly once: one line per job, no id twice, no id missing.
lines=$(wc -l <"$work/ran.txt")
distinct=$(cut -d' ' -f1 "$work/ran.txt" | sort -u | wc -l)
[ "$lines" -eq "$jobs" ] || die "$lines runs recorded for $jobs jobs"
[ "$distinct" -eq "$jobs" ] || die "only $distinct distinct jobs ran"
for i in $(seq 1 "$jobs"); do
    grep -q "^job-$i " "$work/ran.txt" || die "job-$i never ran"
done
# Each job took one attempt (errand's record agrees with the file).
once=$("$errand" "${db[@]}" jobs --state done --limit 10000 | awk '$1 ~ /^job-/ && $5 ~ /^1\// {n++} END {print n + 0}')
[ "$once" -eq "$jobs" ] || die "only $once of $jobs jobs were done in one attempt"

a=$(grep -c ' host-a$' "$work/ran.txt" || true)
b=$(grep -c ' host-b$' "$work/ran.txt" || true)
echo "two-hosts: $jobs jobs done, each ran exactly once"
echo "two-hosts:   host-a ran $a"
echo "two-hosts:   host-b ran $b"
[ "$a" -gt 0 ] && [ "$b" -gt 0 ] || die "one host ran every job"
echo "two-hosts: ok (stopping the processes and dropping schema $schema)"
