#!/usr/bin/env bash
# Runs the whole test suite: every crate, unit and integration tests,
# including the ones that start real worker processes and send real signals.
# The PostgreSQL tests run when ERRAND_TEST_POSTGRES_URL is set (this script
# defaults it to the local server when one answers) and say SKIPPED otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ERRAND_TEST_POSTGRES_URL:-}" ] && command -v pg_isready >/dev/null \
    && pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
    export ERRAND_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/postgres
fi
echo "PostgreSQL tests: ${ERRAND_TEST_POSTGRES_URL:-not configured, they will be SKIPPED}"
# Span export is tested by its own test against a receiver of its own; the
# developer's collector must not change what the other tests see.
unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
cargo test --workspace --locked --features errand-postgres/sqlx "$@"
# In the workspace the command turns on the library's `otel` feature for
# every crate; the library as most services build it (without) must build.
cargo check -p errand --lib --locked
