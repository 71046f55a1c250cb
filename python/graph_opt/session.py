"""Profiler sessions for a training loop (docs/Profiling.md, "Profiler sessions").

    import graph_opt

    with graph_opt.profiler("prof", wait=1, warmup=1, active=3, model=model) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

    # or: each call of the decorated function is one step
    @graph_opt.profiler("prof", skip_first=10, active=5, model=model)
    def train_step(batch): ...

torch.profiler underneath, with its schedule (skip_first, wait, warmup, active, repeat) and
what a session adds around it:

- per-module attribution: with `model=`, every submodule's forward runs inside a
  record_function range "module:<qualified name>" (forward hooks; torch.profiler's own
  with_modules covers TorchScript only), so the trace nests operators under modules and the
  summary gives each module's time and FLOPs;
- per-rank outputs in TensorBoard's profiler-plugin layout: <dir>/<run>/trace_rank_<r>.<cycle>
  .pt.trace.json (worker "trace_rank_<r>", one span per recorded cycle; Chrome/Perfetto read
  them as they are) and summary_rank_<r>.json, written atomically;
- one console summary, printed by rank 0 only: the top operators by time with their FLOPs and
  achieved FLOP/s, and the top modules;
- NVTX ranges per step and per module for Nsight when nsight=True on CUDA (on the CPU a
  note says there are none).
"""
import functools
import json
import os
import warnings

import torch

__all__ = ["ProfilerSession", "profiler"]

_MODULE_PREFIX = "module:"
_NODE_PREFIX = "graph-opt:"  # compile.py's ranges around the nodes of an eager half
_ACTIVE = []  # the sessions started and not stopped, innermost last


def active():
    """The innermost running session, or None."""
    return _ACTIVE[-1] if _ACTIVE else None


def _rank():
    import torch.distributed as dist
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _write_atomically(path, write):
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def own_device_time(event):
    """(self us, total us, where) of a profiler event on the device it ran on: its kernels'
    time where it launched any (a CUDA operator), else its CPU time. Taking the device's
    column for every operator whenever a GPU is present made a CPU operator read 0 there."""
    if (event.device_time_total or 0) > 0:
        return event.self_device_time_total, event.device_time_total, "cuda"
    return event.self_cpu_time_total, event.cpu_time_total, "cpu"


