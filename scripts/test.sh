#!/usr/bin/env bash
# Runs the whole test suite: every crate, unit and integration tests,
# including the ones that start real worker processes and send real signals.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked "$@"
