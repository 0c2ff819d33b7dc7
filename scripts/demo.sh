#!/usr/bin/env bash
# The main job on embedded SQLite: a Field Notes payment commits its receipt
# job in the same transaction; a one-shot worker delivers the receipt; the
# `errand` command shows the job's history and the worker's report.
#
#   bash scripts/demo.sh [PARENT_DIR]
#
# Every run starts from a fresh database in a new directory under
# PARENT_DIR (default: ${TMPDIR:-/tmp}), never in the source tree, and
# prints its path: the demo can run any number of times, and each run's
# database stays there to look at (`errand --db PATH jobs`, `show ID`, ...).
# The binaries are built with cargo (release); ERRAND_DEMO_BIN_DIR=DIR uses
# the `fieldnotes` and `errand` already built in DIR instead.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
parent=${1:-${TMPDIR:-/tmp}}
if ! parent=$(cd "$parent" 2>/dev/null && pwd); then
    echo "demo: ${1:-${TMPDIR:-/tmp}} is not a directory; pass an existing directory for the demo's data" >&2
    exit 2
fi

if [[ -n ${ERRAND_DEMO_BIN_DIR:-} ]]; then
    bin=$ERRAND_DEMO_BIN_DIR
else
    (cd "$repo" && cargo build --release --locked -p fieldnotes -p errand-cli)
    bin=$repo/target/release
fi

# Shows a command as a reader would type it, then runs it.
run() {
    local name=$1
    shift
    printf '\n$ %s %s\n' "$name" "$*"
    "$bin/$name" "$@"
}

dir=$(mktemp -d "$parent/errand-demo.XXXXXX")
db=$dir/field-notes.db
echo "demo database (fresh for this run): $db"
run fieldnotes init "$db"
paid=$(run fieldnotes pay "$db")
echo "$paid"
job=${paid##*job_id=}
job=${job%% *}
run fieldnotes work "$db"
run fieldnotes jobs "$db"
run fieldnotes receipts "$db"
run errand --db "$db" show "$job"
run errand --db "$db" stats --check --max-since-worker-cycle 1h
