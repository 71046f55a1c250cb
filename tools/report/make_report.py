#!/usr/bin/env python3
"""Turns what graph-opt's profile pass measured into one self-contained HTML report.

    make_report.py DIR [--memory-limit 2GiB] [-o FILE] [--plots-dir PLOTS]

DIR is the directory given to `graph-opt --report-dir DIR`; only DIR/profile.json (format
"graph-opt-profile/1") is read. The report, DIR/report.html unless -o says otherwise, is a
single file: the plots are PNG images embedded as base64 data URLs (drawn with matplotlib's
Agg backend, so no display is needed), the style sheet is inline, nothing is fetched and no
JavaScript runs. It holds:

- memory against execution rank: what the liveness simulation says is live, stacked by kind
  (PARAM, GRAD, OPT_STATE, ACT, OTHER, SCRATCH), the measured peak of each node as a line,
  the phase boundaries, the memory limit (profile's memory_limit_bytes or --memory-limit) and
  the peak;
- the breakdown of the peak by kind;
- each node's median time against its rank, coloured by phase;
- activations: size against the time they sit unused between forward and backward, coloured
  by recompute ratio (bytes freed per second of recomputation);
- tables: a summary, the largest activations, the slowest nodes, time by module.

--ranks DIR0,DIR1,... (the report directories of every rank of a distributed step, in rank
order, DIR among them; `python -m graph_opt` under torchrun passes it to rank 0's report) adds
a section for all ranks: each rank's measured memory against execution rank in one plot, and
a table of each rank's step time, communication (calls, waits, compute overlapped) and peak.

--plots-dir also writes each plot as a PNG file there (docs/images/ comes from it).
The report is written atomically (a temporary file beside it, then a rename). A missing or
malformed profile.json is an error naming the file and what is wrong, with exit code 2 and
nothing written.
"""
import argparse
import base64
import html
import io
import json
import math
import os
import re
import sys
import tempfile

FORMAT = "graph-opt-profile/1"
# Bottom to top in the memory plot: what is there all step long first.
KINDS = ("PARAM", "GRAD", "OPT_STATE", "ACT", "OTHER", "SCRATCH")
KIND_COLORS = {"PARAM": "#4C72B0", "GRAD": "#DD8452", "OPT_STATE": "#8172B3",
               "ACT": "#55A868", "OTHER": "#CCB974", "SCRATCH": "#64B5CD"}
PHASES = ("forward", "backward", "optimizer")
PHASE_COLORS = {"forward": "#3A6EA5", "backward": "#E0812F", "optimizer": "#8E63B8"}
LIMIT_COLOR = "#C44E52"
TOP_N = 15
DPI = 100

BINARY_UNITS = (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10))
DECIMAL_UNITS = {"TB": 10 ** 12, "GB": 10 ** 9, "MB": 10 ** 6, "KB": 10 ** 3, "kB": 10 ** 3}


class ProfileError(Exception):
    """profile.json is missing or does not follow the schema; the message names the file."""


# --- human units -------------------------------------------------------------------------

def _num(v, compact=False):
    """Three significant digits, never an exponent: 1023, 15.0, 9.25; compact: 15, 1.5."""
    a = abs(v)
    text = f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}"
    if compact and "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def fmt_bytes(n, compact=False):
    """12.3 MiB; compact (for axis ticks) drops trailing zeros: 1 KiB, 1.5 MiB."""
    if n is None:
        return "-"
    for unit, size in BINARY_UNITS:
        if abs(n) >= size:
            return f"{_num(n / size, compact)} {unit}"
    return f"{n:.0f} B"


def fmt_time(s, compact=False):
    """Seconds as µs, ms or s: 640 µs, 10.3 ms, 1.25 s."""
    if s is None:
        return "-"
    a = abs(s)
    if a == 0:
        return "0 s"
    if a < 1e-3:
        return f"{_num(s * 1e6, compact)} µs"
    if a < 1:
        return f"{_num(s * 1e3, compact)} ms"
    return f"{_num(s, compact)} s"


def fmt_percent(part, whole):
    return "-" if not whole else f"{100.0 * part / whole:.1f}%"


def fmt_ratio(r):
    """Recompute ratio (bytes per second) as B/s with a binary prefix."""
    return "-" if r is None else fmt_bytes(r) + "/s"