class ProfilerSession:
    """A profiler session; see the module's docstring. Results after stop():
    `traces` (paths written), `recorded_steps` (the step numbers, from 0, each recorded
    cycle covered), `operators` and `modules` (the summary's rows, summed over the
    cycles), `summary` (the text rank 0 prints)."""

    def __init__(self, dir="graph_opt_profile", run="graph_opt", *, skip_first=0, wait=0,
                 warmup=1, active=3, repeat=1, with_flops=True, with_stack=False,
                 record_memory=False, model=None, nsight=False, print_summary=True, row_limit=10):
        for name, value, least in (("skip_first", skip_first, 0), ("wait", wait, 0),
                                   ("warmup", warmup, 0), ("active", active, 1),
                                   ("repeat", repeat, 0)):
            if not isinstance(value, int) or value < least:
                raise ValueError(f"graph_opt.profiler: {name}={value!r}: an integer of at least {least}")
        self.dir, self.run = dir, run
        self.skip_first, self.wait, self.warmup = skip_first, wait, warmup
        self.active, self.repeat = active, repeat
        self.with_flops, self.with_stack, self.record_memory = with_flops, with_stack, record_memory
        self.model, self.nsight = model, nsight
        self.print_summary, self.row_limit = print_summary, row_limit
        self.rank = _rank()
        self.traces, self.recorded_steps = [], []
        self.operators, self.modules = {}, {}
        self.summary = ""
        self.graph_nodes = {}  # (graph label, node name) -> trace calls and time
        self.joined = []       # per compiled graph: what the join with graph-opt's profile found
        self._prof = None
        self._hooks = []
        self._module_ranges = []
        self._step = 0
        self._stopped = False
        self._nvtx = nsight and torch.cuda.is_available()
        if nsight and not self._nvtx:
            warnings.warn("graph_opt.profiler: nsight=True emits NVTX ranges on CUDA only; this "
                          "run has no GPU, so there are none", stacklevel=2)

    # -- the session -------------------------------------------------------------------------
    def start(self):
        if self._prof is not None:
            raise RuntimeError("graph_opt.profiler: the session has already started")
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._prof = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(skip_first=self.skip_first, wait=self.wait,
                                             warmup=self.warmup, active=self.active,
                                             repeat=self.repeat),
            on_trace_ready=self._on_trace_ready, record_shapes=True,
            with_flops=self.with_flops, with_stack=self.with_stack,
            profile_memory=self.record_memory)
        if self.model is not None:
            self._add_module_hooks(self.model)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
            self._prof.__enter__()
        _ACTIVE.append(self)
        if self._nvtx:
            torch.cuda.nvtx.range_push(f"step {self._step}")
        return self

    def step(self):
        """The end of one training step."""
        if self._prof is None or self._stopped:
            raise RuntimeError("graph_opt.profiler: step() outside a running session")
        if self._nvtx:
            torch.cuda.nvtx.range_pop()
        self._step += 1
        with warnings.catch_warnings():
            # Each cycle's events are taken in _on_trace_ready, before torch clears them.
            warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
            self._prof.step()
        if self._nvtx:
            torch.cuda.nvtx.range_push(f"step {self._step}")

    def stop(self):
        if self._prof is None or self._stopped:
            return
        self._stopped = True
        if self._nvtx:
            torch.cuda.nvtx.range_pop()
        try:
            self._prof.__exit__(None, None, None)
        finally:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            for h in self._hooks:
                h.remove()
            self._hooks.clear()
        self._finish()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def __call__(self, fn):
        """As a decorator: each call of `fn` is one step; the session starts at the first
        call and stops when its schedule is done (or call stop())."""
        @functools.wraps(fn)
        def stepped(*args, **kwargs):
            if self._stopped:
                return fn(*args, **kwargs)
            if self._prof is None:
                self.start()
            try:
                return fn(*args, **kwargs)
            finally:
                self.step()
                if self.repeat and self._step >= self._schedule_steps():
                    self.stop()
        stepped.profiler = self
        return stepped

    def _schedule_steps(self):
        return self.skip_first + self.repeat * (self.wait + self.warmup + self.active)

    # -- per-module ranges -------------------------------------------------------------------
    def _add_module_hooks(self, model):
        for name, module in model.named_modules():
            label = _MODULE_PREFIX + (name or type(module).__name__)
            self._hooks.append(module.register_forward_pre_hook(self._enter_module(label)))
            self._hooks.append(module.register_forward_hook(self._exit_module, always_call=True))

    def _enter_module(self, label):
        def hook(module, args):
            r = torch.autograd.profiler.record_function(label)
            r.__enter__()
            self._module_ranges.append(r)
            if self._nvtx:
                torch.cuda.nvtx.range_push(label)
        return hook

    def _exit_module(self, module, args, output):
        if self._module_ranges:
            self._module_ranges.pop().__exit__(None, None, None)
            if self._nvtx:
                torch.cuda.nvtx.range_pop()

    # -- outputs -----------------------------------------------------------------------------
    def _on_trace_ready(self, prof):
        run_dir = os.path.join(self.dir, self.run)
        os.makedirs(run_dir, exist_ok=True)
        cycle = len(self.traces) + 1
        path = os.path.join(run_dir, f"trace_rank_{self.rank}.{cycle}.pt.trace.json")
        _write_atomically(path, prof.export_chrome_trace)
        self.traces.append(path)
        for e in prof.key_averages():
            if e.key.startswith(_MODULE_PREFIX) or e.key.startswith("ProfilerStep"):
                continue
            row = self.operators.setdefault(e.key, {"name": e.key, "calls": 0, "self_us": 0.0,
                                                    "total_us": 0.0, "flops": 0, "on": "cpu"})
            self_us, total_us, on = own_device_time(e)
            row["calls"] += e.count
            row["self_us"] += self_us
            row["total_us"] += total_us
            row["flops"] += e.flops or 0
            if on != "cpu":
                row["on"] = on
        steps = []
        for e in prof.events():
            # The steps this cycle recorded, as torch numbers them (from 0) in its
            # "ProfilerStep#N" ranges: exactly what the trace holds. (FunctionEvent.name
            # says "ProfilerStep*" for all; trace_name keeps the number.)
            if (e.trace_name or "").startswith("ProfilerStep#"):
                number = e.trace_name.split("#", 1)[1]
                if number.isdigit():
                    steps.append(int(number))
                continue
            if e.name.startswith(_NODE_PREFIX):
                label, node = e.name[len(_NODE_PREFIX):].split(":", 1)
                row = self.graph_nodes.setdefault((label, node), {"calls": 0, "total_us": 0.0})
                row["calls"] += 1
                row["total_us"] += e.cpu_time_total
                continue
            if not e.name.startswith(_MODULE_PREFIX):
                continue
            row = self.modules.setdefault(e.name[len(_MODULE_PREFIX):], {
                "module": e.name[len(_MODULE_PREFIX):], "calls": 0, "total_us": 0.0, "flops": 0})
            row["calls"] += 1
            row["total_us"] += e.cpu_time_total
            row["flops"] += _subtree_flops(e)
        self.recorded_steps.extend(sorted(steps))

    def _join_graph_opt_profiles(self):
        """Where the step ran graph_opt.backend(..., inner="eager") halves, graph-opt's own
        per-node profile of each, joined to the trace by node name: one CSV per rank."""
        import csv
        import sys
        compile_module = sys.modules.get("graph_opt.compile")
        graphs = dict(getattr(compile_module, "_EAGER_GRAPHS", []))
        by_graph = {}
        for (label, node), t in self.graph_nodes.items():
            by_graph.setdefault(label, {})[node] = t
        rows = []
        for label, nodes in sorted(by_graph.items()):
            gm = graphs.get(label)
            out_dir = os.path.join(self.dir, self.run, f"graph_opt_{label}_rank_{self.rank}")
            try:
                joined = _join_rows(label, gm, nodes, out_dir)
            except Exception as e:  # an fx graph graph-opt cannot import or run
                self.joined.append({"graph": label, "nodes": len(nodes), "joined": 0,
                                    "reason": f"{type(e).__name__}: {e}".splitlines()[0]})
                continue
            matched = sum(1 for r in joined if r["graph_opt_median_us"] is not None)
            self.joined.append({"graph": label, "nodes": len(joined), "joined": matched,
                                "profile": out_dir})
            rows.extend(joined)
        if rows:
            path = os.path.join(self.dir, self.run, f"graph_opt_nodes_rank_{self.rank}.csv")

            def write(p):
                with open(p, "w", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=list(rows[0]))
                    w.writeheader()
                    w.writerows(rows)
            _write_atomically(path, write)

    def _finish(self):
        ops = sorted(self.operators.values(), key=lambda r: -r["self_us"])
        for r in ops:
            r["flops_per_s"] = r["flops"] / (r["self_us"] * 1e-6) if r["self_us"] and r["flops"] else None
        mods = sorted(self.modules.values(), key=lambda r: -r["total_us"])
        if self.graph_nodes:
            self._join_graph_opt_profiles()
        else:
            import sys
            stats = getattr(sys.modules.get("graph_opt.compile"), "_STATS", None)
            if stats is not None and (stats.plans or stats.inference):
                # graph_opt.backend's Inductor halves: fused kernels, no node ranges
                self.joined.append({"graph": "inductor", "nodes": 0, "joined": 0, "reason": (
                    "graphs compiled by Inductor run fused kernels; graph-opt's per-node "
                    "profile is joined only with graph_opt.backend(..., inner='eager')")})
        self.summary = _format_summary(ops[:self.row_limit], mods[:self.row_limit],
                                       self.recorded_steps, self.traces, self.joined)
        if self.traces:
            path = os.path.join(self.dir, self.run, f"summary_rank_{self.rank}.json")
            doc = {"format": "graph-opt-profiler-session/1", "rank": self.rank,
                   "recorded_steps": self.recorded_steps, "traces": self.traces,
                   "operators": ops, "modules": mods, "graph_opt_join": self.joined}
            def write(p):
                with open(p, "w") as f:
                    json.dump(doc, f, indent=1)
            _write_atomically(path, write)
        if self.print_summary and self.rank == 0:
            print(self.summary)


