"""A remote Errand worker in Python, standard library only.

It takes jobs from `errand serve` over the HTTP lease API (docs/http-api.md,
"Remote workers"): lease one due job, run it while renewing the lease, then
settle it with the lease's token — complete, or fail with a retry time.

    python3 worker.py --api http://127.0.0.1:7878 --exit-when-idle

What a job does is up to `handle` below; this one understands
    {"seconds": S}    work for S seconds (renewing the lease meanwhile)
    {"flaky": N}      fail the first N attempts (retried after 1 s), then succeed
    {"bad": true}     fail for good (dead at once, no retry)
and anything else succeeds at once.

Options: --api URL (or $ERRAND_API), a token from $ERRAND_TOKEN, --queue Q
(repeatable; default every queue), --lease DUR (default 30s), --wait DUR
(how long one lease request waits for work, default 10s), --max-jobs N
(stop after N attempts, each settled or found lost), --exit-when-idle (stop when a lease
request comes back empty). Ctrl-C hands the running job back (release)
without spending its attempt.
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


class LeaseLost(Exception):
    """The server says this lease is no longer ours: stop, settle nothing."""


class Api:
    def __init__(self, base, token=None):
        self.base = base.rstrip("/")
        self.token = token

    def post(self, path, body):
        request = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        if self.token:
            request.add_header("Authorization", "Bearer " + self.token)
        try:
            # The longest request is a lease that waits; give it room.
            with urllib.request.urlopen(request, timeout=60) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as e:
            try:
                problem = json.loads(e.read() or b"{}")
            except ValueError:
                problem = {}
            if problem.get("code") == "lease_lost":
                raise LeaseLost(problem.get("detail", "lease lost")) from None
            raise RuntimeError(
                f"POST {path}: {e.code} {problem.get('code')}: {problem.get('detail')}"
            ) from None

    def lease_path(self, lease, action):
        return f"/v1/leases/{urllib.parse.quote(lease['id'], safe='')}/{action}"

    def settle(self, lease, action, **fields):
        body = {"token": lease["token"], "attempt": lease["attempt"], **fields}
        return self.post(self.lease_path(lease, action), body)


class Failed(Exception):
    """A handler's failure: retried after `retry_in` unless `permanent`."""

    def __init__(self, error, retry_in=None, permanent=False):
        super().__init__(error)
        self.retry_in = retry_in
        self.permanent = permanent


def handle(job, attempt, stop):
    """Runs one job; returns its output (any JSON value) or raises Failed.
    `stop` is set when the lease is lost: a long job should give up then."""
    payload = job.get("payload") or {}
    if not isinstance(payload, dict):
        payload = {}
    if payload.get("bad"):
        raise Failed("this job can never succeed", permanent=True)
    if attempt <= int(payload.get("flaky", 0)):
        raise Failed(f"flaky on attempt {attempt}", retry_in="1s")
    seconds = float(payload.get("seconds", 0))
    if stop.wait(seconds):
        return None  # the lease is gone; nothing will be settled
    return {"handled_by": "python", "attempt": attempt}


def seconds_of(duration):
    """'250ms', '3s', '2m', '1h' in seconds."""
    for suffix, scale in (("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)):
        if duration.endswith(suffix) and duration[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(duration[: -len(suffix)]) * scale
    raise ValueError(f"not a duration: {duration!r} (like 30s, 2m)")


def say(*words):
    print("worker:", *words, flush=True)


def run_one(api, item, lease_text):
    """Runs one leased job to its settlement. Returns what happened."""
    job, lease = item["job"], item["lease"]
    attempt = lease["attempt"]
    say(f"job {lease['id']} ({job['kind']}) attempt {attempt}: started")
    stop = threading.Event()
    result = {}

    def work():
        try:
            result["output"] = handle(job, attempt, stop)
        except Failed as e:
            result["failed"] = e
        except Exception as e:  # a bug in the handler: a retryable failure
            result["failed"] = Failed(f"{type(e).__name__}: {e}")

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    # Renew the lease every third of its length while the job runs.
    every = seconds_of(lease_text) / 3
    try:
        while thread.is_alive():
            thread.join(every)
            if thread.is_alive():
                api.settle(lease, "heartbeat", extend=lease_text)
                say(f"job {lease['id']} attempt {attempt}: heartbeat")
        failure = result.get("failed")
        if failure is None:
            output = result.get("output")
            api.settle(lease, "complete", **({} if output is None else {"output": output}))
            outcome = "completed"
        elif failure.permanent:
            answer = api.settle(lease, "fail", error=str(failure), **{"class": "permanent"})
            outcome = f"failed for good ({answer['outcome']})"
        else:
            fields = {"retry_in": failure.retry_in} if failure.retry_in else {}
            answer = api.settle(lease, "fail", error=str(failure), **fields)
            outcome = f"failed: {failure} ({answer['outcome']})"
    except LeaseLost as e:
        stop.set()
        outcome = f"lease lost, nothing settled ({e})"
    except KeyboardInterrupt:
        stop.set()
        try:
            api.settle(lease, "release")
            say(f"job {lease['id']} attempt {attempt}: released")
        except (LeaseLost, RuntimeError, OSError):
            pass
        raise
    say(f"job {lease['id']} attempt {attempt}: {outcome}")
    return outcome


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", default=os.environ.get("ERRAND_API", "http://127.0.0.1:7878"))
    parser.add_argument("--queue", action="append", default=[])
    parser.add_argument("--lease", default="30s")
    parser.add_argument("--wait", default="10s")
    parser.add_argument("--max-jobs", type=int, default=0, help="stop after this many attempts (0: no limit)")
    parser.add_argument("--exit-when-idle", action="store_true")
    args = parser.parse_args()
    for duration in (args.lease, args.wait):
        seconds_of(duration)

    api = Api(args.api, os.environ.get("ERRAND_TOKEN"))
    settled = 0
    try:
        while args.max_jobs == 0 or settled < args.max_jobs:
            request = {"limit": 1, "lease": args.lease, "wait": args.wait}
            if args.queue:
                request["queues"] = args.queue
            leased = api.post("/v1/leases", request)["jobs"]
            if not leased:
                if args.exit_when_idle:
                    say("idle: nothing due, exiting")
                    break
                continue
            for item in leased:
                run_one(api, item, args.lease)
                settled += 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except (RuntimeError, OSError) as e:
        say(f"error: {e}")
        return 1
    say(f"settled {settled} attempt(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
