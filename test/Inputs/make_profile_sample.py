#!/usr/bin/env python3
"""Writes the hand-made profile sample in test/Inputs/profile-sample/.

The `profile` pass writes profile.json, node_stats.csv and activation_stats.csv into
`graph-opt --report-dir DIR`; the report (tools/report/make_report.py) and its tests are
built against this sample, which follows that schema ("graph-opt-profile/1") exactly.

It describes one training step of a small CNN (three conv/batch-norm/ReLU/max-pool blocks, a
two-layer head with dropout, cross-entropy, Adam with foreach kernels) on CPU, batch 32,
3x32x32 images: 61 nodes, forward, backward and optimizer phases. The node times are made up
(but plausible for a CPU); everything else follows from the graph written below, so the
numbers agree with each other:

- live_bytes_by_kind is a liveness simulation of that graph: a storage is allocated by the
  node that makes it and freed after the last node that reads it; graph inputs (weights,
  optimizer state, the batch) are live throughout, graph outputs are kept to the end; plus
  the operator scratch memory given for a few nodes (SCRATCH).
- the measured per-node peak is the simulated total plus a few KiB the simulation does not
  model; peak_bytes and peak_rank are its maximum, and breakdown_at_peak is the simulated
  breakdown at that node with the unmodelled bytes counted as SCRATCH (so it sums to
  peak_bytes).
- activations are the values made in forward and read in backward; inactive_time_s is the
  time of the nodes between their last forward use and first backward use; recomputing one
  reruns its producer, and the producers of inputs that are no longer live by then.

Run it again after changing it:  python3 test/Inputs/make_profile_sample.py
"""
import csv
import json
import os
import sys

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profile-sample")
KINDS = ["PARAM", "GRAD", "ACT", "OPT_STATE", "OTHER", "SCRATCH"]
F32 = 4
I64 = 8
BATCH = 32


