#!/usr/bin/env python3
"""checkpoint{planner=milp,solver=cpsat}: the same 0-1 program graph-opt-milp
solves with CBC, solved by OR-Tools' CP-SAT instead.

usage: graph_opt_cpsat.py REQUEST SOLUTION

Reads and writes the files of passes/checkpoint/MilpProblem.h (native byte
order, magic word first). CP-SAT takes integer coefficients: the objective
(seconds) is scaled to nanoseconds and each row to integers (memory rows are
whole bytes already); a row whose coefficients are not whole is scaled by
1e6 and its right-hand side rounded up, so an integer solution of the scaled
row meets the original one. The start, when given, is CP-SAT's hint. The gap
is CP-SAT's own: (objective - best bound) / objective, both of the scaled
program. Exit 0 with a solution file whenever CP-SAT ran (found or not), 2
on a request it cannot read, so that graph-opt reports the error.
"""
import math
import struct
import sys
import time

REQUEST_MAGIC = b"GOMILPQ1"
SOLUTION_MAGIC = b"GOMILPS1"


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise ValueError("truncated")
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return values

    def value(self, code):
        return self.take("=" + code)[0]

    def array(self, code):
        n = self.value("Q")
        if n > (1 << 28):
            raise ValueError("a count of %d" % n)
        return list(self.take("=%d%s" % (n, code))) if n else []


def read_request(path):
    r = Reader(open(path, "rb").read())
    if r.take("=8s")[0] != REQUEST_MAGIC:
        raise ValueError("not a MILP request")
    seconds = r.value("d")
    memory_rows = r.value("Q")
    objective = r.array("d")
    upper = r.array("d")
    rows = []
    for _ in range(r.value("Q")):
        columns = r.array("i")
        coefficients = r.array("d")
        rhs = r.value("d")
        if len(columns) != len(coefficients):
            raise ValueError("a row of %d columns and %d coefficients"
                             % (len(columns), len(coefficients)))
        rows.append((columns, coefficients, rhs))
    start = r.array("d")
    if r.at != len(r.data):
        raise ValueError("bytes past the end")
    return seconds, memory_rows, objective, upper, rows, start


def write_solution(path, found, gap, status, columns):
    status = status.encode()
    with open(path, "wb") as f:
        f.write(SOLUTION_MAGIC)
        f.write(struct.pack("=Bd", 1 if found else 0, gap))
        f.write(struct.pack("=Q", len(status)) + status)
        f.write(struct.pack("=Q", len(columns)))
        f.write(struct.pack("=%dd" % len(columns), *columns))


def integer_row(coefficients, rhs):
    """Integer coefficients and right-hand side with the same 0-1 solutions
    (where they are whole) or none more (scaled, rhs rounded up)."""
    if all(float(c).is_integer() for c in coefficients) and float(rhs).is_integer():
        return [int(c) for c in coefficients], int(rhs)
    scale = 1e6
    return [int(round(c * scale)) for c in coefficients], int(math.ceil(rhs * scale - 1e-6))


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: graph_opt_cpsat.py REQUEST SOLUTION (started by graph-opt's "
                         "checkpoint{planner=milp,solver=cpsat})\n")
        return 2
    try:
        seconds, _, objective, upper, rows, start = read_request(argv[1])
    except (OSError, ValueError, struct.error) as e:
        sys.stderr.write("graph_opt_cpsat: %s is not a MILP request written by graph-opt: %s\n"
                         % (argv[1], e))
        return 2
    try:
        from ortools.sat.python import cp_model
    except ImportError as e:
        sys.stderr.write("graph_opt_cpsat: OR-Tools is not installed (%s): pip install ortools, "
                         "or use solver=cbc\n" % e)
        return 2
    began = time.monotonic()
    model = cp_model.CpModel()
    x = [model.NewBoolVar("x%d" % i) if upper[i] > 0 else model.NewConstant(0)
         for i in range(len(objective))]
    for columns, coefficients, rhs in rows:
        ints, bound = integer_row(coefficients, rhs)
        model.Add(sum(c * x[j] for j, c in zip(columns, ints)) >= bound)
    model.Minimize(sum(int(round(c * 1e9)) * x[i] for i, c in enumerate(objective) if c))
    for i, v in enumerate(start):
        if upper[i] > 0:
            model.AddHint(x[i], int(round(v)))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(seconds - (time.monotonic() - began), 0.01)
    solver.parameters.num_workers = 2
    result = solver.Solve(model)
    found = result in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    status = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "time limit",
              cp_model.INFEASIBLE: "infeasible"}.get(result, "no solution in the time limit")
    columns, gap = [], -1.0
    if found:
        columns = [float(solver.Value(v)) for v in x]
        value, bound = solver.ObjectiveValue(), solver.BestObjectiveBound()
        gap = 0.0 if result == cp_model.OPTIMAL else (
            (value - bound) / abs(value) if value else 0.0)
    write_solution(argv[2], found, gap, status, columns)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
