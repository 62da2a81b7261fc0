#!/usr/bin/env python3
"""Prints criterion results as ratios against the baselines run beside them.

usage: scripts/bench-ratios.py [GROUP_PREFIX]
Reads target/criterion/<group>/<contender>/new/estimates.json (median point estimates).
"""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent / "target" / "criterion"
prefix = sys.argv[1] if len(sys.argv) > 1 else ""
rows = []
for group in sorted(p for p in root.rglob("new/estimates.json")):
    contender_dir = group.parent.parent
    name = contender_dir.relative_to(root)
    if not str(name).startswith(prefix):
        continue
    est = json.loads(group.read_text())
    rows.append((str(name.parent), name.name, est["median"]["point_estimate"]))

by_group = {}
for g, c, ns in rows:
    by_group.setdefault(g, {})[c] = ns
for g, cs in sorted(by_group.items()):
    line = [f"{g}:"]
    ours = cs.get("outpost")
    for c, ns in sorted(cs.items()):
        ratio = f" ({ns / ours:.2f}x ours)" if ours and c != "outpost" else ""
        line.append(f"{c} {ns:.0f} ns{ratio}")
    print("  ".join(line))