class Graph:
    """Values (name -> bytes, kind, producer rank, storage) and nodes in execution order."""

    def __init__(self):
        self.values = {}
        self.nodes = []
        self.outputs = set()
        self.counters = {}
        self.getitems = 0

    def input(self, name, nbytes, kind):
        self.values[name] = {"bytes": nbytes, "kind": kind, "rank": -1, "storage": name}
        return name

    def fresh(self, base):
        n = self.counters.get(base, 0)
        self.counters[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def node(self, op, gtype, module, source, inputs, outputs, time_us, scratch=0,
             view_of=None, kinds=None, node_type=None):
        """Adds a node. outputs: list of byte sizes (0 with view_of: a view of that value).
        kinds: the kind of each output (default: decided later, ACT or OTHER)."""
        rank = len(self.nodes)
        name = self.fresh(op.split("::")[1].split(".")[0])
        if len(outputs) == 1:
            out_names = [name]
        else:
            out_names = []
            for _ in outputs:
                out_names.append("getitem" if self.getitems == 0 else f"getitem_{self.getitems}")
                self.getitems += 1
        for i, (out, nbytes) in enumerate(zip(out_names, outputs)):
            storage = self.values[view_of]["storage"] if view_of else out
            kind = kinds[i] if kinds else None
            self.values[out] = {"bytes": 0 if view_of else nbytes, "kind": kind, "rank": rank,
                                "storage": storage}
        self.nodes.append({"rank": rank, "node_name": name, "op": op, "gtype": gtype,
                           "module": module, "source": source, "inputs": list(inputs),
                           "outputs": out_names, "time_s": time_us * 1e-6,
                           "scratch": scratch, "node_type": node_type})
        return out_names[0] if len(out_names) == 1 else out_names


def build():
    g = Graph()
    params = {}

    def param(name, nbytes):
        params[name] = g.input(name, nbytes, "PARAM")

    # Weights, the batch, batch-norm buffers.
    chans = [(3, 16, 32), (16, 32, 16), (32, 64, 8)]   # (in, out, spatial size)
    for b, (cin, cout, _) in enumerate(chans, 1):
        param(f"block{b}.conv.weight", cout * cin * 9 * F32)
        param(f"block{b}.conv.bias", cout * F32)
        param(f"block{b}.bn.weight", cout * F32)
        param(f"block{b}.bn.bias", cout * F32)
    param("head.fc1.weight", 256 * 1024 * F32)
    param("head.fc1.bias", 256 * F32)
    param("head.fc2.weight", 10 * 256 * F32)
    param("head.fc2.bias", 10 * F32)
    x = g.input("x", BATCH * 3 * 32 * 32 * F32, "OTHER")
    target = g.input("target", BATCH * I64, "OTHER")
    buffers = {}
    for b, (_, cout, _) in enumerate(chans, 1):
        buffers[b] = (g.input(f"block{b}.bn.running_mean", cout * F32, "OTHER"),
                      g.input(f"block{b}.bn.running_var", cout * F32, "OTHER"))
    param_bytes = sum(g.values[p]["bytes"] for p in params.values())
    exp_avgs = g.input("exp_avgs", param_bytes, "OPT_STATE")
    exp_avg_sqs = g.input("exp_avg_sqs", param_bytes, "OPT_STATE")
    steps = g.input("state_steps", len(params) * F32, "OPT_STATE")

    conv_src = "torch/nn/modules/conv.py:548"
    bn_src = "torch/nn/functional.py:2822"
    relu_src = "torch/nn/functional.py:1710"
    pool_src = "torch/nn/functional.py:832"
    lin_src = "torch/nn/modules/linear.py:134"
    drop_src = "torch/nn/functional.py:1425"
    loss_src = "torch/nn/functional.py:3494"
    adam_src = "torch/optim/adam.py:{}"

    # ---- forward ------------------------------------------------------------------------
    fw_times = {  # µs: conv, bn, relu, pool per block
        1: (640, 215, 92, 348), 2: (781, 112, 47, 171), 3: (523, 61, 26, 84)}
    conv_fw_scratch = {1: 24576, 2: 75264, 3: 294912}
    saved = {}
    h = x
    for b, (cin, cout, size) in enumerate(chans, 1):
        t_conv, t_bn, t_relu, t_pool = fw_times[b]
        act = BATCH * cout * size * size * F32
        m = f"block{b}"
        conv = g.node("aten::convolution", "forward", f"{m}.conv", conv_src,
                      [h, params[f"{m}.conv.weight"], params[f"{m}.conv.bias"]], [act], t_conv,
                      scratch=conv_fw_scratch[b])
        bn_out, mean, invstd, new_rm, new_rv = g.node(
            "aten::_native_batch_norm_legit_functional", "forward", f"{m}.bn", bn_src,
            [conv, params[f"{m}.bn.weight"], params[f"{m}.bn.bias"], *buffers[b]],
            [act, cout * F32, cout * F32, cout * F32, cout * F32], t_bn)
        g.outputs.update([new_rm, new_rv])
        relu = g.node("aten::relu", "forward", f"{m}.relu", relu_src, [bn_out], [act], t_relu)
        pooled, idx = g.node("aten::max_pool2d_with_indices", "forward", f"{m}.pool", pool_src,
                             [relu], [act // 4, act // 4 // F32 * I64], t_pool)
        saved[b] = dict(conv=conv, mean=mean, invstd=invstd, relu=relu, idx=idx, input=h)
        h = pooled
    flat = g.node("aten::view", "forward", "", "small_cnn.py:31", [h], [0], 2.1, view_of=h)
    t_fc1 = g.node("aten::t", "forward", "head.fc1", lin_src, [params["head.fc1.weight"]], [0],
                   1.9, view_of=params["head.fc1.weight"])
    fc1 = g.node("aten::addmm", "forward", "head.fc1", lin_src,
                 [params["head.fc1.bias"], flat, t_fc1], [BATCH * 256 * F32], 94)
    relu_fc1 = g.node("aten::relu", "forward", "head.relu", relu_src, [fc1],
                      [BATCH * 256 * F32], 6.2)
    drop, mask = g.node("aten::native_dropout", "forward", "head.dropout", drop_src, [relu_fc1],
                        [BATCH * 256 * F32, BATCH * 256], 27)
    t_fc2 = g.node("aten::t", "forward", "head.fc2", lin_src, [params["head.fc2.weight"]], [0],
                   1.8, view_of=params["head.fc2.weight"])
    logits = g.node("aten::addmm", "forward", "head.fc2", lin_src,
                    [params["head.fc2.bias"], drop, t_fc2], [BATCH * 10 * F32], 12.5)
    logsm = g.node("aten::_log_softmax", "forward", "", loss_src, [logits],
                   [BATCH * 10 * F32], 8.4)
    loss, total_weight = g.node("aten::nll_loss_forward", "forward", "", loss_src,
                                [logsm, target], [F32, F32], 7.1)
    g.outputs.add(loss)
    forward_end = len(g.nodes) - 1

    # ---- backward -----------------------------------------------------------------------
    grads = {}

    def grad_kinds(n):
        return ["GRAD"] * n

    tangent = g.node("aten::ones_like", "backward", "", "", [loss], [F32], 3.2)
    g_nll = g.node("aten::nll_loss_backward", "backward", "", loss_src,
                   [tangent, logsm, target, total_weight], [BATCH * 10 * F32], 9.3)
    g_logits = g.node("aten::_log_softmax_backward_data", "backward", "", loss_src,
                      [g_nll, logsm], [BATCH * 10 * F32], 8.8)
    w2 = g.node("aten::t", "backward", "head.fc2", lin_src, [t_fc2], [0], 1.7,
                view_of=params["head.fc2.weight"])
    g_drop = g.node("aten::mm", "backward", "head.fc2", lin_src, [g_logits, w2],
                    [BATCH * 256 * F32], 11.4)
    g_logits_t = g.node("aten::t", "backward", "head.fc2", lin_src, [g_logits], [0], 1.6,
                        view_of=g_logits)
    grads["head.fc2.weight"] = g.node("aten::mm", "backward", "head.fc2", lin_src,
                                      [g_logits_t, drop], [10 * 256 * F32], 10.2,
                                      kinds=grad_kinds(1))
    s = g.node("aten::sum", "backward", "head.fc2", lin_src, [g_logits], [10 * F32], 6.3,
               kinds=grad_kinds(1))
    grads["head.fc2.bias"] = g.node("aten::view", "backward", "head.fc2", lin_src, [s], [0],
                                    1.9, view_of=s)
    g_relu_fc1 = g.node("aten::native_dropout_backward", "backward", "head.dropout", drop_src,
                        [g_drop, mask], [BATCH * 256 * F32], 10.1)
    g_fc1 = g.node("aten::threshold_backward", "backward", "head.relu", relu_src,
                   [g_relu_fc1, relu_fc1], [BATCH * 256 * F32], 8.3)
    w1 = g.node("aten::t", "backward", "head.fc1", lin_src, [t_fc1], [0], 1.7,
                view_of=params["head.fc1.weight"])
    g_flat = g.node("aten::mm", "backward", "head.fc1", lin_src, [g_fc1, w1],
                    [BATCH * 1024 * F32], 86)
    g_fc1_t = g.node("aten::t", "backward", "head.fc1", lin_src, [g_fc1], [0], 1.6,
                     view_of=g_fc1)
    grads["head.fc1.weight"] = g.node("aten::mm", "backward", "head.fc1", lin_src,
                                      [g_fc1_t, flat], [256 * 1024 * F32], 112,
                                      kinds=grad_kinds(1))
    s = g.node("aten::sum", "backward", "head.fc1", lin_src, [g_fc1], [256 * F32], 9.1,
               kinds=grad_kinds(1))
    grads["head.fc1.bias"] = g.node("aten::view", "backward", "head.fc1", lin_src, [s], [0],
                                    1.8, view_of=s)
    gh = g.node("aten::view", "backward", "", "small_cnn.py:31", [g_flat], [0], 2.0,
                view_of=g_flat)
    bw_times = {  # µs: pool, relu, bn, conv backward per block
        3: (121, 48, 152, 1104), 2: (252, 91, 243, 1613), 1: (484, 171, 452, 951)}
    conv_bw_scratch = {3: 393216, 2: 786432, 1: 1572864}
    for b in (3, 2, 1):
        cin, cout, size = chans[b - 1]
        t_pool, t_relu, t_bn, t_conv = bw_times[b]
        act = BATCH * cout * size * size * F32
        m, sv = f"block{b}", saved[b]
        gp = g.node("aten::max_pool2d_with_indices_backward", "backward", f"{m}.pool", pool_src,
                    [gh, sv["relu"], sv["idx"]], [act], t_pool)
        gr = g.node("aten::threshold_backward", "backward", f"{m}.relu", relu_src,
                    [gp, sv["relu"]], [act], t_relu)
        gb_in, gb_w, gb_b = g.node(
            "aten::native_batch_norm_backward", "backward", f"{m}.bn", bn_src,
            [gr, sv["conv"], params[f"{m}.bn.weight"], *buffers[b], sv["mean"], sv["invstd"]],
            [act, cout * F32, cout * F32], t_bn, kinds=["OTHER", "GRAD", "GRAD"])
        grads[f"{m}.bn.weight"], grads[f"{m}.bn.bias"] = gb_w, gb_b
        in_bytes = 0 if b == 1 else BATCH * cin * (2 * size) ** 2 // 4 * F32
        outs = [cout * cin * 9 * F32, cout * F32] if b == 1 else \
            [in_bytes, cout * cin * 9 * F32, cout * F32]
        res = g.node("aten::convolution_backward", "backward", f"{m}.conv", conv_src,
                     [gb_in, sv["input"], params[f"{m}.conv.weight"]], outs, t_conv,
                     scratch=conv_bw_scratch[b],
                     kinds=(["GRAD", "GRAD"] if b == 1 else ["OTHER", "GRAD", "GRAD"]))
        if b == 1:
            grads[f"{m}.conv.weight"], grads[f"{m}.conv.bias"] = res
        else:
            gh, grads[f"{m}.conv.weight"], grads[f"{m}.conv.bias"] = res
    backward_end = len(g.nodes) - 1
    for gr in grads.values():
        g.outputs.add(gr)

    # ---- optimizer (Adam, foreach kernels over the 16 parameters) -------------------------
    gl = [grads[p] for p in params]
    pl = list(params.values())
    opt = [("aten::_foreach_add_", [steps], [], 31, "OPT_STATE", 475),
           ("aten::_foreach_lerp_", [exp_avgs, *gl], [], 138, "OPT_STATE", 480),
           ("aten::_foreach_mul_", [exp_avg_sqs], [], 97, "OPT_STATE", 481),
           ("aten::_foreach_addcmul_", [exp_avg_sqs, *gl], [], 151, "OPT_STATE", 481)]
    for op, ins, outs, t, nt, line in opt:
        g.node(op, "optimizer", "", adam_src.format(line), ins, outs or [0], t,
               view_of=ins[0], node_type=nt)
    bc1 = g.node("aten::_foreach_pow", "optimizer", "", adam_src.format(520), [steps],
                 [len(params) * F32], 24)
    bc2 = g.node("aten::_foreach_pow", "optimizer", "", adam_src.format(521), [steps],
                 [len(params) * F32], 23)
    denom = g.node("aten::_foreach_sqrt", "optimizer", "", adam_src.format(545), [exp_avg_sqs],
                   [param_bytes], 164)
    g.node("aten::_foreach_div_", "optimizer", "", adam_src.format(546), [denom, bc2], [0], 118,
           view_of=denom)
    g.node("aten::_foreach_add_", "optimizer", "", adam_src.format(547), [denom], [0], 96,
           view_of=denom)
    g.node("aten::_foreach_addcdiv_", "optimizer", "", adam_src.format(549),
           [*pl, exp_avgs, denom, bc1], [0], 187, view_of=pl[0], node_type="PARAM")
    return g, forward_end, backward_end


def simulate(g):
    """Liveness: per node, the bytes live by kind while it runs, and what is freed after it."""
    n = len(g.nodes)
    reads = {}   # storage -> ranks reading it
    for node in g.nodes:
        for v in node["inputs"]:
            reads.setdefault(g.values[v]["storage"], []).append(node["rank"])
    # Kinds: made in forward and read in backward -> ACT; the rest as given, else OTHER.
    bw_start = next(nd["rank"] for nd in g.nodes if nd["gtype"] != "forward")
    for name, v in g.values.items():
        if v["kind"] is None and name == v["storage"]:
            in_fw = 0 <= v["rank"] < bw_start
            v["kind"] = "ACT" if in_fw and any(r >= bw_start for r in reads.get(name, [])) \
                else "OTHER"
    for name, v in g.values.items():   # a view read in backward keeps its base as ACT
        if v["storage"] != name and v["kind"] is None:
            v["kind"] = g.values[v["storage"]]["kind"]
    live, freed_after = [], [0] * n
    for name, v in g.values.items():
        if name != v["storage"] or v["bytes"] == 0:
            continue
        start = max(v["rank"], 0)
        if v["rank"] < 0 or name in g.outputs or any(
                g.values[o]["storage"] == name for o in g.outputs):
            end = n - 1
        else:
            end = max(reads.get(name, [start]))
            freed_after[end] += v["bytes"]
        live.append((start, end, v["kind"], v["bytes"]))
    by_kind = []
    for node in g.nodes:
        r = node["rank"]
        row = dict.fromkeys(KINDS, 0)
        for start, end, kind, nbytes in live:
            if start <= r <= end:
                row[kind] += nbytes
        row["SCRATCH"] = node["scratch"]
        by_kind.append(row)
    return by_kind, freed_after, reads


def unmodelled_bytes(node):
    """A few KiB per compute node that the simulation does not see (allocator bookkeeping,
    small temporaries inside kernels); deterministic, so the sample is reproducible."""
    if node["op"] in ("aten::view", "aten::t"):
        return 0
    return 512 * ((node["rank"] * 7919) % 9)


def activations(g, forward_end, reads):
    nodes = g.nodes
    rows = []
    for name, v in g.values.items():
        if v["kind"] != "ACT" or name != v["storage"] or v["bytes"] == 0:
            continue
        ranks = reads[name]
        fw = [r for r in ranks if r <= forward_end]
        bw = [r for r in ranks if r > forward_end]
        first_bw = min(bw)
        idle_from = max(fw) if fw else v["rank"]
        inactive = sum(nd["time_s"] for nd in nodes[idle_from + 1:first_bw])
        # Recompute: rerun the producer; an input not live at first_bw is recomputed too.
        todo, seen, extra = [v["rank"]], set(), 0
        while todo:
            r = todo.pop()
            if r in seen:
                continue
            seen.add(r)
            for inp in nodes[r]["inputs"]:
                st = g.values[inp]["storage"]
                src = g.values[st]
                if src["rank"] < 0:
                    continue
                still_live = src["kind"] == "ACT" and max(reads[st]) >= first_bw
                if not still_live:
                    todo.append(src["rank"])
                    extra += src["bytes"]
        recomp_time = sum(nodes[r]["time_s"] for r in seen)
        random = any(nodes[r]["op"] == "aten::native_dropout" for r in seen)
        rows.append({
            "activation_name": name, "creation_rank": v["rank"],
            "last_fw_use_rank": max(fw) if fw else -1, "first_bw_use_rank": first_bw,
            "last_bw_use_rank": max(bw), "median_mem_size_bytes": v["bytes"],
            "inactive_time_s": round(inactive, 9), "recomp_time_s": round(recomp_time, 9),
            "recomp_memory_bytes": extra,
            "recompute_ratio": round(v["bytes"] / recomp_time, 1),
            "recompute_nodes": len(seen), "recomputable": not random})
    rows.sort(key=lambda a: (a["creation_rank"], a["activation_name"]))
    return rows


def node_type(g, node):
    if node["node_type"]:
        return node["node_type"]
    kinds = {g.values[g.values[o]["storage"]]["kind"] for o in node["outputs"]}
    for k in ("GRAD", "ACT"):
        if k in kinds:
            return k
    return "OTHER"


def main():
    g, forward_end, backward_end = build()
    by_kind, freed_after, reads = simulate(g)
    nodes = []
    for node, live in zip(g.nodes, by_kind):
        total = sum(live.values())
        measured_peak = total + unmodelled_bytes(node)
        active = total - live["SCRATCH"] - freed_after[node["rank"]]
        nodes.append({
            "rank": node["rank"], "node_name": node["node_name"], "op": node["op"],
            "node_type": node_type(g, node), "gtype": node["gtype"],
            "median_run_time_s": round(node["time_s"], 9),
            "median_peak_mem_bytes": measured_peak, "median_active_mem_bytes": active,
            "output_bytes": sum(g.values[o]["bytes"] for o in node["outputs"]),
            "device": "cpu", "module": node["module"], "source": node["source"],
            "live_bytes_by_kind": live})
    peak = max(nodes, key=lambda nd: nd["median_peak_mem_bytes"])
    breakdown = dict(peak["live_bytes_by_kind"])
    breakdown["SCRATCH"] += peak["median_peak_mem_bytes"] - sum(breakdown.values())
    sum_time = sum(nd["median_run_time_s"] for nd in nodes)
    overhead = 1.8e-6
    step_time = sum_time + 47e-6          # what no node's median holds, and the hooks' error
    profile = {
        "format": "graph-opt-profile/1",
        "graph": "small-cnn-train",
        "device": "cpu",
        "time_source": "steady_clock around each node, after the node's outputs are ready",
        "memory_source": "CPU allocator (c10 reportMemoryUsage): bytes allocated, "
                         "per-node high-water mark",
        "warmup_runs": 1, "measured_runs": 5,
        "num_nodes": len(nodes),
        "step_time_s": round(step_time, 9),
        "profiled_step_time_s": round(step_time + overhead * len(nodes), 9),
        "sum_node_time_s": round(sum_time, 9),
        "run_node_time_s": round(sum_time + 40e-6, 9),  # per-run sums hold what medians miss
        "profiler_overhead_per_node_s": overhead,
        "peak_bytes": peak["median_peak_mem_bytes"],
        "peak_rank": peak["rank"],
        "simulated_peak_bytes": max(sum(nd["live_bytes_by_kind"].values()) for nd in nodes),
        "memory_limit_bytes": None,
        "forward_end_rank": forward_end,
        "backward_end_rank": backward_end,
        "breakdown_at_peak": breakdown,
        "nodes": nodes,
        "activations": activations(g, forward_end, reads),
    }
    assert sum(breakdown.values()) == profile["peak_bytes"]
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "profile.json"), "w") as f:
        json.dump(profile, f, indent=1)
        f.write("\n")
    write_csv("node_stats.csv", nodes,
              ["rank", "node_name", "node_type", "gtype", "median_run_time_s",
               "median_peak_mem_bytes", "median_active_mem_bytes", "device"])
    write_csv("activation_stats.csv", profile["activations"],
              ["activation_name", "creation_rank", "last_fw_use_rank", "first_bw_use_rank",
               "last_bw_use_rank", "median_mem_size_bytes", "inactive_time_s", "recomp_time_s",
               "recomp_memory_bytes", "recompute_ratio"])
    print(f"{OUT_DIR}: {len(nodes)} nodes, {len(profile['activations'])} activations, "
          f"peak {profile['peak_bytes']} B at rank {profile['peak_rank']}", file=sys.stderr)


def write_csv(name, rows, columns):
    with open(os.path.join(OUT_DIR, name), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow([row[c] for c in columns])


if __name__ == "__main__":
    main()
