#!/usr/bin/env python3
"""The tiny MLP's training step at batches 2, 4 and 8, named as the batch-size sweep names
its exports (tools/sweep: mlp-tiny-train-b<N>.pt2 and .facts.json), for the Sweep tests that
are about the sweep's decisions rather than its exporting (oom.test, nothing-fits.test copy
them into their output's exports/, where the sweep reuses them; sweep.test still exports).

    make_sweep_exports.py -o OUTDIR

One process for the three (torch is imported once, not once per batch as the sweep's
subprocesses do: issue 52). An export that exists and is newer than the exporter and the
model zoo (tools/zoo) is kept, the sweep's own rule; export_model.py writes each file
atomically.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTER = os.path.join(HERE, "..", "..", "..", "tools", "export", "export_model.py")
BATCHES = (2, 4, 8)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    sys.path.insert(0, os.path.dirname(EXPORTER))
    import export_model
    import zoo  # on the path since export_model imports it

    newest_code = max(os.path.getmtime(f) for f in [EXPORTER, *zoo.SOURCES])
    made = 0
    for batch in BATCHES:
        path = os.path.join(args.output, f"mlp-tiny-train-b{batch}.pt2")
        facts = path[:-len(".pt2")] + ".facts.json"
        if (os.path.isfile(path) and os.path.isfile(facts)
                and os.path.getmtime(path) >= newest_code):
            continue
        rc = export_model.main(["--model", "mlp", "--mode", "train", "--tiny", "--batch",
                                str(batch), "-o", path, "--quiet"])
        if rc != 0:
            print(f"make_sweep_exports.py: exporting batch {batch} failed ({rc})", file=sys.stderr)
            return rc
        made += 1
    print(f"make_sweep_exports.py: {made} exported, {len(BATCHES) - made} cached in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