def parse_bytes(text):
    """'2GiB', '1.5 GB', '512MiB', '1048576' -> bytes (argparse type)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    units = {"": 1, "B": 1, **{u: s for u, s in BINARY_UNITS}, **DECIMAL_UNITS}
    if not m or m.group(2) not in units:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a size: give bytes, or a number with B, KiB, MiB, GiB, TiB "
            "(or KB, MB, GB, TB), e.g. 2GiB")
    value = int(float(m.group(1)) * units[m.group(2)])
    if value <= 0:
        raise argparse.ArgumentTypeError(f"'{text}': the memory limit must be positive")
    return value


# --- reading profile.json ---------------------------------------------------------------

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v))


CHECKS = {
    "an integer": _is_int,
    "a number": _is_num,
    "a string": lambda v: isinstance(v, str),
    "true or false": lambda v: isinstance(v, bool),
    "a byte count": lambda v: _is_num(v) and v >= 0,
    "a byte count or null": lambda v: v is None or (_is_num(v) and v > 0),
    "a number or null": lambda v: v is None or _is_num(v),
    "a list": lambda v: isinstance(v, list),
    "an object": lambda v: isinstance(v, dict),
}
TOP_FIELDS = {
    "format": "a string", "graph": "a string", "device": "a string",
    "time_source": "a string", "memory_source": "a string",
    "warmup_runs": "an integer", "measured_runs": "an integer", "num_nodes": "an integer",
    "step_time_s": "a number", "profiled_step_time_s": "a number",
    "sum_node_time_s": "a number", "run_node_time_s": "a number",
    "profiler_overhead_per_node_s": "a number",
    "peak_bytes": "a byte count", "peak_rank": "an integer",
    "simulated_peak_bytes": "a byte count", "memory_limit_bytes": "a byte count or null",
    "forward_end_rank": "an integer", "backward_end_rank": "an integer",
    "breakdown_at_peak": "an object", "nodes": "a list", "activations": "a list",
}
NODE_FIELDS = {
    "rank": "an integer", "node_name": "a string", "op": "a string", "node_type": "a string",
    "gtype": "a string", "median_run_time_s": "a number",
    "median_peak_mem_bytes": "a byte count", "median_active_mem_bytes": "a byte count",
    "output_bytes": "a byte count", "device": "a string", "module": "a string",
    "source": "a string", "live_bytes_by_kind": "an object",
}
ACTIVATION_FIELDS = {
    "activation_name": "a string", "creation_rank": "an integer",
    "last_fw_use_rank": "an integer", "first_bw_use_rank": "an integer",
    "last_bw_use_rank": "an integer", "median_mem_size_bytes": "a byte count",
    "inactive_time_s": "a number", "recomp_time_s": "a number",
    "recomp_memory_bytes": "a byte count", "recompute_ratio": "a number or null",
    "recompute_nodes": "an integer", "recomputable": "true or false",
}


def _check_fields(obj, fields, path, where):
    """Every field present and of its type; `where` says which object, e.g. 'nodes[3]: '."""
    if not isinstance(obj, dict):
        raise ProfileError(f"{path}: {where}expected a JSON object, not {_show(obj)}")
    for key, kind in fields.items():
        if key not in obj:
            raise ProfileError(f"{path}: {where}missing key '{key}'")
        if not CHECKS[kind](obj[key]):
            raise ProfileError(f"{path}: {where}'{key}' should be {kind}, not {_show(obj[key])}")


def _check_kinds(obj, path, where):
    """A bytes-by-kind object: exactly the six kinds, each a byte count."""
    for kind in KINDS:
        if kind not in obj:
            raise ProfileError(f"{path}: {where}missing key '{kind}'")
        if not CHECKS["a byte count"](obj[kind]):
            raise ProfileError(f"{path}: {where}'{kind}' should be a byte count, "
                               f"not {_show(obj[kind])}")
    for kind in obj:
        if kind not in KINDS:
            raise ProfileError(f"{path}: {where}unknown kind '{kind}' "
                               f"(expected {', '.join(KINDS)})")


def _show(value):
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def load_profile(path):
    """Reads and checks profile.json; returns it with nodes sorted by rank."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file (write it with "
                           "`graph-opt ... -passes=profile --report-dir DIR`)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError(f"{path}: cannot read: {e}") from None
    try:
        profile = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProfileError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    if not isinstance(profile, dict):
        raise ProfileError(f"{path}: expected a JSON object, not {_show(profile)}")
    if profile.get("format") != FORMAT:
        found = "no 'format' key" if "format" not in profile else \
            f"format {_show(profile['format'])}"
        raise ProfileError(f"{path}: {found}; this tool reads \"{FORMAT}\"")
    _check_fields(profile, TOP_FIELDS, path, "")
    _check_kinds(profile["breakdown_at_peak"], path, "breakdown_at_peak: ")
    for i, node in enumerate(profile["nodes"]):
        where = f"nodes[{i}]: "
        _check_fields(node, NODE_FIELDS, path, where)
        _check_kinds(node["live_bytes_by_kind"], path, where + "live_bytes_by_kind: ")
        if node["gtype"] not in PHASES:
            raise ProfileError(f"{path}: {where}'gtype' should be one of "
                               f"{', '.join(PHASES)}, not {_show(node['gtype'])}")
    for i, act in enumerate(profile["activations"]):
        _check_fields(act, ACTIVATION_FIELDS, path, f"activations[{i}]: ")
    _check_consistency(profile, path)
    profile["nodes"].sort(key=lambda n: n["rank"])
    return profile


def _check_consistency(profile, path):
    """What the plots rely on: one node per rank, the peak's rank among them."""
    nodes = profile["nodes"]
    if profile["num_nodes"] != len(nodes):
        raise ProfileError(f"{path}: 'num_nodes' is {profile['num_nodes']} but 'nodes' has "
                           f"{len(nodes)} entries")
    ranks = [n["rank"] for n in nodes]
    if len(set(ranks)) != len(ranks):
        raise ProfileError(f"{path}: 'nodes' has two entries with the same rank")
    if nodes and profile["peak_rank"] not in set(ranks):
        raise ProfileError(f"{path}: 'peak_rank' {profile['peak_rank']} is not the rank of "
                           "any node")


# --- plots -------------------------------------------------------------------------------

def import_pyplot():
    """matplotlib with the Agg backend (no display), or a clear error if it is missing."""
    try:
        import matplotlib
    except ImportError:
        raise ProfileError("matplotlib is not installed in this Python "
                           f"({sys.executable}): run scripts/setup.sh, which installs "
                           "requirements-report.txt into the project's environment") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "axes.titlesize": 12, "axes.spines.top": False,
                         "axes.spines.right": False})
    return plt


