#!/usr/bin/env python3
"""Checks what graph-opt-sweep wrote in OUTDIR and prints one line per finding for FileCheck.

    check_sweep.py OUTDIR

- csv: the header, then each row as "batch status" (values checked: a peak and a step time
  on ok/check rows, samples_per_s = batch / step_time_s, none on the others);
- json: the same rows as the CSV, the format, the fit (slope and intercept present when two
  batches ran), the limit and the answer; the answer is a batch that ran with its peak under
  the limit, and a check row's measured peak;
- png: sweep.png decodes (pillow) and its size;
- dirs, files: what OUTDIR holds (the b<N> directories by batch), and that no temporary file (".name.*.tmp") was left.
Exits 1 with a message at the first thing that is wrong.
"""
import csv
import json
import math
import os
import sys


def fail(msg):
    print(f"check_sweep.py: FAIL: {msg}")
    sys.exit(1)


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "sweep.csv"), newline="") as f:
        rows = list(csv.reader(f))
    print("csv: " + ",".join(rows[0]))
    csv_rows = rows[1:]
    for r in csv_rows:
        batch, peak, step, rate, status = r
        if status in ("ok", "check"):
            if not (int(peak) > 0 and float(step) > 0):
                fail(f"row {r}: no peak or step time")
            if not math.isclose(float(rate), int(batch) / float(step), rel_tol=1e-4):
                fail(f"row {r}: samples_per_s is not batch / step_time_s")
        elif status in ("out_of_memory", "skipped"):
            if peak or step or rate:
                fail(f"row {r}: values on a {status} row")
        else:
            fail(f"row {r}: unknown status")
        print(f"csv: {batch} {status}")

    with open(os.path.join(out, "sweep.json")) as f:
        doc = json.load(f)
    if doc["format"] != "graph-opt-sweep/1":
        fail(f"format {doc['format']}")
    if [[str(r["batch"]), r["status"]] for r in doc["rows"]] != [[r[0], r[4]] for r in csv_rows]:
        fail("sweep.json's rows are not sweep.csv's")
    for r, c in zip(doc["rows"], csv_rows):
        if r["peak_bytes"] is not None and int(round(r["peak_bytes"])) != int(c[1]):
            fail(f"batch {c[0]}: peak {r['peak_bytes']} in json, {c[1]} in csv")
    fit = doc["fit"]
    if fit["points"] >= 2:
        for key in ("peak_intercept_bytes", "peak_slope_bytes_per_sample", "time_intercept_s",
                    "time_slope_s_per_sample"):
            if not isinstance(fit[key], (int, float)):
                fail(f"fit: {key} is {fit[key]}")
        print(f"json: fit over {fit['points']} batches, slope "
              f"{'positive' if fit['peak_slope_bytes_per_sample'] > 0 else 'not positive'}")
    limit = doc["memory_limit_bytes"]
    largest = doc["largest_batch"]
    if limit is not None:
        print(f"json: limit {limit}, fitted {doc['fitted_batch']}, largest {largest}")
        if largest is not None:
            ran = [r for r in doc["rows"] if r["batch"] == largest
                   and r["status"] in ("ok", "check") and r["peak_bytes"] <= limit]
            if not ran or doc["largest_batch_peak_bytes"] > limit:
                fail(f"largest batch {largest} did not run under the limit")
            print("json: the largest batch ran under the limit")
        for c in doc["checks"]:
            print(f"json: check batch {c['batch']} {c['status']} "
                  f"{'fits' if c['fits'] else 'does not fit'}")
            if c["fits"] != (c["peak_bytes"] is not None and c["peak_bytes"] <= limit):
                fail(f"check {c}: 'fits' does not match its peak")
        if doc["note"]:
            print(f"json: note: {doc['note']}")

    from PIL import Image
    with Image.open(os.path.join(out, "sweep.png")) as im:
        im.load()
        print(f"png: {im.format} {im.width}x{im.height}")

    names = sorted(os.listdir(out))
    temps = [n for n in names if n.startswith(".") or n.endswith(".tmp")]
    for sub in names:
        if os.path.isdir(os.path.join(out, sub)):
            temps += [f"{sub}/{n}" for n in os.listdir(os.path.join(out, sub))
                      if n.startswith(".") or n.endswith(".tmp")]
    if temps:
        fail(f"temporary files left: {temps}")
    dirs = sorted((n for n in names if os.path.isdir(os.path.join(out, n))),
                  key=lambda n: (not n.startswith("b"), int(n[1:]) if n[1:].isdigit() else 0, n))
    print("dirs: " + " ".join(dirs))
    print("files: " + " ".join(n for n in names if n not in dirs))


if __name__ == "__main__":
    main()
