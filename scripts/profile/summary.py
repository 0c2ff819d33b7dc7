#!/usr/bin/env python3
"""Summarises a profile-per-job.sh run as Markdown: per backend, one table
with a row per measure and a column per workload, every figure per job;
then, per workload, the index entries written index by index and the
statements that took most of the execution time.

Usage: python3 scripts/profile/summary.py OUT_DIR
"""
import json
import os
import sys

ORDER = ["burn-down", "retry-heavy", "workflow", "enqueue"]


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt(v):
    if v is None:
        return "–"
    if isinstance(v, str):
        return v
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" if abs(v) >= 0.01 or v == 0 else f"{v:.2g}"


def runs(out, backend):
    found = {}
    for name in os.listdir(out):
        prefix = backend + "-"
        if name.startswith(prefix) and name.endswith(".json") and name.count(".") == 1:
            found[name[len(prefix):-5]] = load(os.path.join(out, name))
    return sorted(found.items(), key=lambda kv: (ORDER.index(kv[0]) if kv[0] in ORDER else 99, kv[0]))


def pg_rows(out, wl, report):
    """The PostgreSQL measures of one run: (label, value, kind)."""
    p = report.get("profile") or {}
    n = report["jobs"]
    wal = load(os.path.join(out, f"pg-{wl}.wal.json"))
    rels = load(os.path.join(out, f"pg-{wl}.relations.json")) or []
    indexes_of = {}
    for r in rels:
        if r["kind"] == "i":
            indexes_of.setdefault(r["table"], []).append(r["name"])
    heap = wal["tables"]
    new_versions = sum(c.get("insert", 0) + c.get("update", 0) + c.get("multi_insert_tuples", 0) for c in heap.values())
    upper = sum((c.get("insert", 0) + c.get("update", 0) + c.get("multi_insert_tuples", 0)) * len(indexes_of.get(t, []))
                for t, c in heap.items())
    entries = sum(c.get("leaf_inserts", 0) for c in wal["indexes"].values())
    locks = sum(c.get("lock", 0) for c in heap.values())
    rows_ins, rows_upd = p.get("rows_inserted"), p.get("rows_updated")
    return [
        ("jobs/s", report["jobs_per_sec"], "noisy"),
        ("Errand process CPU µs", p.get("errand_cpu_us"), "noisy"),
        ("PostgreSQL server CPU µs (its processes, /proc)", p.get("server_cpu_us"), "noisy"),
        ("rest of machine CPU µs (other engineer's build included)", None if p.get("other_cpu_us") is None or p.get("server_cpu_us") is None
         else p["other_cpu_us"] - p["server_cpu_us"], "noisy"),
        ("database exec time µs (Σ top-level total_exec_time)", p.get("db_exec_us"), "noisy"),
        ("round trips (top-level statement calls)", p.get("round_trips"), "count"),
        ("statements incl. nested (track = all)", p.get("statements"), "count"),
        ("commits (xact_commit)", report["commits_per_job"], "count"),
        ("row versions written (inserted + updated)", None if rows_ins is None else rows_ins + rows_upd, "count"),
        ("  of which inserted", rows_ins, "count"),
        ("  of which updated (HOT)", None if rows_upd is None else f"{fmt(rows_upd)} ({fmt(p.get('rows_hot_updated'))})", "count"),
        ("rows deleted", p.get("rows_deleted"), "count"),
        ("row locks written (heap LOCK records)", locks / n, "count"),
        ("index entries written (B-tree leaf inserts, WAL)", entries / n, "count"),
        ("  naive estimate: non-HOT versions × all indexes", upper / n, "count"),
        ("  non-HOT new versions (WAL)", new_versions / n, "count"),
        ("WAL bytes", p.get("wal_bytes"), "count*"),
        ("WAL records", wal["records"] / n, "count*"),
        ("  full-page images", wal["fpi"] / n, "count*"),
    ]