def figure_png(plt, fig):
    """The figure as PNG bytes (no timestamp or version in it, so the report is stable)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _bytes_axis(axis, scale):
    """Axis ticks in human binary units; `scale` is the byte size of one unit of the data."""
    from matplotlib.ticker import FuncFormatter
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt_bytes(v * scale, compact=True)))


def _time_axis(axis):
    from matplotlib.ticker import FuncFormatter
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt_time(v, compact=True)))


def _phase_boundaries(ax, profile):
    """Dashed lines between forward, backward and optimizer, each region named at the top."""
    nodes = profile["nodes"]
    if not nodes:
        return
    first, last = nodes[0]["rank"], nodes[-1]["rank"]
    cuts = [r + 0.5 for r in (profile["forward_end_rank"], profile["backward_end_rank"])
            if first <= r < last]
    for x in cuts:
        ax.axvline(x, color="0.35", linestyle="--", linewidth=1, zorder=5)
    edges = [first - 0.5] + cuts + [last + 0.5]
    present = [p for p in PHASES if any(n["gtype"] == p for n in nodes)]
    if len(present) != len(edges) - 1:
        return  # phases not in forward/backward/optimizer order: lines only
    for phase, lo, hi in zip(present, edges, edges[1:]):
        ax.text((lo + hi) / 2, 1.01, phase, transform=ax.get_xaxis_transform(), ha="center",
                va="bottom", fontsize=10, color=PHASE_COLORS[phase], fontweight="bold")


def _byte_unit(max_bytes):
    for _, size in BINARY_UNITS:
        if max_bytes >= size:
            return size
    return 1


def _rank_axis(ax, nodes):
    """x from the first node to the last, whole ranks only."""
    from matplotlib.ticker import MaxNLocator
    ax.set_xlim(nodes[0]["rank"] - 0.5, nodes[-1]["rank"] + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("execution rank (node order)")


def _no_data(ax, message):
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _steps(nodes, values):
    """x edges and values for a step drawing in which node r covers [r - 0.5, r + 0.5]."""
    import numpy as np
    x = np.array([n["rank"] - 0.5 for n in nodes] + [nodes[-1]["rank"] + 0.5])
    v = np.asarray(values, dtype=float)
    return x, np.append(v, v[-1])


def plot_memory(plt, profile, limit):
    """Stacked live bytes by kind per rank, the measured per-node peak, limit and peak."""
    import numpy as np
    fig, ax = plt.subplots(figsize=(12, 5.6), layout="constrained")
    nodes = profile["nodes"]
    ax.set_title("Memory during the step", pad=22)
    if not nodes:
        _no_data(ax, "the graph has no nodes")
        return fig
    measured = [n["median_peak_mem_bytes"] for n in nodes]
    top = max(max(measured), profile["peak_bytes"],
              max(sum(n["live_bytes_by_kind"].values()) for n in nodes))
    limit_in_plot = limit is not None and limit <= 3 * top
    scale = _byte_unit(max(top, limit if limit_in_plot else 0))
    x, bottom = _steps(nodes, [0] * len(nodes))
    for kind in KINDS:
        _, values = _steps(nodes, [n["live_bytes_by_kind"][kind] / scale for n in nodes])
        if not values.any():
            continue
        ax.fill_between(x, bottom, bottom + values, step="post", color=KIND_COLORS[kind],
                        alpha=0.9, linewidth=0,
                        label=f"{kind} ({'measured' if kind == 'SCRATCH' else 'simulated'})")
        bottom = bottom + values
    ax.step(x, _steps(nodes, np.array(measured) / scale)[1], where="post", color="black",
            linewidth=1.3, label="measured peak of each node")
    _mark_peak(ax, profile, scale)
    _draw_limit(ax, limit, limit_in_plot, top, scale)
    _phase_boundaries(ax, profile)
    _rank_axis(ax, nodes)
    ax.set_ylabel("memory")
    _bytes_axis(ax.yaxis, scale)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=5, fontsize=9,
              frameon=False)
    return fig


def _node_at(profile, rank):
    return next((n for n in profile["nodes"] if n["rank"] == rank), None)


def _mark_peak(ax, profile, scale):
    node = _node_at(profile, profile["peak_rank"])
    y = profile["peak_bytes"] / scale
    ax.plot([profile["peak_rank"]], [y], marker="v", markersize=10, color=LIMIT_COLOR,
            zorder=6, linestyle="none", label="measured peak of the step")
    name = node_title(node) if node else "?"
    ax.annotate(f"peak {fmt_bytes(profile['peak_bytes'])}\n#{profile['peak_rank']} {name}",
                (profile["peak_rank"], y), xytext=(12, 6), textcoords="offset points",
                fontsize=9, color=LIMIT_COLOR, va="bottom", zorder=7,
                bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="none",
                          alpha=0.85))
    ax.set_ylim(0, y * 1.2)


def _draw_limit(ax, limit, in_plot, top, scale):
    """The memory limit as a red line, or a note when it is far above everything drawn."""
    if limit is None:
        return
    if in_plot:
        ax.axhline(limit / scale, color=LIMIT_COLOR, linestyle="--", linewidth=1.6,
                   label=f"memory limit {fmt_bytes(limit)}", zorder=6)
        ax.set_ylim(0, max(ax.get_ylim()[1], limit / scale * 1.1))
    else:
        ax.text(0.01, 0.97, f"memory limit {fmt_bytes(limit)}: far above this plot "
                f"({limit / top:.0f}x the peak)", transform=ax.transAxes, ha="left",
                va="top", fontsize=9, color=LIMIT_COLOR)


def plot_node_times(plt, profile, _limit):
    """One bar per node: its median time, coloured by phase; the slowest named."""
    fig, ax = plt.subplots(figsize=(12, 4.8), layout="constrained")
    nodes = profile["nodes"]
    ax.set_title("Time of each node (median)", pad=22)
    if not nodes:
        _no_data(ax, "the graph has no nodes")
        return fig
    for phase in PHASES:
        chosen = [n for n in nodes if n["gtype"] == phase]
        if chosen:
            ax.bar([n["rank"] for n in chosen], [n["median_run_time_s"] for n in chosen],
                   width=0.8, color=PHASE_COLORS[phase],
                   label=f"{phase} ({fmt_time(sum(n['median_run_time_s'] for n in chosen))})")
    for n in sorted(nodes, key=lambda n: -n["median_run_time_s"])[:5]:
        ax.annotate(node_title(n), (n["rank"], n["median_run_time_s"]), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8,
                    rotation=90)
    ax.set_ylim(0, max(n["median_run_time_s"] for n in nodes) * 1.5 or 1)
    _phase_boundaries(ax, profile)
    _rank_axis(ax, nodes)
    ax.set_ylabel("median time")
    _time_axis(ax.yaxis)
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    return fig


def _mib(size):
    v = size / 2 ** 20
    return f"{v:.2f} MiB" if v >= 0.1 else f"{v:.3g} MiB"


def plot_breakdown(plt, profile, _limit):
    """One horizontal bar: the peak split by kind, each part in MiB and percent."""
    fig, ax = plt.subplots(figsize=(12, 2.9), layout="constrained")
    parts = profile["breakdown_at_peak"]
    total = sum(parts.values())
    node = _node_at(profile, profile["peak_rank"])
    where = f", #{profile['peak_rank']} {node_title(node)}" if node else ""
    ax.set_title(f"What is live at the peak ({fmt_bytes(total)}{where})")
    if not total:
        _no_data(ax, "nothing is live at the peak")
        return fig
    scale = _byte_unit(total)
    left = 0
    for kind in KINDS:
        size = parts[kind]
        if not size:
            continue
        share = f"{100 * size / total:.1f}%"
        ax.barh([0], [size / scale], left=left / scale, color=KIND_COLORS[kind], height=0.6,
                label=f"{kind}: {_mib(size)} ({share})")
        if size / total >= 0.06:
            ax.text((left + size / 2) / scale, 0, f"{kind}\n{_mib(size)}\n{share}",
                    ha="center", va="center", fontsize=8.5)
        left += size
    ax.set_xlim(0, total / scale)
    ax.set_yticks([])
    _bytes_axis(ax.xaxis, scale)
    ax.spines["left"].set_visible(False)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3, fontsize=9,
              frameon=False)
    return fig


def plot_activations(plt, profile, _limit):
    """Activations: bytes against idle time, coloured by recompute ratio."""
    fig, ax = plt.subplots(figsize=(12, 5.8), layout="constrained")
    acts = profile["activations"]
    ax.set_title("Activations: size against time unused between forward and backward")
    if not acts:
        _no_data(ax, "no activations (nothing made in forward is kept for backward)")
        return fig
    xs = [a["inactive_time_s"] for a in acts]
    ys = [a["median_mem_size_bytes"] for a in acts]
    groups = {"ratio": [], "no ratio": [], "not recomputable": []}
    for i, a in enumerate(acts):
        key = "not recomputable" if not a["recomputable"] else \
            "ratio" if a["recompute_ratio"] is not None else "no ratio"
        groups[key].append(i)
    if groups["ratio"]:
        _scatter_by_ratio(fig, ax, [xs[i] for i in groups["ratio"]],
                          [ys[i] for i in groups["ratio"]],
                          [acts[i]["recompute_ratio"] for i in groups["ratio"]])
    if groups["no ratio"]:
        ax.scatter([xs[i] for i in groups["no ratio"]], [ys[i] for i in groups["no ratio"]],
                   s=60, color="0.65", edgecolors="black", linewidths=0.5, zorder=3,
                   label="recomputable, no recompute ratio")
    if groups["not recomputable"]:
        ax.scatter([xs[i] for i in groups["not recomputable"]],
                   [ys[i] for i in groups["not recomputable"]], marker="X", s=70,
                   color=LIMIT_COLOR, zorder=3, label="not recomputable")
    _log_axis(ax, "x", xs)
    _log_axis(ax, "y", ys, base=2)
    _time_axis(ax.xaxis)
    _bytes_axis(ax.yaxis, 1)
    _label_candidates(ax, profile, acts)
    ax.set_xlabel("inactive time: from the last forward use to the first backward use")
    ax.set_ylabel("activation size")
    ax.legend(loc="lower right", fontsize=9)
    ax.grid(True, which="major", alpha=0.25)
    return fig


def _scatter_by_ratio(fig, ax, xs, ys, ratios):
    """Points coloured by recompute ratio (log colours when it spans a decade), colour bar."""
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.ticker import FuncFormatter, LogLocator
    positive = [r for r in ratios if r > 0]
    log_colors = bool(positive) and max(positive) > 10 * min(positive)
    if log_colors:
        norm = LogNorm(min(positive), max(positive))
    else:
        norm = Normalize(min(ratios), max(max(ratios), min(ratios) + 1))
    pts = ax.scatter(xs, ys, c=[max(r, norm.vmin) for r in ratios], cmap="viridis", norm=norm,
                     s=60, edgecolors="black", linewidths=0.5, zorder=3,
                     label="recomputable (colour: recompute ratio)")
    bar = fig.colorbar(pts, ax=ax, pad=0.01)
    bar.set_label("recompute ratio: bytes freed per second of recompute")
    if log_colors:
        bar.ax.yaxis.set_major_locator(LogLocator(base=2, numticks=9))
    bar.ax.yaxis.set_major_formatter(
        FuncFormatter(lambda v, _: fmt_bytes(v, compact=True) + "/s"))


def _log_axis(ax, which, values, base=10):
    """Log scale when the values span more than a decade; symlog keeps zeros on the plot."""
    from matplotlib.ticker import LogLocator, NullFormatter
    positive = [v for v in values if v > 0]
    if not positive or max(positive) < 20 * min(positive):
        return
    set_scale = ax.set_xscale if which == "x" else ax.set_yscale
    if len(positive) == len(values):
        set_scale("log", base=base)
    else:
        set_scale("symlog", base=base, linthresh=min(positive))
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_minor_formatter(NullFormatter())
    if base == 2:
        axis.set_major_locator(LogLocator(base=2, numticks=12))


def _label_offsets(ax, points, chosen):
    """For each chosen point, an offset (in points) for its number: above, right, left or
    below, the first that keeps clear of the other points and of the numbers placed so far."""
    ax.get_xlim(), ax.get_ylim()            # settle the autoscaled limits
    to_px = ax.transData.transform
    px_per_pt = ax.figure.dpi / 72
    dots = [tuple(to_px(p)) for p in points]
    placed, offsets = [], []
    for a in chosen:
        x, y = to_px((a["inactive_time_s"], a["median_mem_size_bytes"]))
        best = (0, 9)
        for dx, dy in ((0, 9), (9, 0), (-9, 0), (0, -9), (8, 8), (-8, 8), (8, -8), (-8, -8)):
            lx, ly = x + dx * px_per_pt, y + dy * px_per_pt
            if all(math.hypot(lx - px, ly - py) > 10 for px, py in dots + placed):
                best = (dx, dy)
                break
        placed.append((x + best[0] * px_per_pt, y + best[1] * px_per_pt))
        offsets.append(best)
    return offsets


def _label_candidates(ax, profile, acts):
    """Numbers the five activations holding the most bytes for the longest (bytes x idle
    time) and names them in a key where it hides the fewest points."""
    from matplotlib.lines import Line2D
    ranked = [a for a in sorted(acts, key=lambda a: -a["median_mem_size_bytes"] *
                                a["inactive_time_s"])[:5]
              if a["median_mem_size_bytes"] * a["inactive_time_s"] > 0]
    lines = []
    points = [(a["inactive_time_s"], a["median_mem_size_bytes"]) for a in acts]
    for i, a, offset in zip(range(1, 6), ranked, _label_offsets(ax, points, ranked)):
        ax.annotate(str(i), (a["inactive_time_s"], a["median_mem_size_bytes"]),
                    xytext=offset, textcoords="offset points", fontsize=9, ha="center",
                    va="center", fontweight="bold")
        node = _node_at(profile, a["creation_rank"])
        made_by = node_title(node) if node else "?"
        lines.append(f"{i}  {a['activation_name']} ({made_by}): "
                     f"{fmt_bytes(a['median_mem_size_bytes'])}, idle "
                     f"{fmt_time(a['inactive_time_s'])}")
    if lines:
        key = ax.legend([Line2D([], [], linestyle="none")] * len(lines), lines, loc="best",
                        handlelength=0, handletextpad=0, fontsize=8.5,
                        title="most bytes x idle time", title_fontsize=9, alignment="left",
                        prop={"family": "monospace", "size": 8.5})
        ax.add_artist(key)


def plot_ranks(plt, ranks):
    """Each rank's measured per-node peak against execution rank, one line per rank."""
    fig, ax = plt.subplots(figsize=(12, 4.8), layout="constrained")
    ax.set_title("Memory of every rank during the step (measured peak of each node)", pad=22)
    top = max((max((n["median_peak_mem_bytes"] for n in p["nodes"]), default=0)
               for _, p in ranks), default=0)
    if top <= 0:
        _no_data(ax, "no rank measured any memory")
        return fig
    scale = _byte_unit(top)
    for rank, p in ranks:
        nodes = p["nodes"]
        x, values = _steps(nodes, [n["median_peak_mem_bytes"] / scale for n in nodes])
        ax.step(x, values, where="post", linewidth=1.3,
                label=f"rank {rank}: peak {fmt_bytes(p['peak_bytes'])}")
    _phase_boundaries(ax, ranks[0][1])
    _rank_axis(ax, ranks[0][1]["nodes"])
    ax.set_ylabel("memory")
    _bytes_axis(ax.yaxis, scale)
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    return fig


