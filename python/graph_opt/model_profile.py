"""graph_opt.profile: a user's model profiled in three lines (docs/Python.md).

    import graph_opt
    report = graph_opt.profile(model, (images, labels),
                               loss_fn=lambda m, x, y: F.cross_entropy(m(x), y))
    report = graph_opt.profile(hf_model, batch)  # a Hugging Face batch with labels
    print(report)                    # step time, peak memory, time by module

The training step is exported (graph_opt.export_training_step), run by graph-opt's profile
pass (per-node medians of several runs, memory, activation metrics: docs/Profiling.md), and
returned as a ProfileReport; with ``html=PATH`` the HTML report is drawn there too.
"""
import importlib.util
import os
import shutil
import subprocess
import tempfile


def _report_tables():
    """make_report.py, the HTML report's script, as a module: its tables, which the report
    object shares with report.html."""
    from . import Error, _C
    script = _C._report_tools()[1]
    if not os.path.exists(script):
        raise Error(f"profile: the report's script {script} is missing")
    spec = importlib.util.spec_from_file_location("graph_opt_make_report", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ProfileReport:
    """What the profile pass measured: ``step_time_s``, ``peak_bytes``, ``nodes`` (one dict
    per node: ``node_name``, ``op``, ``module``, ``gtype`` (phase), ``median_run_time_s``,
    ...), ``modules`` (time by module, slowest first: ``module``, ``nodes``, ``time_s``,
    ``share``, ``forward_s``, ``backward_s``, ``optimizer_s``; the HTML report's "Time by
    module"), ``profile`` (the whole profile.json), ``html`` (the report's path, or None).
    ``str(report)`` is the table."""

    def __init__(self, profile, html=None):
        self.profile = profile
        self.html = html
        self.step_time_s = profile["step_time_s"]
        self.peak_bytes = profile["peak_bytes"]
        self.nodes = profile["nodes"]
        report = _report_tables()
        groups = report.module_times(profile)
        total = sum(sum(g[p] for p in report.PHASES) for _, g in groups) or 1.0
        self.modules = []
        for name, g in groups:
            t = sum(g[p] for p in report.PHASES)
            self.modules.append({"module": name, "nodes": g["nodes"], "time_s": t,
                                 "share": t / total, **{f"{p}_s": g[p] for p in report.PHASES}})

    def table(self, top=15):
        shown = self.modules[:top]
        width = max([len("module")] + [len(r["module"]) for r in shown])
        lines = [f"step {self.step_time_s * 1e3:.2f} ms (median of the profiled runs), peak "
                 f"{self.peak_bytes / 2**20:.1f} MiB, {len(self.nodes)} nodes",
                 f"{'module':<{width}} {'nodes':>6} {'ms':>9} {'share':>7} {'forward':>9} "
                 f"{'backward':>9}"]
        for r in shown:
            # full module paths: cut, "...ffn.lin1" and "...ffn.lin2" print alike
            lines.append(f"{r['module']:<{width}} {r['nodes']:>6} {r['time_s'] * 1e3:>9.3f} "
                         f"{100 * r['share']:>6.1f}% {r['forward_s'] * 1e3:>9.3f} "
                         f"{r['backward_s'] * 1e3:>9.3f}")
        if len(self.modules) > top:
            lines.append(f"({len(self.modules) - top} more modules)")
        if self.html:
            lines.append(f"report: {self.html}")
        return "\n".join(lines)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return (f"<graph_opt.ProfileReport step {self.step_time_s * 1e3:.2f} ms, peak "
                f"{self.peak_bytes / 2**20:.1f} MiB, {len(self.modules)} modules>")


def _draw_html(report_dir, html):
    """report.html from report_dir's profile, moved to ``html`` (written whole or not at all)."""
    from . import Error, _C
    python, script = _C._report_tools()
    for needed in (python, script):
        if not os.path.exists(needed):
            raise Error(f"profile: cannot draw {html}: {needed} is missing")
    drawn = subprocess.run([python, script, report_dir], capture_output=True, text=True)
    if drawn.returncode != 0:
        raise Error(f"profile: drawing {html} failed: {drawn.stderr.strip()}")
    target = os.path.abspath(os.fspath(html))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    # Copied beside the target, then renamed: the scratch directory may be on another
    # filesystem, where a rename cannot reach.
    partial = target + ".partial"
    shutil.copyfile(os.path.join(report_dir, "report.html"), partial)
    os.replace(partial, target)
    return target


def profile(model, example_inputs, loss_fn=None, html=None, runs=5, warmup=1):
    """Exports ``model``'s training step on ``example_inputs``, profiles it and returns a
    ProfileReport.

    ``example_inputs`` and ``loss_fn`` as export_training_step takes them (step_call.py):
    a tuple of positional arguments, a dict of keyword arguments (a Hugging Face batch) or
    ``(args, kwargs)``; ``loss_fn(model, *args, **kwargs)`` returns the loss, and without
    it the model's output is (a scalar, or a Hugging Face output's ``.loss``). ``html``:
    where to write the HTML report (needs matplotlib, the wheel's ``report`` extra).
    ``runs``/``warmup``: the profile pass's measured and warm-up steps. Errors are
    graph_opt.Error."""
    from . import Error, Graph, run_pipeline
    from .export import export_training_step
    with tempfile.TemporaryDirectory(prefix="graph-opt-profile-") as tmp:
        step = os.path.join(tmp, "step.pt2")
        export_training_step(model, loss_fn, example_inputs, step)
        graph = Graph.load(step)
        reports = os.path.join(tmp, "reports")
        result = run_pipeline(graph, f"profile{{warmup={int(warmup)},runs={int(runs)}}}",
                              report_dir=reports)
        data = result["reports"].get("profile")
        if data is None:
            raise Error("profile: the profile pass wrote no profile.json")
        return ProfileReport(data, _draw_html(reports, html) if html is not None else None)
