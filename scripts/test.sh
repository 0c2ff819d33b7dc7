#!/usr/bin/env bash
# Runs the whole test suite: every crate, unit and integration tests,
# including the ones that start real worker processes and send real signals.
# The PostgreSQL tests run when ERRAND_TEST_POSTGRES_URL is set (this script
# defaults it to the local server when one answers; set it empty,
# `ERRAND_TEST_POSTGRES_URL= bash scripts/test.sh`, to run without) and say
# SKIPPED otherwise. Every test that skips its work (no PostgreSQL, no
# Chromium, not root) is listed with the reason at the end, after cargo's
# output (scripts/skipped.sh); under CI (`CI` set) a skip fails instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ERRAND_TEST_POSTGRES_URL+set}" ] && command -v pg_isready >/dev/null \
    && pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
    export ERRAND_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/postgres
fi
echo "PostgreSQL tests: ${ERRAND_TEST_POSTGRES_URL:-not configured, they will be SKIPPED}"
# Tests add a line here when they skip (errand_testsupport::skip).
skips=$(mktemp "${TMPDIR:-/tmp}/errand-test-skips.XXXXXX")
export ERRAND_TEST_SKIP_LOG=$skips
summary() {
    echo
    bash scripts/skipped.sh "$skips"
    if [ -s "$skips" ]; then
        echo "(every skip, one line each: $skips)"
    else
        rm -f "$skips"
    fi
}
trap summary EXIT
# Span export is tested by its own test against a receiver of its own; the
# developer's collector must not change what the other tests see.
unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
cargo test --workspace --locked --features errand-postgres/sqlx "$@"
# In the workspace the command turns on the library's `otel` feature for
# every crate; the library as most services build it (without) must build.
cargo check -p errand --lib --locked
# The house: no import circles between the files of a crate and no
# production function over 100 lines (it also lists files over 700 lines).
python3 scripts/structure.py --check
# The API documentation builds with every intra-doc link resolved (a moved
# or renamed item breaks the links that name it).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
