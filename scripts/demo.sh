#!/usr/bin/env bash
# The main job on embedded SQLite: a Field Notes payment commits its receipt
# job in the same transaction; a one-shot worker delivers the receipt.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p fieldnotes -p errand-cli
fieldnotes=./target/release/fieldnotes
db=${1:-./field-notes.db}
"$fieldnotes" init "$db"
"$fieldnotes" pay "$db"
"$fieldnotes" work "$db"
"$fieldnotes" jobs "$db"
"$fieldnotes" receipts "$db"