def ranks_table(ranks):
    header = ["rank", "step", "communication calls", "waiting", "compute while in flight",
              "communicated", "peak"]
    rows = []
    for rank, p in ranks:
        comm = p.get("communication") or {}
        rows.append([str(rank), fmt_time(p["step_time_s"]), fmt_time(comm.get("call_time_s", 0)),
                     fmt_time(comm.get("wait_time_s", 0)),
                     fmt_time(comm.get("overlapped_compute_s", 0)),
                     fmt_bytes(comm.get("bytes", 0)), fmt_bytes(p["peak_bytes"])])
    return header, rows, set(range(1, len(header)))


def load_ranks(dirs):
    """[(rank, profile)] from each rank's DIR/profile.json, in the order given."""
    return [(rank, load_profile(os.path.join(d, "profile.json"))) for rank, d in enumerate(dirs)]


PLOTS = (  # id, function, alt text
    ("memory", plot_memory, "memory by kind against execution rank"),
    ("breakdown", plot_breakdown, "breakdown of the peak memory by kind"),
    ("node-times", plot_node_times, "median time of each node against execution rank"),
    ("activations", plot_activations, "activation size against inactive time"),
)


def draw_plots(profile, limit):
    """{plot id: PNG bytes}; all drawn before anything is written."""
    plt = import_pyplot()
    pngs = {}
    for plot_id, draw, _ in PLOTS:
        pngs[plot_id] = figure_png(plt, draw(plt, profile, limit))
    return pngs


