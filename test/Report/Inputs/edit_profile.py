#!/usr/bin/env python3
"""Writes a changed copy of a profile.json, for the report's error tests.

    edit_profile.py SRC DST [--delete PATH]... [--set PATH JSON]... [--truncate BYTES]

PATH is a dotted key path; list items by index: nodes.3.gtype, breakdown_at_peak.ACT.
--truncate keeps only the first BYTES bytes of the result (malformed JSON).
"""
import argparse
import json


def walk(doc, path):
    *parents, last = path.split(".")
    for key in parents:
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    return doc, int(last) if isinstance(doc, list) else last


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--delete", action="append", default=[], metavar="PATH")
    ap.add_argument("--set", action="append", default=[], nargs=2, metavar=("PATH", "JSON"))
    ap.add_argument("--truncate", type=int, metavar="BYTES")
    args = ap.parse_args()
    with open(args.src) as f:
        doc = json.load(f)
    for path in args.delete:
        parent, key = walk(doc, path)
        del parent[key]
    for path, value in args.set:
        parent, key = walk(doc, path)
        parent[key] = json.loads(value)
    text = json.dumps(doc, indent=1)
    with open(args.dst, "w") as f:
        f.write(text[:args.truncate] if args.truncate is not None else text)


if __name__ == "__main__":
    main()
