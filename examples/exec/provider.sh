#!/bin/sh
# An `errand work --exec` handler in shell: it tells errand more than an
# exit status can by writing one JSON object to $ERRAND_OUTCOME.
#   errand work --exec 'sh examples/exec/provider.sh' --timeout 30s
payload=$(cat)
case "$payload" in
  *'"withdrawn"'*)
    printf '{"cancel": "the order was withdrawn"}' > "$ERRAND_OUTCOME" ;;
  *'"busy"'*)
    printf '{"retry_in": "2m", "error": "provider busy (429)"}' > "$ERRAND_OUTCOME" ;;
  *'"closed"'*)
    printf '{"snooze": "10m"}' > "$ERRAND_OUTCOME" ;;
  *'"unknown"'*)
    printf '{"error": "no such account", "class": "permanent"}' > "$ERRAND_OUTCOME" ;;
  *)
    printf '{"sent": true, "attempt": %s}' "$ERRAND_ATTEMPT" > "$ERRAND_OUTPUT" ;;
esac