def _join_rows(label, gm, trace_rows, out_dir):
    """graph-opt's profile of one compiled eager graph (from_fx, then the profile pass on
    seeded stand-in inputs) beside what the trace recorded of its nodes, by node name. A
    graph-opt node is named by its first result (node_stats.csv's node_name); an fx node
    returning a tuple is the graph-opt node whose results are its getitems, and the getitems
    themselves (Python indexing, no operator) are left out."""
    import csv
    import operator
    import graph_opt
    from .fx import from_fx
    graph = from_fx(gm, name=label)
    graph_opt.run_pipeline(graph, "profile{runs=3}", report_dir=out_dir)
    with open(os.path.join(out_dir, "node_stats.csv"), newline="") as f:
        stats = {r["node_name"]: r for r in csv.DictReader(f)}
    report = {}  # fx value name -> the graph-opt node's report name
    for n in graph.nodes:
        for name in n["outputs"]:
            report[name] = n["outputs"][0]
    fx_nodes = {n.name: n for n in gm.graph.nodes}
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.name not in report:
            for user in n.users:
                if user.target is operator.getitem and user.name in report:
                    report[n.name] = report[user.name]
                    break
    rows = []
    for node, t in trace_rows.items():
        fx_node = fx_nodes.get(node)
        if fx_node is not None and fx_node.target is operator.getitem:
            continue
        profiled = stats.get(report.get(node, ""))
        rows.append({"graph": label, "node": node,
                     "op": str(fx_node.target) if fx_node is not None else "",
                     "graph_opt_node": report.get(node, ""),
                     "trace_calls": t["calls"], "trace_us_per_call": t["total_us"] / t["calls"],
                     "graph_opt_median_us": float(profiled["median_run_time_s"]) * 1e6
                     if profiled else None})
    return rows


