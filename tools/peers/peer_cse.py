#!/usr/bin/env python3
"""What redundant-op elimination users already have finds on graph-opt's zoo, next to what
graph-opt's cse finds (issue 11, item 6).

    peer_cse.py fx MODEL.pt2 [-o FX.csv] [--banned none|default] [--check-names]
    peer_cse.py torchscript [--models mlp,cnn,...] [--fx-zoo DIR] [--markdown] [--csv FILE]
    peer_cse.py compare FX.csv CSE.csv [--model NAME] [--strict]
    peer_cse.py table [--zoo DIR] [--models gpt2-train,...] [--graph-opt PATH]
                      [--passes PIPELINE] [--reports DIR] [--keep DIR] [-o TABLE.md]
                      [--strict]

fx: torch.fx's CSEPass (torch.fx.passes.dialect.common.cse_pass) on the archive's graph
module; writes one row per merge, ``replaced,kept,op,replaced_outputs,kept_outputs,
replaced_phase,kept_phase,flags,replaced_operands,kept_operands`` (fx node names;
graph-opt's names of their results, ``;``-joined; forward/backward; flags: random,
side-effect, in-place, mixed-types, cross-phase, no-result; graph-opt's names of the nodes
each reads; see fx_cse.py), and prints a summary. The mapping of merges is
replayed and checked against the real pass's result; --check-names also checks every name
and phase against ``graph-opt MODEL -S``. ``--banned default`` passes
``get_CSE_banned_ops()`` (random and in-place ops); the default, as ``CSEPass()``, bans
nothing.

torchscript: each zoo eval model (the zoo's builders, tools/zoo; tiny, seed 0) traced,
inlined, then torch._C._jit_pass_cse and torch._C._jit_pass_dce: nodes before and after each,
the nodes each removed by kind and class (constant, attribute, list, shape, tensor; see
ts_cse.py).
--fx-zoo DIR adds, for each tensor kind, the fx CSE merges of that operator on
DIR/<model>-eval.pt2.

compare: fx's merges against graph-opt's ``<report-dir>/cse.csv``: made by both, refused by
graph-opt (its reason), 0 vs 0.0 (operands equal only by Python's ==), result-less (no
graph-opt name), operands not merged by graph-opt (and why), unexplained; and graph-opt's
merges fx did not make (see cse_compare.py).

table: for each model, the fx side and ``graph-opt ZOO/MODEL.pt2 -passes=cse --report-dir
TMP`` (or, with --reports DIR, a cse.csv already at DIR/MODEL/cse.csv), compared; prints a
markdown table (and writes it to -o FILE), then the comparison of each model where the two
differ.

Exit codes: 0 done; 1 compare/table found fx merges graph-opt neither made nor refused
(unexplained; with --strict also the 0 vs 0.0 and result-less ones), or --check-names found
a name that differs; 2 bad arguments or input (the
message names the file), or graph-opt failed.
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

PEERS_DIR = os.path.dirname(os.path.abspath(__file__))
TOOLS_DIR = os.path.dirname(PEERS_DIR)
REPO_ROOT = os.path.dirname(TOOLS_DIR)
DEFAULT_GRAPH_OPT = os.path.join(REPO_ROOT, "build", "bin", "graph-opt")
DEFAULT_ZOO = os.path.join(REPO_ROOT, "build", "zoo")
DEFAULT_TABLE_MODELS = ("mlp-train", "cnn-train", "resnet18-train", "bert-train", "gpt2-train",
                        "llama-train", "t5-train", "mlp-eval", "gpt2-eval", "t5-eval")
sys.path.insert(0, PEERS_DIR)
sys.path.insert(0, os.path.join(TOOLS_DIR, "report"))

import cse_compare  # noqa: E402
import make_report  # noqa: E402  (the atomic write)

PROG = "peer_cse.py"
EXIT_OK, EXIT_FOUND, EXIT_BAD = 0, 1, 2


class ToolError(Exception):
    """Ends the run with exit code 2; the message says what and where."""


def write_atomically(path: str, text: str) -> None:
    """The project's atomic write (tools/report/make_report.py); an OSError becomes a ToolError."""
    try:
        make_report.write_atomically(path, text.encode("utf-8"))
    except OSError as e:
        raise ToolError(f"{path}: cannot write: {e.strerror}") from None


