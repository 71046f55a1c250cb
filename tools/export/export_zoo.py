#!/usr/bin/env python3
"""Export several zoo models (default: all, both modes, --tiny) into one directory.

Writes DIR/<model>-<mode>.pt2 and DIR/<model>-<mode>.facts.json for each, prints one line
per export with its node count and time, and exits 1 if any export failed.

    export_zoo.py -o build/zoo                       # every model, both modes, tiny
    export_zoo.py -o /tmp/big --full --models resnet50,gpt2 --modes train
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_model  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="export_zoo.py", description=__doc__.splitlines()[0])
    p.add_argument("-o", "--out-dir", required=True, help="directory for the archives")
    p.add_argument("--models", default=",".join(export_model.MODELS),
                   help="comma-separated model names (default: all)")
    p.add_argument("--modes", default="eval,train", help="comma-separated: eval,train")
    p.add_argument("--full", action="store_true", help="default sizes instead of --tiny")
    args = p.parse_args(argv)

    models = [m for m in args.models.split(",") if m]
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in models if m not in export_model.MODELS]
    bad += [m for m in modes if m not in ("eval", "train")]
    if bad:
        p.error(f"unknown model or mode: {', '.join(bad)}")
    os.makedirs(args.out_dir, exist_ok=True)

    failures = 0
    print(f"{'model':<10} {'mode':<5} {'nodes':>6} {'ops':>6} {'params':>6} {'export_s':>8} "
          f"{'total_s':>8}  archive")
    for model in models:
        for mode in modes:
            out = os.path.join(args.out_dir, f"{model}-{mode}.pt2")
            argv_one = ["--model", model, "--mode", mode, "-o", out, "-q"]
            if not args.full:
                argv_one.append("--tiny")
            start = time.perf_counter()
            rc = export_model.main(argv_one)
            total = time.perf_counter() - start
            if rc != 0:
                failures += 1
                print(f"{model:<10} {mode:<5} FAILED (exit {rc}) after {total:.1f}s", flush=True)
                continue
            with open(out[: -len(".pt2")] + ".facts.json") as f:
                facts = json.load(f)
            size_mb = os.path.getsize(out) / 2**20
            print(f"{model:<10} {mode:<5} {facts['num_nodes']:>6} {facts['num_op_nodes']:>6} "
                  f"{facts['num_parameters']:>6} {facts['export_seconds']:>8.2f} {total:>8.2f}"
                  f"  {out} ({size_mb:.1f} MiB)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
