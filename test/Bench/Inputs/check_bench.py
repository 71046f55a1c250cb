"""Prints what test/Bench/run.test checks in a harness output directory: the CSV's header and
rows, results.json's keys, rows and commit, the Pareto plots' PNG headers, and the files (no
temporary file left behind)."""
import csv
import json
import os
import re
import struct
import sys

out = sys.argv[1]
with open(os.path.join(out, "results.csv")) as f:
    reader = csv.reader(f)
    print("csv:", ",".join(next(reader)))
    for row in reader:
        print("csv:", row[0], row[1], row[2], "numbers" if all(row[3:]) else "blanks")
with open(os.path.join(out, "results.json")) as f:
    data = json.load(f)
print("json:", " ".join(sorted(data)))
print("json: format", data["format"], "runs", data["runs"], "warmup", data["warmup"])
print("json: commit", "ok" if re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", data["commit"])
      else data["commit"])
print("json: machine", " ".join(sorted(data["machine"])))
for r in data["rows"]:
    ok = (r["optimized_nodes"] < r["original_nodes"]
          and abs(r["nodes_ratio"] - r["optimized_nodes"] / r["original_nodes"]) < 1e-12
          and r["peak_ratio"] > 0 and r["time_ratio"] > 0
          and r["original_time_iqr_s"] >= 0 and r["optimized_time_iqr_s"] >= 0)
    print("json:", r["model"], r["pipeline"], r["verification"], "consistent" if ok else r)
for name in sorted(os.listdir(out)):
    if name.endswith(".png"):
        with open(os.path.join(out, name), "rb") as f:
            head = f.read(24)
        w, h = struct.unpack(">II", head[16:24])
        print("png:", name, "PNG" if head[:8] == b"\x89PNG\r\n\x1a\n" else "not a PNG", w, h)
print("files:", " ".join(sorted(os.listdir(out))))
