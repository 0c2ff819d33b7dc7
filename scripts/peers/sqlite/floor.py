#!/usr/bin/env python3
"""The SQLite floor: the least a SQLite queue can do per job, measured the
way scripts/peers/rawsql/cycle.sql measures PostgreSQL's. One narrow table
with an integer key and one partial index for the claim; the loop claims
100 due jobs by priority, run_at and id (UPDATE ... RETURNING) in one
transaction, then marks those 100 done in another: two statements, two
commits per 100 jobs. The file is in WAL mode with synchronous = FULL (a
commit is on disk when it returns), as Errand's SQLite store runs by
default. The backlog is inserted and checkpointed before the clock starts.

Usage: python3 scripts/peers/sqlite/floor.py DB_FILE [JOBS (100000)]

Prints one JSON line: jobs_per_sec, jobs_left (must be 0), and the SQLite
library version Python's sqlite3 module uses (not necessarily Errand's,
which compiles its own in).
"""
import json
import os
import sqlite3
import sys
import time

SCHEMA = """
CREATE TABLE floor_jobs (
    id          INTEGER PRIMARY KEY,
    queue       TEXT    NOT NULL DEFAULT 'default',
    state       TEXT    NOT NULL DEFAULT 'available',
    priority    INTEGER NOT NULL DEFAULT 0,
    run_at      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER,
    finished_at INTEGER,
    payload     TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX floor_jobs_due ON floor_jobs (queue, priority, run_at, id) WHERE state = 'available';
"""

CLAIM = """
UPDATE floor_jobs SET state = 'running', attempt = attempt + 1, started_at = :now
WHERE id IN (SELECT id FROM floor_jobs
             WHERE state = 'available' AND queue = 'default' AND run_at <= :now
             ORDER BY priority, run_at, id
             LIMIT 100)
RETURNING id
"""

COMPLETE = """
UPDATE floor_jobs SET state = 'done', finished_at = :now
WHERE id IN (SELECT value FROM json_each(:ids))
"""


def now_ms():
    return time.time_ns() // 1_000_000


def main(path, jobs):
    if os.path.exists(path):
        sys.exit(f"{path} exists: pass the path of a new file")
    # Autocommit: every transaction below is opened and committed by hand.
    db = sqlite3.connect(path, isolation_level=None)
    mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    db.execute("PRAGMA synchronous = FULL")
    db.executescript(SCHEMA)
    t = now_ms()
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO floor_jobs (run_at, payload) VALUES (?, json_object('n', ?))",
        ((t, i) for i in range(1, jobs + 1)),
    )
    db.execute("COMMIT")
    db.execute("ANALYZE")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    start = time.perf_counter()
    done = 0
    while True:
        db.execute("BEGIN IMMEDIATE")
        ids = [r[0] for r in db.execute(CLAIM, {"now": now_ms()})]
        db.execute("COMMIT")
        if not ids:
            break
        db.execute("BEGIN IMMEDIATE")
        db.execute(COMPLETE, {"now": now_ms(), "ids": json.dumps(ids)})
        db.execute("COMMIT")
        done += len(ids)
    elapsed = time.perf_counter() - start

    left = db.execute("SELECT count(*) FROM floor_jobs WHERE state <> 'done'").fetchone()[0]
    db.close()
    print(json.dumps({
        "peer": "sqlite floor",
        "workload": "burn-down",
        "jobs": done,
        "elapsed_ms": round(elapsed * 1000, 1),
        "jobs_per_sec": round(done / elapsed),
        "jobs_left": left,
        "sqlite_version": sqlite3.sqlite_version,
        "journal_mode": mode,
        "synchronous": "full",
    }))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 100_000)
