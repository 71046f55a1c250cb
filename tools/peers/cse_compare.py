"""Compare torch.fx CSE's merges (fx_cse's CSV) with graph-opt's cse report
(``<report-dir>/cse.csv``: kept,replaced,op,kept_phase,replaced_phase,decision,reason).

Names: graph-opt names a node by its first result; the fx CSV gives, for each merged node,
its fx name and graph-opt's names of its results (``replaced_outputs``, ``kept_outputs``), so
either spelling is accepted. A name stands for its node (``_Names.canon``).

Chains: graph-opt may merge B into A' and A' into A, where fx merged B straight into A (fx
always reuses the first node). So a merge is judged by equivalence classes: graph-opt's
merged rows are joined in a union-find, and an fx merge (B into A) is *made* when B and A end
in one class. It is *refused* when a refused row joins B's class to A (or to A's class, or to
a node fx merged into A). It is *typed* when fx's operands were equal only by Python's ``==``
(fx's ``mixed-types`` flag: ``scalar_tensor(0, dtype=f32)`` and ``scalar_tensor(0.0,
dtype=f32)``), which graph-opt keeps apart. It is *unnamed* when B has no result (fx's
``no-result`` flag): graph-opt's cse skips such nodes (nothing to reuse) and has no name for
them. It *follows* when graph-opt did not merge two of the operands (``replaced_operands`` and
``kept_operands``, position by position) that fx had merged: B and A then read different
values in graph-opt, and the operands' own fx row says why (refused, typed, ...). Anything
else is *unexplained*: graph-opt neither made nor refused a merge fx made (a bug to look at).
A graph-opt merge that fx did not make (its two nodes are in different fx classes) is listed
with its op.
"""

from __future__ import annotations

import csv
import dataclasses

FX_COLUMNS = ("replaced", "kept", "op", "replaced_outputs", "kept_outputs", "replaced_phase",
              "kept_phase", "flags")  # and, optional: replaced_operands, kept_operands
GO_COLUMNS = ("kept", "replaced", "op", "kept_phase", "replaced_phase", "decision", "reason")
DECISIONS = ("merged", "refused")


class InputError(Exception):
    """A missing or malformed input file; the message names it (exit code 2)."""


