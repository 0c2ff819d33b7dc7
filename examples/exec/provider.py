"""An `errand work --exec` handler in Python (standard library only).

    errand work --exec 'python3 examples/exec/provider.py' --timeout 30s

The payload arrives on stdin; the attempt, the job's deadline and its trace
context in the environment. One JSON object written to $ERRAND_OUTCOME
decides the attempt; without one the exit status does (0 success, 65
permanent failure, anything else a retry).
"""

import json
import os
import sys
from datetime import datetime, timezone


def outcome(**said):
    with open(os.environ["ERRAND_OUTCOME"], "w", encoding="utf-8") as f:
        json.dump(said, f)


job = json.load(sys.stdin)
deadline = os.environ.get("ERRAND_DEADLINE")
if deadline and datetime.fromisoformat(deadline.replace("Z", "+00:00")) < datetime.now(timezone.utc):
    outcome(cancel=f"too late: the deadline {deadline} has passed")
elif job.get("status") == "withdrawn":
    outcome(cancel="the order was withdrawn")
elif job.get("status") == "busy":
    outcome(retry_in="2m", error="provider busy (429)")
elif job.get("status") == "closed":
    outcome(snooze="10m")
elif job.get("status") == "unknown":
    # "class" is a Python keyword: pass it through a dict.
    outcome(**{"error": "no such account", "class": "permanent"})
else:
    with open(os.environ["ERRAND_OUTPUT"], "w", encoding="utf-8") as f:
        json.dump(
            {
                "sent": True,
                "attempt": int(os.environ["ERRAND_ATTEMPT"]),
                "trace": os.environ.get("TRACEPARENT"),
            },
            f,
        )
