#!/usr/bin/env python3
"""Summarises a bench-peers.sh run: min / median / max of each figure, and
the ratios of Errand to its peers taken round by round (each round ran both
side by side), as a Markdown table.

Usage: python3 scripts/peers/summary.py RESULTS.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict


def main(path):
    rounds = defaultdict(dict)
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                d = json.loads(line)
                rounds[d["round"]][d["name"]] = d

    def figure(d, name):
        if name == "errand-pg-latency":
            s = d["latency"]["start"]
            return {"p50 ms": s["p50_ms"], "p99 ms": s["p99_ms"]}
        if name == "gw-latency":
            return {"p50 ms": d["p50_ms"], "p99 ms": d["p99_ms"]}
        out = {"jobs/s": d["jobs_per_sec"]}
        if name == "gw-burn-down":
            out["add_jobs jobs/s"] = d["enqueue_jobs_per_sec"]
        prof = d.get("profile") or {}
        for key, label in [
            ("errand_cpu_us", "Errand CPU µs/job"),
            ("other_cpu_us", "other CPU µs/job"),
            ("wal_bytes", "WAL B/job"),
            ("statements", "statements/job"),
            ("round_trips", "round trips/job"),
            ("server_cpu_us", "server CPU µs/job"),
            ("db_exec_us", "statement time µs/job"),
        ]:
            if prof.get(key) is not None:
                out[label] = prof[key]
        if "commits_per_job" in d:
            out["commits/job"] = d["commits_per_job"]
        return out

    series = defaultdict(list)
    ratios = defaultdict(list)
    for r in sorted(rounds):
        got = rounds[r]
        for name, d in got.items():
            for label, v in figure(d, name).items():
                series[(name, label)].append(v)

        def get(name, label):
            d = got.get(name)
            return figure(d, name).get(label) if d else None

        pairs = [
            ("PostgreSQL burn-down: Errand / graphile-worker", ("errand-pg-burn-down", "jobs/s"), ("gw-burn-down", "jobs/s")),
            ("PostgreSQL burn-down: Errand / River", ("errand-pg-burn-down", "jobs/s"), ("river-burn-down", "jobs/s")),
            ("PostgreSQL burn-down: Errand / raw SQL (2 clients)", ("errand-pg-burn-down", "jobs/s"), ("rawsql-2", "jobs/s")),
            ("SQLite burn-down: Errand / SQLite floor", ("errand-sqlite-burn-down", "jobs/s"), ("sqlite-floor", "jobs/s")),
            ("workflow drain / burn-down (Errand, PostgreSQL)", ("errand-pg-workflow", "jobs/s"), ("errand-pg-burn-down", "jobs/s")),
            ("workflow drain / burn-down (Errand, SQLite)", ("errand-sqlite-workflow", "jobs/s"), ("errand-sqlite-burn-down", "jobs/s")),
            ("bulk enqueue: Errand (batches of 5,000) / graphile-worker add_jobs", ("errand-pg-enqueue", "jobs/s"), ("gw-burn-down", "add_jobs jobs/s")),
            ("retry-heavy / burn-down (Errand, PostgreSQL)", ("errand-pg-retry-heavy", "jobs/s"), ("errand-pg-burn-down", "jobs/s")),
            ("idle enqueue-to-start p50: Errand / graphile-worker", ("errand-pg-latency", "p50 ms"), ("gw-latency", "p50 ms")),
            ("idle enqueue-to-start p99: Errand / graphile-worker", ("errand-pg-latency", "p99 ms"), ("gw-latency", "p99 ms")),
        ]
        for label, a, b in pairs:
            x, y = get(*a), get(*b)
            if x is not None and y:
                ratios[label].append(x / y)

    def fmt(v):
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"

    print(f"{len(rounds)} rounds from {path}\n")
    print("| measurement | figure | min | median | max |")
    print("|---|---|---|---|---|")
    for (name, label), vs in sorted(series.items()):
        print(f"| {name} | {label} | {fmt(min(vs))} | {fmt(statistics.median(vs))} | {fmt(max(vs))} |")
    print()
    print("| ratio, round by round | min | median | max |")
    print("|---|---|---|---|")
    for label, vs in ratios.items():
        print(f"| {label} | {min(vs):.2f} | {statistics.median(vs):.2f} | {max(vs):.2f} |")
    notes = []
    for r in sorted(rounds):
        for name, d in sorted(rounds[r].items()):
            if "sqlite_version" in d:
                note = (f"{name}: Python's sqlite3 module on SQLite {d['sqlite_version']}, "
                        f"journal_mode={d.get('journal_mode')}, synchronous={d.get('synchronous')}")
                if note not in notes:
                    notes.append(note)
            if d.get("jobs_left"):
                notes.append(f"{name}, round {r}: {d['jobs_left']} jobs left unfinished")
    if notes:
        print()
        for note in notes:
            print(f"- {note}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
