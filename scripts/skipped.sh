#!/usr/bin/env bash
# Sums up the tests that skipped their work, from the file that
# errand_testsupport::skip adds a line to (TEST, tab, WHY, tab, WHAT) when
# ERRAND_TEST_SKIP_LOG names it. scripts/test.sh runs this at its end:
# `cargo test` shows nothing of what a passing test prints, so without it a
# skipped test would look like any other `... ok`.
#
#   bash scripts/skipped.sh FILE
set -euo pipefail
log=${1:?usage: bash scripts/skipped.sh FILE}
if [[ ! -s $log ]]; then
    echo "no test was skipped"
    exit 0
fi
# One entry per test and reason (a test may skip several halves for one
# reason); the reasons in the order they first came, five tests named each.
awk -F '\t' -v shown=5 '
    !seen[$1 FS $2]++ {
        if (!($2 in count)) order[++reasons] = $2
        count[$2]++
        if (count[$2] <= shown) names[$2] = names[$2] (count[$2] > 1 ? ", " : "") $1
        if (!tests[$1]++) total++
    }
    END {
        printf "%d test(s) SKIPPED: they passed without checking anything\n", total
        for (i = 1; i <= reasons; i++) {
            r = order[i]
            more = count[r] > shown ? sprintf(" and %d more", count[r] - shown) : ""
            printf "  %d because %s:\n      %s%s\n", count[r], r, names[r], more
        }
    }' "$log"
