#!/usr/bin/env python3
"""Adds up the JSON records of pacts-conformance runs (--gtest_output=json:FILE, one file per
parallel seed shard: tools/gpu/h200_session.sh, tools/gpu/h200_release_check.sh) per property:
generated cases, passed, NotSupported, NotApplicable, failed, worst error/bound; then the cases the
backend ran per KV format and per K/V layout pair, over every property.

    python3 tools/gpu/catalogue_summary.py SHARD.json...   (the table on stdout, sorted by ID)
"""
import json
import re
import sys
from collections import defaultdict


def natural(key):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", key)]


def main(paths):
    rows = defaultdict(lambda: defaultdict(float))
    ran = defaultdict(lambda: defaultdict(int))
    for path in paths:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        for suite in doc.get("testsuites", []):
            for test in suite.get("testsuite", []):
                pid = test.get("id")
                if not pid:
                    continue  # not a property's test
                r = rows[pid]
                for key in ("cases", "passed", "not_supported", "not_applicable"):
                    r[key] += int(test.get(key, 0))
                r["failed"] += 1 if test.get("failures") else 0
                r["worst"] = max(r["worst"], float(test.get("worst_ratio", 0)))
                for kind in ("ran_per_kv_format", "ran_per_layout"):
                    for item in str(test.get(kind, "")).split():
                        name, _, n = item.rpartition(":")
                        ran[kind][name] += int(n)
    for pid in sorted(rows, key=natural):
        r = rows[pid]
        print(f"{pid:<16} cases {int(r['cases']):6d}  passed {int(r['passed']):6d}  "
              f"NotSupported {int(r['not_supported']):6d}  NotApplicable {int(r['not_applicable']):6d}  "
              f"failed {int(r['failed'])}  worst {r['worst']:.3f}")
    for kind, title in (("ran_per_kv_format", "ran per kv format"), ("ran_per_layout", "ran per layout")):
        if ran[kind]:
            print(f"{title} (cases x properties):",
                  " ".join(f"{k}:{v}" for k, v in sorted(ran[kind].items(), key=lambda kv: natural(kv[0]))))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
