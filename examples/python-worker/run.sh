#!/usr/bin/env bash
# The Python worker (worker.py) end to end: `errand serve` on a fresh SQLite
# database in a scratch directory, six jobs enqueued, worker.py run until it
# finds nothing more to do, and every job checked — four done at the first
# attempt (one of them long enough to need lease renewals), one done at the
# second after a failure and its retry, one dead after failing for good.
#
#   bash examples/python-worker/run.sh [ERRAND_BINARY]
#
# The errand binary: the argument, else $ERRAND, else built here with cargo.
# Needs bash and python3 (standard library only).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
errand=${1:-${ERRAND:-}}

die() { echo "python-worker: $*" >&2; exit 1; }

if [ -z "$errand" ]; then
    echo "python-worker: building errand (cargo build -p errand-cli)" >&2
    (cd "$root" && cargo build --quiet -p errand-cli --bin errand)
    errand="${CARGO_TARGET_DIR:-$root/target}/debug/errand"
fi
[ -x "$errand" ] || die "no errand binary at $errand (pass one, or set ERRAND)"
command -v python3 >/dev/null || die "python3 is needed (apt-get install python3)"

work=$(mktemp -d "${TMPDIR:-/tmp}/errand-python-worker.XXXXXX")
db=(--db "$work/jobs.db")
serve_pid=

cleanup() {
    local status=$?
    if [ -n "$serve_pid" ]; then
        kill -TERM "$serve_pid" 2>/dev/null || true
        local n=0
        while kill -0 "$serve_pid" 2>/dev/null && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
        kill -KILL "$serve_pid" 2>/dev/null || true
        wait "$serve_pid" 2>/dev/null || true
    fi
    if [ "$status" -ne 0 ] && [ -s "$work/serve.log" ]; then
        echo "--- serve.log" >&2
        tail -n 20 "$work/serve.log" >&2
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$errand" "${db[@]}" migrate >/dev/null
ERRAND_LOG=warn "$errand" "${db[@]}" serve --bind 127.0.0.1:0 >"$work/serve.log" 2>&1 &
serve_pid=$!
n=0
until grep -qs '^listening on http://' "$work/serve.log"; do
    kill -0 "$serve_pid" 2>/dev/null || die "errand serve exited before listening"
    n=$((n + 1))
    [ "$n" -le 300 ] || die "gave up after 30s waiting for errand serve to listen"
    sleep 0.1
done
api=$(sed -n 's/^listening on //p' "$work/serve.log" | head -n 1)
echo "python-worker: errand serve at $api, database $work/jobs.db"

enqueue() { "$errand" "${db[@]}" enqueue --kind "$1" --id "$2" --payload "$3" >/dev/null; }
enqueue email quick-1 '{}'
enqueue email quick-2 '{}'
enqueue email quick-3 '{}'
enqueue report slow '{"seconds": 4}'
enqueue email flaky '{"flaky": 1}'
enqueue email bad '{"bad": true}'

# A 3 s lease for a 4 s job: it is done in one attempt only if the
# worker's heartbeats keep the lease alive.
python3 "$here/worker.py" --api "$api" --lease 3s --wait 3s --exit-when-idle

"$errand" "${db[@]}" jobs --json >"$work/jobs.json"
"$errand" "${db[@]}" show flaky --json >"$work/flaky.json"
python3 - "$work/jobs.json" "$work/flaky.json" <<'EOF'
import json
import sys

jobs = {j["id"]: j for j in json.load(open(sys.argv[1]))}
want = {
    "quick-1": ("done", 1),
    "quick-2": ("done", 1),
    "quick-3": ("done", 1),
    "slow": ("done", 1),
    "flaky": ("done", 2),
    "bad": ("dead", 1),
}
wrong = []
for id, (state, attempts) in want.items():
    job = jobs.get(id)
    got = (job["state"], job["attempts"]) if job else None
    print(f"python-worker:   {id:8} {got[0] if got else 'missing':5} after {got[1] if got else 0} attempt(s)")
    if got != (state, attempts):
        wrong.append(f"{id}: wanted {state} after {attempts} attempt(s), got {got}")
history = json.load(open(sys.argv[2]))["history"]
if not any(h.get("error") == "flaky on attempt 1" for h in history):
    wrong.append(f"flaky: its history does not show the failed first attempt: {history}")
if wrong:
    sys.exit("python-worker: " + "; ".join(wrong))
EOF
echo "python-worker: ok (4 done at once, 1 done after a retry, 1 dead)"
