"""Round trips of graph-opt's fx <-> IR and .pt2 writer on exported models.

For each .pt2 given (default: every archive in $GRAPHOPT_ZOO_DIR or build/zoo):
  fx:   torch.export.load -> from_fx -> to_fx -> from_fx: the two IRs print the
        same .gir, and the rebuilt GraphModule's outputs are bitwise equal to
        the loaded program's;
  pt2:  after each pipeline, save_pt2 -> torch.export.load: the flat graph
        module's outputs are bitwise equal to graph-opt's executor on the
        rewritten graph, and reading the archive back prints the same .gir.
Prints one line per graph and check; exits 1 if any failed.

    python python/tools/roundtrip_zoo.py [--pipelines P;P] [model.pt2 ...]
"""
import argparse
import glob
import os
import sys
import tempfile
import time
import warnings

import torch

import graph_opt
from graph_opt.testing import bitwise_equal, flat_inputs, outputs_by_signature, run_flat

TRAIN_PIPELINES = ["", "repeat{cse,canonicalize,dce}", "checkpoint{activations=30%},reinplace",
                   "add-optimizer{kind=adamw}"]
EVAL_PIPELINES = ["", "repeat{cse,canonicalize,dce}"]


def check_fx(path):
    ep = torch.export.load(path)
    g1 = graph_opt.from_fx(ep, name=os.path.basename(path)[:-4].replace("-", "_"))
    gm2 = graph_opt.to_fx(g1)
    g2 = graph_opt.from_fx(gm2)
    same_ir = g1.print() == g2.print()
    flat = flat_inputs(ep)
    same_out = bitwise_equal(run_flat(ep.graph_module, [t.clone() for t in flat]),
                       run_flat(gm2, [t.clone() for t in flat]))
    return same_ir and same_out, f"ir {'same' if same_ir else 'DIFFERS'}, outputs " \
                                 f"{'bitwise equal' if same_out else 'DIFFER'}"


def check_pt2(path, pipeline, scratch):
    g = graph_opt.Graph.load(path)
    if pipeline:
        graph_opt.run_pipeline(g, pipeline)
    out = os.path.join(scratch, "out.pt2")
    g.save_pt2(out)
    back = graph_opt.Graph.load(out)
    same_ir = back.print() == g.print()
    ep = torch.export.load(out)
    flat = flat_inputs(ep)
    theirs = run_flat(ep.graph_module, flat)
    ours = outputs_by_signature(g, graph_opt.execute(g, seed=0), ep)
    same_out = bitwise_equal(theirs, ours)
    return same_ir and same_out, f"ir {'same' if same_ir else 'DIFFERS'}, torch outputs " \
                                 f"{'bitwise equal' if same_out else 'DIFFER'} to graph-opt's"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--pipelines", help="';'-separated pipelines for the .pt2 check")
    parser.add_argument("--no-fx", action="store_true")
    args = parser.parse_args()
    zoo = os.environ.get("GRAPHOPT_ZOO_DIR", "build/zoo")
    models = args.models or sorted(glob.glob(os.path.join(zoo, "*.pt2")))
    warnings.filterwarnings("ignore")
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        for path in models:
            name = os.path.basename(path)
            train = "-train" in name
            pipelines = args.pipelines.split(";") if args.pipelines is not None else \
                (TRAIN_PIPELINES if train else EVAL_PIPELINES)
            checks = [] if args.no_fx else [("fx round trip", lambda: check_fx(path))]
            checks += [(f".pt2 after '{p or 'no passes'}'",
                        lambda p=p: check_pt2(path, p, scratch)) for p in pipelines]
            for what, check in checks:
                start = time.time()
                try:
                    ok, detail = check()
                except Exception as e:  # report and go on
                    ok, detail = False, f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                failed += not ok
                print(f"{name:28} {what:52} {'ok  ' if ok else 'FAIL'} {detail} "
                      f"({time.time() - start:.1f} s)", flush=True)
    print(f"{failed} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