def _quiet_torch():
    # torch.export.load warns about read-only buffers; transformers about its loss type.
    # CSEPass's copy of the graph module warns about pytree's LeafSpec (FutureWarning).
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    # torch.export.load logs a traceback before raising on a file that is no archive (set
    # after importing torch, which configures its loggers).
    import torch  # noqa: F401

    logging.getLogger("torch.export").setLevel(logging.CRITICAL)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _find_graph_opt(path: str) -> str:
    """``path``, or a bare name looked up on PATH; ToolError when there is none."""
    found = path if os.sep in path else shutil.which(path)
    if not found or not os.path.isfile(found):
        raise ToolError(f"graph-opt not found at {path} (build it with `make build`, or give "
                        f"--graph-opt PATH)")
    return found


def _check_file(path: str, what: str) -> None:
    if not os.path.isfile(path):
        raise ToolError(f"{path}: no such {what}")


# --- fx ----------------------------------------------------------------------------------

def _run_fx(path: str, banned: str):
    import fx_cse

    _check_file(path, ".pt2 archive")
    _quiet_torch()
    try:
        return fx_cse.run_fx_cse(path, banned)
    except AssertionError as e:  # the replayed merges are not what CSEPass did
        raise ToolError(f"{path}: the merges replayed differ from CSEPass's result: {e}") \
            from None
    except Exception as e:  # torch.export.load's errors for a file that is no archive
        raise ToolError(f"{path}: cannot run fx CSE: {type(e).__name__}: "
                        f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from None


def fx_summary(result) -> str:
    import fx_cse

    ops = collections.Counter(fx_cse.qualified_op_name(m.replaced.target) for m in result.merges)
    flags = collections.Counter(f for m in result.merges for f in m.flags)
    text = (f"{os.path.basename(result.path)}: {result.num_nodes} nodes, {len(result.merges)} "
            f"fx CSE merges (+{result.getitems} getitems of merged nodes)")
    if ops:
        text += ": " + ", ".join(f"{op} x{n}" for op, n in ops.most_common())
    if flags:
        text += "\n  flags: " + ", ".join(f"{f} x{flags[f]}" for f in fx_cse.FLAGS if f in flags)
    return text + "\n"


def cmd_fx(args) -> int:
    import fx_cse

    graph_opt = _find_graph_opt(args.graph_opt) if args.check_names else None
    result = _run_fx(args.model, args.banned)
    text = fx_cse.csv_text(result)
    if args.output:
        write_atomically(args.output, text)
        sys.stdout.write(fx_summary(result))
    else:
        sys.stdout.write(text)
    if graph_opt:
        try:
            problems = fx_cse.check_names(result, graph_opt)
        except RuntimeError as e:
            raise ToolError(str(e)) from None
        for p in problems:
            print(f"{PROG}: name mismatch: {p}", file=sys.stderr)
        print(f"names and phases checked against graph-opt -S: {len(problems)} mismatches",
              file=sys.stderr if problems else sys.stdout)
        if problems:
            return EXIT_FOUND
    return EXIT_OK


# --- torchscript -------------------------------------------------------------------------

def _fx_ops(zoo: str, model: str) -> collections.Counter | None:
    """fx CSE merges by operator base name (aten::add) on ZOO/MODEL-eval.pt2, or None."""
    import fx_cse

    path = os.path.join(zoo, f"{model}-eval.pt2")
    if not os.path.isfile(path):
        return None
    result = _run_fx(path, "none")
    return collections.Counter(fx_cse.qualified_op_name(m.replaced.target).split(".")[0]
                               for m in result.merges)


def _table(header, rows, markdown: bool, widths) -> list:
    """Lines of a markdown table, or of plain columns at least ``widths`` wide."""
    if markdown:
        return ["| " + " | ".join(str(c) for c in cells) + " |"
                for cells in [header, ("---",) * len(header)] + list(rows)]
    return ["  ".join(f"{c!s:<{w}}" for c, w in zip(cells, widths)).rstrip()
            for cells in [header] + list(rows)]


def cmd_torchscript(args) -> int:
    import ts_cse

    _quiet_torch()
    known = ts_cse.eval_models()
    models = args.models.split(",") if args.models else known
    bad = [m for m in models if m not in known]
    if bad:
        raise ToolError(f"unknown model {', '.join(bad)} (known: {', '.join(known)})")
    results = []
    for m in models:
        try:
            results.append(ts_cse.run_ts_cse(m, args.seed))
        except Exception as e:
            raise ToolError(f"{m}: tracing or the TorchScript passes failed: "
                            f"{type(e).__name__}: {e}") from None
    fx = {r.model: _fx_ops(args.fx_zoo, r.model) for r in results} if args.fx_zoo else {}

    def by_class(counter):
        per = collections.Counter()
        for (_, cls), n in counter.items():
            per[cls] += n
        return ", ".join(f"{c} {per[c]}" for c in ts_cse.CLASSES if per[c]) or "-"

    summary = [(r.model, r.tracer_warnings, *r.nodes, by_class(r.cse), by_class(r.dce))
               for r in results]
    kinds, csv_rows = [], ["model,pass,kind,class,count"]
    for r in results:
        keys = sorted(set(r.cse) | set(r.dce),
                      key=lambda k: (ts_cse.CLASSES.index(k[1]), k[0]))
        for kind, cls in keys:
            note = ts_cse.CLASS_NOTE[cls]
            if cls == "tensor":
                note = f"{kind} (the .pt2's {kind}.*)"
                if fx.get(r.model) is not None:
                    note += f"; fx CSE merges {fx[r.model][kind]} on {r.model}-eval.pt2"
            kinds.append((r.model, kind, cls, r.cse[(kind, cls)], r.dce[(kind, cls)], note))
            for name, counter in (("cse", r.cse), ("dce", r.dce)):
                if counter[(kind, cls)]:
                    csv_rows.append(f"{r.model},{name},{kind},{cls},{counter[(kind, cls)]}")
    out = _table(("model", "tracer warnings", "nodes", "after cse", "after dce", "cse removed",
                  "dce removed"), summary, args.markdown, (10, 6, 6, 6, 6, 44, 20))
    out += [""] + _table(("model", "kind", "class", "cse", "dce", "graph-opt counterpart"),
                         kinds, args.markdown, (10, 22, 10, 5, 5, 52))
    print("\n".join(out))
    if args.csv:
        write_atomically(args.csv, "\n".join(csv_rows) + "\n")
    return EXIT_OK


# --- compare and table -------------------------------------------------------------------

def cmd_compare(args) -> int:
    try:
        fx_rows = cse_compare.read_fx(args.fx_csv)
        go_rows = cse_compare.read_graph_opt(args.cse_csv)
    except cse_compare.InputError as e:
        raise ToolError(str(e)) from None
    c = cse_compare.compare(fx_rows, go_rows)
    sys.stdout.write(cse_compare.report(c, args.model or ""))
    return EXIT_FOUND if c.failures(args.strict) else EXIT_OK


def _graph_opt_report(graph_opt: str, archive: str, passes: str, tmp: str) -> str:
    """Runs graph-opt's pipeline on ``archive``; returns the path of the cse.csv it wrote."""
    cmd = [graph_opt, archive, f"-passes={passes}", "--report-dir", tmp, "-o", os.devnull]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolError(f"{' '.join(cmd)} failed (exit {proc.returncode}): "
                        f"{proc.stderr.strip()[:500]}")
    path = os.path.join(tmp, "cse.csv")
    if not os.path.isfile(path):
        raise ToolError(f"{' '.join(cmd)} wrote no {path}")
    return path


def cmd_table(args) -> int:
    import fx_cse

    models = [m for m in args.models.split(",") if m]
    if not models:
        raise ToolError("--models names no model")
    graph_opt = None if args.reports else _find_graph_opt(args.graph_opt)
    for m in models:
        _check_file(os.path.join(args.zoo, f"{m}.pt2"), ".pt2 archive (give --zoo DIR)")
    header = ("model", "nodes", "fx merges", "graph-opt merges", "both",
              "refused by graph-opt", "operands not merged", "0 vs 0.0", "result-less",
              "unexplained", "graph-opt only")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    details = []
    unexplained = 0
    with tempfile.TemporaryDirectory(prefix="peer-cse-") as tmp:
        for m in models:
            archive = os.path.join(args.zoo, f"{m}.pt2")
            result = _run_fx(archive, args.banned)
            fx_path = os.path.join(tmp, f"{m}.fx.csv")
            with open(fx_path, "w", encoding="utf-8") as f:
                f.write(fx_cse.csv_text(result))
            if args.reports:
                cse_path = os.path.join(args.reports, m, "cse.csv")
            else:
                os.makedirs(os.path.join(tmp, m))
                cse_path = _graph_opt_report(graph_opt, archive, args.passes,
                                             os.path.join(tmp, m))
            try:
                c = cse_compare.compare(cse_compare.read_fx(fx_path),
                                        cse_compare.read_graph_opt(cse_path))
            except cse_compare.InputError as e:
                raise ToolError(str(e)) from None
            unexplained += len(c.failures(args.strict))
            lines.append("| " + " | ".join(str(x) for x in (
                m, result.num_nodes, c.fx_merges, c.go_merges, len(c.both), len(c.refused),
                len(c.follows), len(c.typed), len(c.unnamed), len(c.unexplained),
                len(c.go_only))) + " |")
            if len(c.both) != c.fx_merges or c.go_only:
                details.append(cse_compare.report(c, m))
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                shutil.copy(fx_path, os.path.join(args.keep, f"{m}.fx.csv"))
                shutil.copy(cse_path, os.path.join(args.keep, f"{m}.cse.csv"))
    table = "\n".join(lines) + "\n"
    if args.output:
        write_atomically(args.output, table)
    sys.stdout.write(table)
    if details:
        sys.stdout.write("\n" + "\n".join(details))
    return EXIT_FOUND if unexplained else EXIT_OK


# --- command line ------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0] + " " +
                                 __doc__.splitlines()[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    def banned(p):
        p.add_argument("--banned", choices=("none", "default"), default="none",
                       help="ops CSEPass may not merge: none (CSEPass(), the default) or "
                            "default (get_CSE_banned_ops(): random and in-place ops)")

    def strict(p):
        p.add_argument("--strict", action="store_true",
                       help="exit 1 also for fx merges graph-opt keeps apart as 0 vs 0.0 and for "
                            "result-less ones (by default only for unexplained merges)")

    def graph_opt(p):
        p.add_argument("--graph-opt", default=DEFAULT_GRAPH_OPT, metavar="PATH",
                       help=f"the graph-opt binary (default: this checkout's "
                            f"{os.path.relpath(DEFAULT_GRAPH_OPT, REPO_ROOT)})")

    p = sub.add_parser("fx", help="torch.fx CSEPass on a .pt2: the merges as CSV")
    p.add_argument("model", metavar="MODEL.pt2")
    p.add_argument("-o", "--output", metavar="FX.csv",
                   help="write the CSV here and print a summary (default: CSV on stdout)")
    p.add_argument("--check-names", action="store_true",
                   help="check graph-opt's names and phases of every node against "
                        "`graph-opt MODEL.pt2 -S` (exit 1 on a mismatch)")
    banned(p)
    graph_opt(p)

    p = sub.add_parser("torchscript", help="TorchScript CSE and DCE on the traced eval models")
    p.add_argument("--models", help="comma-separated zoo models (default: all)")
    p.add_argument("--seed", type=int, default=0, help="weights seed, as the exporter's")
    p.add_argument("--fx-zoo", metavar="DIR",
                   help="also count fx CSE's merges of each tensor kind on DIR/MODEL-eval.pt2")
    p.add_argument("--markdown", action="store_true", help="markdown tables")
    p.add_argument("--csv", metavar="FILE", help="also write model,pass,kind,class,count")

    p = sub.add_parser("compare", help="fx merges against graph-opt's cse.csv")
    p.add_argument("fx_csv", metavar="FX.csv", help="from `peer_cse.py fx`")
    p.add_argument("cse_csv", metavar="CSE.csv", help="graph-opt's <report-dir>/cse.csv")
    p.add_argument("--model", help="a name for the report's first line")
    strict(p)

    p = sub.add_parser("table", help="fx and graph-opt on several zoo models: markdown table")
    p.add_argument("--zoo", default=DEFAULT_ZOO, metavar="DIR",
                   help=f"the zoo (default: {os.path.relpath(DEFAULT_ZOO, REPO_ROOT)})")
    p.add_argument("--models", default=",".join(DEFAULT_TABLE_MODELS),
                   help="comma-separated archive stems in the zoo (default: "
                        f"{','.join(DEFAULT_TABLE_MODELS)})")
    p.add_argument("--reports", metavar="DIR",
                   help="read graph-opt's report from DIR/MODEL/cse.csv instead of running it")
    p.add_argument("--passes", default="cse", metavar="PIPELINE",
                   help="graph-opt's pipeline, which must run cse (default: cse)")
    p.add_argument("--keep", metavar="DIR", help="copy each model's fx and cse CSVs here")
    p.add_argument("-o", "--output", metavar="TABLE.md", help="also write the table here")
    strict(p)
    banned(p)
    graph_opt(p)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    commands = {"fx": cmd_fx, "torchscript": cmd_torchscript, "compare": cmd_compare,
                "table": cmd_table}
    try:
        return commands[args.command](args)
    except ToolError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_BAD


if __name__ == "__main__":
    sys.exit(main())