# --- tables ------------------------------------------------------------------------------

def phase_times(profile):
    return {p: sum(n["median_run_time_s"] for n in profile["nodes"] if n["gtype"] == p)
            for p in PHASES}


def summary_rows(profile, limit):
    """(label, value) pairs for the summary table."""
    p, nodes = profile, profile["nodes"]
    counts = {ph: sum(1 for n in nodes if n["gtype"] == ph) for ph in PHASES}
    times = phase_times(p)
    peak_node = _node_at(p, p["peak_rank"])
    peak_where = (f" at #{p['peak_rank']} {node_title(peak_node)} ({peak_node['gtype']})"
                  if peak_node else "")
    overhead = p["profiled_step_time_s"] - p["step_time_s"]
    rows = [
        ("Graph", p["graph"]),
        ("Device", p["device"]),
        ("Runs", f"{p['warmup_runs']} warm-up, {p['measured_runs']} measured; "
                 "times and memory are medians over the measured runs"),
        ("Time source", p["time_source"]),
        ("Memory source", p["memory_source"]),
        ("Nodes", f"{p['num_nodes']} (" + ", ".join(f"{ph} {counts[ph]}" for ph in PHASES)
                  + ")"),
        ("Step time", f"{fmt_time(p['step_time_s'])} (median, without the profiler)"),
        ("Step time, profiled", f"{fmt_time(p['profiled_step_time_s'])} "
                                f"({fmt_signed_percent(overhead, p['step_time_s'])})"),
        ("Sum of node times", f"{fmt_time(p['sum_node_time_s'])} "
                              f"({fmt_percent(p['sum_node_time_s'], p['step_time_s'])} of "
                              "the step time)"),
        ("Node times per run", f"{fmt_time(p['run_node_time_s'])} "
                               f"({fmt_percent(p['run_node_time_s'], p['step_time_s'])} of "
                               "the step time): each run's node times added up, median over "
                               "runs; the sum of node medians leaves out time that lands on a "
                               "different node each run"),
        ("Time by phase", ", ".join(f"{ph} {fmt_time(times[ph])} "
                                    f"({fmt_percent(times[ph], p['sum_node_time_s'])})"
                                    for ph in PHASES if counts[ph])),
        ("Profiler overhead", f"{fmt_time(p['profiler_overhead_per_node_s'])} per node "
                              f"({fmt_time(p['profiler_overhead_per_node_s'] * len(nodes))}"
                              " per step)"),
        ("Peak memory, measured", fmt_bytes(p["peak_bytes"]) + peak_where),
        ("Peak memory, simulated", f"{fmt_bytes(p['simulated_peak_bytes'])} (simulated/"
                                   "measured "
                                   f"{ratio(p['simulated_peak_bytes'], p['peak_bytes'])})"),
        ("Memory limit", limit_text(p, limit)),
        ("Activations", activations_text(p["activations"])),
    ]
    return rows