def sqlite_rows(out, wl, report):
    p = report.get("profile") or {}
    files = {}
    fpath = os.path.join(out, f"sqlite-{wl}.files.json")
    if os.path.exists(fpath):
        files = load(fpath)
    counted = {}
    spath = os.path.join(out, f"sqlite-{wl}.statements.json")
    if os.path.exists(spath) and os.path.getsize(spath):
        counted = load(spath)
    return [
        ("jobs/s", report["jobs_per_sec"], "noisy"),
        ("Errand process CPU µs", p.get("errand_cpu_us"), "noisy"),
        ("rest of machine CPU µs (other engineer's build included)", p.get("other_cpu_us"), "noisy"),
        ("commits (writer transactions)", report["commits_per_job"], "count"),
        ("statements executed (second run, under gdb)", counted.get("statements_per_job"), "count"),
        ("  commits in that run (batching under gdb)", counted.get("commits_per_job"), "count"),
        ("bytes written (write calls: WAL frames + checkpoints)", p.get("bytes_written"), "count*"),
        ("bytes towards storage (/proc write_bytes)", p.get("storage_bytes"), "count*"),
        ("database file at the end, bytes per job", files.get("bench.db", 0) / report["jobs"] if files else None, "count"),
        ("WAL file at the end, MiB", files.get("bench.db-wal", 0) / 2**20 if files else None, "count"),
    ]


def table(title, results, rows_of):
    if not results:
        return
    print(f"### {title}, per job\n")
    names = [wl for wl, _ in results]
    print("| measure | kind | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    cols = [rows_of(wl, r) for wl, r in results]
    for i, (label, _, kind) in enumerate(cols[0]):
        print(f"| {label} | {kind} | " + " | ".join(fmt(c[i][1]) for c in cols) + " |")
    print()


def main(out):
    pg = runs(out, "pg")
    sqlite = runs(out, "sqlite")
    print(f"Results in {out}; jobs per run: " + ", ".join(f"{b} {wl} {r['jobs']:,}" for b, rs in (("pg", pg), ("sqlite", sqlite)) for wl, r in rs))
    print("\nkind: noisy = time or CPU, moved by the machine's load; count = counted, the same run to run up to")
    print("batching; count* = counted, but moved by checkpoints (full-page images) and by how work was batched.\n")
    table("PostgreSQL", pg, lambda wl, r: pg_rows(out, wl, r))
    table("SQLite", sqlite, lambda wl, r: sqlite_rows(out, wl, r))
    for wl, r in pg:
        n = r["jobs"]
        wal = load(os.path.join(out, f"pg-{wl}.wal.json"))
        rels = {x["name"]: x for x in load(os.path.join(out, f"pg-{wl}.relations.json")) or []}
        print(f"### PostgreSQL {wl}: writes per job, table by table and index by index (WAL)\n")
        print("| relation | writes per job |")
        print("|---|---|")
        for t, c in wal["tables"].items():
            print(f"| table {t} | " + ", ".join(f"{k} {fmt(v / n)}" for k, v in sorted(c.items())) + " |")
        for i, c in wal["indexes"].items():
            pred = (rels.get(i) or {}).get("predicate")
            where = f" WHERE {pred}" if pred else ""
            print(f"| index {i} ({c['table']}){where} | entries {fmt(c.get('leaf_inserts', 0) / n)}, splits {fmt(c.get('splits', 0) / n)}, other {fmt(c.get('other_records', 0) / n)} |")
        silent = [x["name"] for x in rels.values() if x["kind"] == "i" and x["name"] not in wal["indexes"]]
        if silent:
            print(f"| indexes written to not at all | {', '.join(silent)} |")
        if wal.get("other_relations"):
            print(f"| relations outside the schema | " + ", ".join(f"{k} {fmt(v / n)}" for k, v in wal["other_relations"].items()) + " |")
        print()
        top = (r.get("profile") or {}).get("top_statements") or []
        if top:
            print(f"### PostgreSQL {wl}: statements by execution time\n")
            print("| # | calls | per job | total ms | mean µs | rows | level | statement |")
            print("|---|---|---|---|---|---|---|---|")
            for k, s in enumerate(top, 1):
                q = s["query"].replace("|", "\\|")
                print(f"| {k} | {s['calls']:,} | {fmt(s['calls_per_job'])} | {fmt(s['total_ms'])} | {fmt(s['mean_us'])} | {s['rows']:,} | {'top' if s['toplevel'] else 'nested'} | `{q}` |")
            print()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
