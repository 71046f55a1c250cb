"""Prints what test/Bench/run.test and peers.test check in a harness output directory: the CSV's
header and rows, results.json's keys, threads, rows (each checked against the rules of its
kind) and commit, the Pareto plots' PNG headers, and the files (no temporary file left
behind)."""
import csv
import json
import os
import re
import struct
import sys

out = sys.argv[1]
with open(os.path.join(out, "results.csv")) as f:
    reader = csv.reader(f)
    header = next(reader)
    print("csv:", ",".join(header))
    measured = [header.index(c) for c in ("backward_start_bytes", "peak_bytes",
                                          "time_median_s", "time_iqr_s")]
    for row in reader:
        print("csv:", row[0], row[1], row[2], row[4],
              "numbers" if all(row[i] for i in measured) else "blanks")
with open(os.path.join(out, "results.json")) as f:
    data = json.load(f)
print("json:", " ".join(sorted(data)))
print("json: format", data["format"], "runs", data["runs"], "warmup", data["warmup"],
      "threads", data["threads"], "graph-opt threads", (data["machine"] or {}).get("threads"))
print("json: peers", ",".join(data["peers"]), "pipelines", ";".join(data["pipelines"]))
print("json: commit", "ok" if re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", data["commit"])
      else data["commit"])
if data["machine"]:
    print("json: machine", " ".join(sorted(data["machine"])))


def close(a, b):
    return a is not None and b is not None and abs(a - b) <= 1e-12 * max(1.0, abs(b))


def consistent(r):
    """The row's numbers agree with one another and with its kind."""
    if r["verification"] in ("FAILED", "ERROR"):
        return (bool(r["note"]) and r["time_median_s"] is None and r["peak_bytes"] is None
                and r["backward_start_bytes"] is None)
    # What forward leaves for backward is live at that moment: never above the peak.
    ok = (r["peak_bytes"] > 0 and r["time_median_s"] > 0 and r["time_iqr_s"] >= 0
          and r["baseline_time_iqr_s"] >= 0
          and 0 < r["backward_start_bytes"] <= r["peak_bytes"]
          and 0 < r["baseline_backward_start_bytes"] <= r["baseline_peak_bytes"]
          and close(r["backward_start_ratio"],
                    r["backward_start_bytes"] / r["baseline_backward_start_bytes"])
          and close(r["peak_ratio"], r["peak_bytes"] / r["baseline_peak_bytes"])
          and close(r["time_ratio"], r["time_median_s"] / r["baseline_time_median_s"]))
    if r["system"] == "graph-opt" and r["config"] == "(original graph)":
        return ok and r["baseline"] == "eager" and r["nodes"] > 0 and r["nodes_ratio"] is None
    if r["system"] == "graph-opt":
        return (ok and r["baseline"] == "original graph" and r["nodes"] < r["baseline_nodes"]
                and close(r["nodes_ratio"], r["nodes"] / r["baseline_nodes"]))
    # A torch.compile memory budget is measured against torch.compile without one.
    want = "compile" if r["config"].startswith("compile-budget") else "eager"
    ok = ok and r["baseline"] == want and r["nodes"] is None
    if r["config"] == "eager":
        return (ok and r["time_ratio"] == 1.0 and r["peak_ratio"] == 1.0
                and r["backward_start_ratio"] == 1.0)
    if r["config"] == "checkpoint":  # the checkpointed blocks' activations are not kept
        return (ok and isinstance(r["blocks"], int) and r["blocks"] > 0
                and r["backward_start_ratio"] < 1)
    if r["config"].startswith("compile"):
        return ok and r["compile_s"] > 0
    return ok


for r in data["rows"]:
    verdict = "consistent" if consistent(r) else r
    extra = f" ({r['blocks']} blocks)" if r.get("blocks") else ""
    print(f"json: {r['model']} {r['system']} {r['config']} {r['verification']} {verdict}{extra}")
for name in sorted(os.listdir(out)):
    if name.endswith(".png"):
        with open(os.path.join(out, name), "rb") as f:
            head = f.read(24)
        w, h = struct.unpack(">II", head[16:24])
        print("png:", name, "PNG" if head[:8] == b"\x89PNG\r\n\x1a\n" else "not a PNG", w, h)
print("files:", " ".join(sorted(os.listdir(out))))