def ratio(a, b):
    return f"{a / b:.3f}" if b else "-"


def fmt_signed_percent(part, whole):
    return "-" if not whole else f"{100.0 * part / whole:+.1f}%"


def limit_text(profile, limit):
    if limit is None:
        return "not set (--memory-limit draws one)"
    peak = profile["peak_bytes"]
    if peak > limit:
        return (f"{fmt_bytes(limit)}: the peak is over it by {fmt_bytes(peak - limit)} "
                f"({fmt_percent(peak, limit)} of the limit)")
    return (f"{fmt_bytes(limit)}: the peak uses {fmt_percent(peak, limit)}, "
            f"{fmt_bytes(limit - peak)} to spare")


def activations_text(acts):
    if not acts:
        return "none"
    total = sum(a["median_mem_size_bytes"] for a in acts)
    return f"{len(acts)}, {fmt_bytes(total)} in all"


def node_title(node, with_module=True):
    """A node as people read it: its operator (no namespace or overload) and its module,
    "convolution_backward · layer2.0.conv2", not the IR value it defines (getitem_123)."""
    op = node["op"].split("::")[-1].split(".")[0]
    return f"{op} · {node['module']}" if with_module and node["module"] else op


def _where(profile, rank):
    node = _node_at(profile, rank)
    return f"#{rank} {node_title(node, with_module=False)}" if node else f"#{rank}"