def _subtree_flops(event):
    """The FLOPs of the operators under `event`, each counted once: an operator torch counts
    (aten::matmul) may call another it counts too (aten::mm), so a counted one's children are
    not added again."""
    total, stack = 0, list(event.cpu_children)
    while stack:
        e = stack.pop()
        if e.flops:
            total += e.flops
        else:
            stack.extend(e.cpu_children)
    return total


def _format_flops(x):
    if not x:
        return "-"
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} "


def _format_summary(ops, mods, steps, traces, joined=()):
    lines = [f"graph_opt.profiler: recorded steps {steps}; traces: {', '.join(traces) or 'none'}",
             f"{'operator':<40} {'calls':>6} {'self ms':>9} {'FLOPs':>10} {'FLOP/s':>10}"]
    for r in ops:
        lines.append(f"{r['name'][:40]:<40} {r['calls']:>6} {r['self_us'] / 1e3:>9.3f} "
                     f"{_format_flops(r['flops']):>10} {_format_flops(r['flops_per_s']):>10}")
    if mods:
        lines.append(f"{'module (forward)':<40} {'calls':>6} {'total ms':>9} {'FLOPs':>10}")
        for r in mods:
            lines.append(f"{r['module'][:40]:<40} {r['calls']:>6} {r['total_us'] / 1e3:>9.3f} "
                         f"{_format_flops(r['flops']):>10}")
    for j in joined:
        lines.append(f"graph-opt's profile of compiled graph {j['graph']}: " + (
            f"{j['joined']} of its {j['nodes']} traced nodes joined by name ({j['profile']})"
            if "profile" in j else f"not joined ({j['reason']})"))
    return "\n".join(lines)


def profiler(dir="graph_opt_profile", run="graph_opt", **kwargs):
    """A ProfilerSession: a context manager (call step() at the end of each step) or a
    decorator of the step function. See the module's docstring."""
    return ProfilerSession(dir, run, **kwargs)
