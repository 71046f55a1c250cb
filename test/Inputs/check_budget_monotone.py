"""Sweeps checkpoint{activations=B%} over budgets on one graph and checks that
the plans are monotone in the budget: as it tightens, the predicted extra time
never falls, and the predicted and the measured peak never rise.

usage: check_budget_monotone.py GRAPH_OPT MODEL OUTDIR B1 B2 ... [-- OPTION ...]

Budgets are given loose to tight (percent). Between two of the ladder's rungs
(50, 30, 10, 5%) all three are monotone; a budget between rungs is
checked for what the ladder promises it: no slower than any tighter rung, and
no higher peak than any looser one. Each plan runs once beside the
original (--benchmark=1), which measures its peak; costs are cost=flops (unless
an OPTION says otherwise), so every budget is planned on the same node times. Prints one line per budget and
"monotone" at the end; exits 1 naming the first pair out of order.
"""
import json
import os
import subprocess
import sys

# The budget ladder's rungs (BudgetLadder.h, standardRungs).
RUNGS = {50, 30, 10, 5}


def main(argv):
    graph_opt, model, outdir = argv[1:4]
    rest = argv[4:]
    options = []
    if "--" in rest:
        options = rest[rest.index("--") + 1:]
        rest = rest[:rest.index("--")]
    if not any(o.startswith("cost=") for o in options):
        options.append("cost=flops")
    extra = "".join("," + o for o in options)
    budgets = [float(b) for b in rest]
    if budgets != sorted(budgets, reverse=True):
        sys.exit("budgets must be given loose to tight")
    rows = []
    for b in budgets:
        d = os.path.join(outdir, f"b{b:g}")
        os.makedirs(d, exist_ok=True)
        bench = os.path.join(d, "bench.json")
        cmd = [graph_opt, model, f"-passes=checkpoint{{activations={b:g}%{extra}}}",
               "--report-dir", d, "--benchmark=1", "--benchmark-warmup", "0",
               "--benchmark-json", bench, "-o", os.devnull]
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"activations={b:g}%: graph-opt exit {done.returncode}: {done.stderr[-2000:]}")
        plan = json.load(open(os.path.join(d, "checkpoint.json")))
        measured = json.load(open(bench))["optimized"]["peak_bytes_above_inputs"]
        rows.append((b, plan["predicted_extra_seconds"], plan["predicted_peak_bytes"], measured,
                     plan["budget_ladder_from"]))
        print(f"activations={b:g}%: extra {plan['predicted_extra_seconds']:.6g} s, predicted peak "
              f"{plan['predicted_peak_bytes']}, measured peak {measured}, from "
              f"{plan['budget_ladder_from'] or 'its own plan'}")
    # Every pair, looser first.
    for i, (b1, t1, p1, m1, _) in enumerate(rows):
        for b2, t2, p2, m2, _ in rows[i + 1:]:
            both = b1 in RUNGS and b2 in RUNGS
            if (both or b2 in RUNGS) and t2 < t1:
                sys.exit(f"not monotone: activations={b2:g}% predicts {t2:.6g} s extra, "
                         f"less than {t1:.6g} s at the looser {b1:g}%")
            if (both or b1 in RUNGS) and p2 > p1:
                sys.exit(f"not monotone: activations={b2:g}% predicts a peak of {p2} bytes, "
                         f"above {p1} at the looser {b1:g}%")
            if (both or b1 in RUNGS) and m2 > m1:
                sys.exit(f"not monotone: activations={b2:g}% measured a peak of {m2} bytes, "
                         f"above {m1} at the looser {b1:g}%")
    print("monotone")


if __name__ == "__main__":
    main(sys.argv)