def largest_activations(profile):
    acts = sorted(profile["activations"],
                  key=lambda a: (-a["median_mem_size_bytes"], a["creation_rank"]))[:TOP_N]
    header = ["activation", "size", "made by", "module", "last forward use",
              "first backward use", "inactive", "recompute time", "recompute ratio",
              "recomputable"]
    rows = []
    for a in acts:
        node = _node_at(profile, a["creation_rank"])
        rows.append([a["activation_name"], fmt_bytes(a["median_mem_size_bytes"]),
                     _where(profile, a["creation_rank"]),
                     (node["module"] if node else "") or "-",
                     f"#{a['last_fw_use_rank']}" if a["last_fw_use_rank"] >= 0 else "-",
                     f"#{a['first_bw_use_rank']}",
                     fmt_time(a["inactive_time_s"]), fmt_time(a["recomp_time_s"]),
                     fmt_ratio(a["recompute_ratio"]), "yes" if a["recomputable"] else "no"])
    return header, rows, {1, 4, 5, 6, 7, 8}


def slowest_nodes(profile):
    nodes = sorted(profile["nodes"], key=lambda n: (-n["median_run_time_s"], n["rank"]))
    total = profile["sum_node_time_s"]
    header = ["rank", "node", "phase", "time", "share", "peak memory", "IR value", "source"]
    rows = [[str(n["rank"]), node_title(n), n["gtype"], fmt_time(n["median_run_time_s"]),
             fmt_percent(n["median_run_time_s"], total), fmt_bytes(n["median_peak_mem_bytes"]),
             f"%{n['node_name']}", n["source"] or "-"]
            for n in nodes[:TOP_N]]
    return header, rows, {0, 3, 4, 5}


def module_times(profile):
    """Node time summed by module path, slowest first: [(module, {"nodes": n, phase: seconds,
    ...})]; nodes with none go to "(no module)". graph_opt.profile's report reads it too."""
    groups = {}
    for n in profile["nodes"]:
        g = groups.setdefault(n["module"] or "(no module)",
                              {"nodes": 0, **{p: 0.0 for p in PHASES}})
        g["nodes"] += 1
        g[n["gtype"]] += n["median_run_time_s"]
    return sorted(groups.items(), key=lambda kv: (-sum(kv[1][p] for p in PHASES), kv[0]))


def time_by_module(profile):
    """The table of module_times."""
    ordered = module_times(profile)
    total = sum(sum(g[p] for p in PHASES) for _, g in ordered)
    header = ["module", "nodes", "time", "share"] + list(PHASES)
    rows = []
    for name, g in ordered[:TOP_N]:
        t = sum(g[p] for p in PHASES)
        rows.append([name, str(g["nodes"]), fmt_time(t), fmt_percent(t, total)]
                    + [fmt_time(g[p]) if g[p] else "-" for p in PHASES])
    rest = ordered[TOP_N:]
    if rest:
        t = sum(sum(g[p] for p in PHASES) for _, g in rest)
        rows.append([f"({len(rest)} more modules)", str(sum(g["nodes"] for _, g in rest)),
                     fmt_time(t), fmt_percent(t, total)] + [""] * len(PHASES))
    return header, rows, {1, 2, 3, 4, 5, 6}


# --- HTML --------------------------------------------------------------------------------

CSS = """
body { font: 14px/1.45 -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif;
       color: #222; margin: 24px auto; max-width: 1360px; padding: 0 16px; background: #fff; }
h1 { font-size: 24px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 36px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.sub { color: #666; margin-top: 0; }
p.how { color: #444; max-width: 1000px; }
img.plot { display: block; max-width: 100%; height: auto; margin: 8px 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 12.5px; }
th, td { border-bottom: 1px solid #e5e5e5; padding: 3px 8px; text-align: left;
         vertical-align: top; }
th { background: #f4f4f4; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.src { color: #666; font-size: 11.5px; white-space: nowrap; }
div.wide { overflow-x: auto; }
table.summary th { background: none; width: 200px; }
footer { color: #888; font-size: 12px; margin-top: 40px; }
"""

EXPLANATIONS = {
    "ranks": "Each rank's measured peak at every node (execution rank on the x axis: every "
             "rank runs the same graph), so that a rank holding more than the others, or "
             "waiting longer in its collectives, shows. The table gives each rank's step, the "
             "time its collectives took to issue and to wait for, and the compute that ran "
             "while they were in flight (profile.json's communication).",
    "memory": (
        "The coloured areas are what the liveness simulation says is allocated while each "
        "node runs, stacked by kind: weights (PARAM), gradients (GRAD), optimizer state "
        "(OPT_STATE), activations kept from forward for backward (ACT), other tensors "
        "(OTHER) and operator scratch memory (SCRATCH). The black line is the measured peak "
        "of each node; where it rises above the areas, memory is used that the simulation "
        "does not see. Dashed lines separate forward, backward and optimizer; the red "
        "triangle is the step's measured peak and a red dashed line the memory limit."),
    "breakdown": (
        "The measured peak split by kind, in MiB and as a share of the peak. A large ACT "
        "share is what checkpointing (recomputing activations in backward) can reduce; "
        "PARAM, GRAD and OPT_STATE are fixed by the model and the optimizer."),
    "node-times": (
        "Each bar is one node's median time, in execution order, coloured by phase; the five "
        "slowest are named. The legend gives each phase's total."),
    "activations": (
        "Each point is an activation: how big it is (up) and how long it sits unused between "
        "its last forward use and its first backward use (right). Points up and to the right "
        "hold the most memory for the longest, the best candidates for recomputation or "
        "offloading; the colour is the recompute ratio, bytes freed per second of "
        "recomputation (brighter is cheaper to recompute). Crosses cannot be recomputed "
        "(for example, made by a random operator such as dropout)."),
}


