#!/usr/bin/env python3
"""Counts, per relation, the heap and B-tree records of a stretch of WAL:
the output of `pg_waldump -s START -e END` on stdin, the relations of the
benchmark's schema (RELATIONS.json, written by profile-per-job.sh) as the
argument. Prints one JSON object:

  tables:  {table: {insert, update, hot_update, delete, lock, multi_insert_tuples}}
  indexes: {index: {table, leaf_inserts, splits, other_records}}
  records / fpi: every record, and every full-page image, in the stretch
  other_relations: heap and B-tree records of relations outside the schema

`leaf_inserts` is the index entries written: INSERT_LEAF, INSERT_POST and
the leaf-level SPLIT_L / SPLIT_R records (a split logs the incoming entry
in place of an INSERT_LEAF). Usage:

  pg_waldump -p PGDATA/pg_wal -s START -e END | python3 walcount.py RELATIONS.json
"""
import collections
import json
import re
import sys

LINE = re.compile(r"rmgr: (\w+)\s.*?desc: (\S+)(.*?)(?:, blkref #0: rel \d+/\d+/(\d+)|$)")


def main(relations_path):
    with open(relations_path) as f:
        rels = json.load(f)  # [{relfilenode, name, kind, table}]
    by_node = {str(r["relfilenode"]): r for r in rels}
    tables = collections.defaultdict(collections.Counter)
    indexes = collections.defaultdict(collections.Counter)
    other = collections.Counter()
    records = fpi = 0
    for line in sys.stdin:
        if not line.startswith("rmgr:"):
            continue
        records += 1
        fpi += line.count(" FPW")
        m = LINE.match(line)
        if not m:
            continue
        rmgr, op, rest, node = m.groups()
        op = op.rstrip(",:").split("+")[0]  # INSERT+INIT: the first tuple on a new page
        if rmgr not in ("Heap", "Heap2", "Btree") or node is None:
            continue
        rel = by_node.get(node)
        if rel is None:
            other[f"{rmgr} {op}"] += 1
            continue
        if rmgr == "Btree":
            c = indexes[rel["name"]]
            if op in ("INSERT_LEAF", "INSERT_POST"):
                c["leaf_inserts"] += 1
            elif op in ("SPLIT_L", "SPLIT_R"):
                c["splits"] += 1
                if re.search(r"level 0\b", rest):
                    c["leaf_inserts"] += 1
            else:
                c["other_records"] += 1
        else:
            c = tables[rel["name"]]
            if op == "MULTI_INSERT":
                n = re.search(r"ntuples: (\d+)", rest)
                c["multi_insert_tuples"] += int(n.group(1)) if n else 0
            else:
                c[op.lower()] += 1
    index_table = {r["name"]: r.get("table") for r in rels if r["kind"] == "i"}
    print(json.dumps({
        "records": records,
        "fpi": fpi,
        "tables": {t: dict(c) for t, c in sorted(tables.items())},
        "indexes": {i: {"table": index_table.get(i), **dict(c)} for i, c in sorted(indexes.items())},
        "other_relations": dict(other),
    }))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