def read_csv(path: str, columns: tuple, what: str) -> list:
    """Rows of ``path`` as dicts; InputError unless every column of ``columns`` is there."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in columns if c not in header]
            if missing:
                raise InputError(f"{path}: not {what}: missing column"
                                 f"{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                                 f"(header: {','.join(header) or 'empty'})")
            rows = []
            for line, row in enumerate(reader, start=2):
                if None in row or any(row[c] is None for c in columns):
                    raise InputError(f"{path}:{line}: expected {len(header)} fields")
                row["_line"] = line
                rows.append(row)
            return rows
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not a CSV file: {e}") from None


def read_fx(path: str) -> list:
    rows = read_csv(path, FX_COLUMNS, "an fx CSE CSV (peer_cse.py fx)")
    for r in rows:
        if not r["replaced"] or not r["kept"]:
            raise InputError(f"{path}:{r['_line']}: empty replaced or kept name")
        for c in ("replaced_outputs", "kept_outputs", "flags", "replaced_operands",
                  "kept_operands"):
            r[c] = [x for x in r.get(c, "").split(";") if x]
    return rows


def read_graph_opt(path: str) -> list:
    rows = read_csv(path, GO_COLUMNS, "graph-opt's cse report")
    for r in rows:
        if r["decision"] not in DECISIONS:
            raise InputError(f"{path}:{r['_line']}: decision '{r['decision']}' is not one of "
                             f"{', '.join(DECISIONS)}")
        if not r["kept"] or not r["replaced"]:
            raise InputError(f"{path}:{r['_line']}: empty kept or replaced name")
    return rows


class _UnionFind:
    def __init__(self):
        self.parent = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)


class _Names:
    """Every spelling of an fx-merged node (fx name, graph-opt result names) -> its fx name."""

    def __init__(self, fx_rows):
        self.alias = {}
        for r in fx_rows:
            for node, outs in ((r["replaced"], r["replaced_outputs"]),
                               (r["kept"], r["kept_outputs"])):
                for name in [node] + outs:
                    self.alias[name] = node

    def canon(self, name: str) -> str:
        return self.alias.get(name, name)


@dataclasses.dataclass
class Comparison:
    fx_merges: int = 0
    go_merges: int = 0
    go_refusals: int = 0
    both: list = dataclasses.field(default_factory=list)  # fx rows
    refused: list = dataclasses.field(default_factory=list)  # (fx row, graph-opt row)
    typed: list = dataclasses.field(default_factory=list)  # fx rows flagged mixed-types
    unnamed: list = dataclasses.field(default_factory=list)  # fx rows
    follows: list = dataclasses.field(default_factory=list)  # (fx row, operand's fx row)
    unexplained: list = dataclasses.field(default_factory=list)  # fx rows
    go_only: list = dataclasses.field(default_factory=list)  # graph-opt rows

    def failures(self, strict: bool = False) -> list:
        """The fx merges a CI check fails on: unexplained ones; with ``strict`` also the
        typed and unnamed ones."""
        return self.unexplained + (self.typed + self.unnamed if strict else [])

    def category(self, fx_row) -> str:
        for name in ("both", "refused", "typed", "unnamed", "follows", "unexplained"):
            for entry in getattr(self, name):
                if (entry[0] if isinstance(entry, tuple) else entry) is fx_row:
                    return name
        raise KeyError(fx_row["replaced"])


def compare(fx_rows: list, go_rows: list) -> Comparison:
    """fx_rows in graph order (as fx_cse writes them: an operand's merge before its users')."""
    names = _Names(fx_rows)
    fx_classes, go_classes = _UnionFind(), _UnionFind()
    for r in fx_rows:
        fx_classes.union(r["replaced"], r["kept"])
    merged = [r for r in go_rows if r["decision"] == "merged"]
    refused = [r for r in go_rows if r["decision"] == "refused"]
    for r in merged:
        go_classes.union(names.canon(r["replaced"]), names.canon(r["kept"]))

    def go_class(name):
        return go_classes.find(names.canon(name))

    by_replaced = {r["replaced"]: r for r in fx_rows}
    result = Comparison(fx_merges=len(fx_rows), go_merges=len(merged), go_refusals=len(refused))
    for fx in fx_rows:
        b, a = fx["replaced"], fx["kept"]
        if go_class(b) == go_class(a):
            result.both.append(fx)
            continue
        # A refusal explains it when it joins B's class to A's class or to a node fx found
        # equal to A.
        reason = next((g for g in refused for x, y in ((g["kept"], g["replaced"]),
                                                       (g["replaced"], g["kept"]))
                       if go_class(x) == go_class(b) and
                       (go_class(y) == go_class(a) or
                        fx_classes.find(names.canon(y)) == fx_classes.find(a))), None)
        cause = _unmerged_operand(fx, go_class, names, by_replaced)
        if reason is not None:
            result.refused.append((fx, reason))
        elif "mixed-types" in fx["flags"]:
            result.typed.append(fx)
        elif "no-result" in fx["flags"] or not fx["replaced_outputs"]:
            result.unnamed.append(fx)
        elif cause is not None:
            result.follows.append((fx, cause))
        else:
            result.unexplained.append(fx)
    for g in merged:
        if fx_classes.find(names.canon(g["replaced"])) != fx_classes.find(names.canon(g["kept"])):
            result.go_only.append(g)
    return result


def _unmerged_operand(fx, go_class, names, by_replaced):
    """The fx merge of an operand pair graph-opt did not merge (so B and A read different
    values in graph-opt and are not equal there), or None. fx merged B into A because their
    operands were equal after fx's own merges: where graph-opt keeps the two operands
    apart, the fx row that merged one of them is the cause."""
    ops_b, ops_a = fx.get("replaced_operands", []), fx.get("kept_operands", [])
    for x, y in zip(ops_b, ops_a):
        if go_class(x) != go_class(y):
            for name in (x, y):
                row = by_replaced.get(names.canon(name))
                if row is not None:
                    return row
    return None


_CATEGORY = {"both": "graph-opt made it", "refused": "graph-opt refused it",
             "typed": "0 and 0.0", "unnamed": "result-less",
             "follows": "its own operands were not merged", "unexplained": "unexplained"}


def _fx_line(r) -> str:
    flags = f" [{', '.join(r['flags'])}]" if r["flags"] else ""
    return (f"{r['replaced']} into {r['kept']} ({r['op']}, {r['replaced_phase']} into "
            f"{r['kept_phase']}){flags}")


def report(c: Comparison, model: str = "") -> str:
    """The human-readable comparison of one model."""
    head = f"{model}: " if model else ""
    lines = [f"{head}fx CSE merges {c.fx_merges}, graph-opt merges {c.go_merges} "
             f"(refused {c.go_refusals})",
             f"  fx merges graph-opt also made: {len(c.both)}",
             f"  fx merges graph-opt refused: {len(c.refused)}"]
    lines += [f"    {_fx_line(fx)}: {g['reason'] or '(no reason given)'}" for fx, g in c.refused]
    lines.append(f"  fx merges of operands equal only by Python's == (0 and 0.0), which "
                 f"graph-opt keeps apart: {len(c.typed)}")
    lines += [f"    {_fx_line(fx)}" for fx in c.typed]
    lines.append(f"  fx merges of result-less nodes (graph-opt has no name for them): "
                 f"{len(c.unnamed)}")
    lines += [f"    {_fx_line(fx)}" for fx in c.unnamed]
    lines.append(f"  fx merges whose operands graph-opt did not merge: {len(c.follows)}")
    lines += [f"    {_fx_line(fx)}: fx merged its operand {cause['replaced']} into "
              f"{cause['kept']} ({_CATEGORY[c.category(cause)]})" for fx, cause in c.follows]
    lines.append(f"  fx merges graph-opt neither made nor refused (unexplained): "
                 f"{len(c.unexplained)}")
    lines += [f"    {_fx_line(fx)}" for fx in c.unexplained]
    lines.append(f"  graph-opt merges fx did not make: {len(c.go_only)}")
    lines += [f"    {g['replaced']} into {g['kept']} ({g['op']}, {g['replaced_phase']} into "
              f"{g['kept_phase']})" for g in c.go_only]
    return "\n".join(lines) + "\n"