def render_table(header, rows, numeric, css_class=""):
    def cell(tag, i, text):
        small = header[i] in ("source", "IR value")
        cls = ' class="num"' if i in numeric else (' class="src"' if small else "")
        return f"<{tag}{cls}>{html.escape(text)}</{tag}>"
    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "\n".join("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(r)) + "</tr>"
                     for r in rows)
    cls = f' class="{css_class}"' if css_class else ""
    return (f'<div class="wide"><table{cls}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n'
            f"{body}\n</tbody>\n</table></div>")


def render_summary(rows):
    body = "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                     for k, v in rows)
    return f'<table class="summary">\n{body}\n</table>'


def render_plot(plot_id, alt, png):
    from struct import unpack
    width, height = unpack(">II", png[16:24])   # the PNG's IHDR chunk
    data = base64.b64encode(png).decode("ascii")
    return (f'<img class="plot" id="plot-{plot_id}" alt="{html.escape(alt)}" '
            f'width="{width}" height="{height}" src="data:image/png;base64,{data}">\n'
            f'<p class="how">{html.escape(EXPLANATIONS[plot_id])}</p>')


def render_html(profile, limit, pngs, ranks=None):
    plots = {pid: render_plot(pid, alt, pngs[pid]) for pid, _, alt in PLOTS}
    title = f"graph-opt profile: {profile['graph']}"
    sections = [
        ("Summary", render_summary(summary_rows(profile, limit))),
        ("Memory", plots["memory"] + "\n" + plots["breakdown"]),
        ("Time", plots["node-times"]),
        (f"Time by module (top {TOP_N})", render_table(*time_by_module(profile))),
        (f"Slowest nodes (top {TOP_N})", render_table(*slowest_nodes(profile))),
        ("Activations", plots["activations"]),
        (f"Largest activations (top {TOP_N})", render_table(*largest_activations(profile))),
    ]
    if ranks:
        sections.insert(1, (f"All {len(ranks)} ranks",
                            render_plot("ranks", "each rank's memory against execution rank",
                                        pngs["ranks"]) + "\n" + render_table(*ranks_table(ranks))))
    body = "\n".join(f"<section>\n<h2>{html.escape(h)}</h2>\n{content}\n</section>"
                     for h, content in sections)
    sub = (f"{profile['device']}, {profile['num_nodes']} nodes, step "
           f"{fmt_time(profile['step_time_s'])}, peak {fmt_bytes(profile['peak_bytes'])}")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p class="sub">{html.escape(sub)}</p>
{body}
<footer>Made by tools/report/make_report.py from profile.json ({FORMAT}).</footer>
</body>
</html>
"""


# --- output ------------------------------------------------------------------------------

def checkout_commit(repo_root):
    """(commit, dirty) of the git checkout at repo_root; ("unknown", False) outside one.
    Dirty: `git status --porcelain` lists anything."""
    import subprocess

    def git(*argv):
        return subprocess.run(["git", "-C", repo_root, *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, check=True).stdout
    try:
        return git("rev-parse", "HEAD").strip(), bool(git("status", "--porcelain").strip())
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False


def write_atomically(path, data):
    """Writes a temporary file in the target's directory, then renames it over the target:
    a reader sees the old file or the whole new one, never a part."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".",
                                   suffix=".tmp")
    except OSError as e:
        raise OSError(e.errno, f"cannot write: {e.strerror}", path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Writes a self-contained HTML report (plots and tables) from the "
                    "profile.json that `graph-opt --report-dir DIR` wrote.")
    ap.add_argument("dir", metavar="DIR", help="the --report-dir directory holding profile.json")
    ap.add_argument("--memory-limit", type=parse_bytes, metavar="BYTES",
                    help="draw this limit (bytes, or e.g. 2GiB, 512MiB); overrides the "
                         "profile's memory_limit_bytes")
    ap.add_argument("-o", "--output", metavar="FILE",
                    help="where to write the report (default: DIR/report.html)")
    ap.add_argument("--ranks", metavar="DIRS",
                    help="comma-separated report directories of every rank, in rank order: "
                         "adds a section comparing the ranks")
    ap.add_argument("--plots-dir", metavar="PLOTS",
                    help="also write each plot as a PNG file in this directory")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    prog = os.path.basename(sys.argv[0]) or "make_report.py"
    try:
        profile = load_profile(os.path.join(args.dir, "profile.json"))
        limit = args.memory_limit if args.memory_limit is not None \
            else profile["memory_limit_bytes"]
        pngs = draw_plots(profile, limit)
        ranks = load_ranks([d for d in args.ranks.split(",") if d]) if args.ranks else None
        if ranks:
            plt = import_pyplot()
            pngs["ranks"] = figure_png(plt, plot_ranks(plt, ranks))
        page = render_html(profile, limit, pngs, ranks).encode("utf-8")
        output = args.output or os.path.join(args.dir, "report.html")
        if args.plots_dir:
            os.makedirs(args.plots_dir, exist_ok=True)
            for plot_id, png in pngs.items():
                write_atomically(os.path.join(args.plots_dir, f"profile-{plot_id}.png"), png)
        write_atomically(output, page)
    except ProfileError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{prog}: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"{prog}: wrote {output} ({len(page) / 1024:.0f} KiB, {len(pngs)} plots)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
