#!/usr/bin/env python3
"""The benchmark problems of `hpsearch bench` as a command workload.

Standard library only. Usage:

    python3 objective.py PROBLEM [X0 X1 ...]

PROBLEM is branin, hartmann6, rosenbrock10 or ackley5. The point is read
from the command line, or else, as hpsearch runs it, from the JSON object
of parameters x0, x1, ... in the file $HPSEARCH_PARAMS_FILE. The script
prints the function's value as one metric report, {"value": ...}, on
stdout, and exits 0. The definitions are those of internal/bench/problems.go
(Surjanovic and Bingham's Virtual Library of Simulation Experiments).
"""

import json
import math
import os
import sys


def branin(x):
    b = 5.1 / (4 * math.pi * math.pi)
    c = 5 / math.pi
    t = 1 / (8 * math.pi)
    u = x[1] - b * x[0] * x[0] + c * x[0] - 6
    return u * u + 10 * (1 - t) * math.cos(x[0]) + 10


HARTMANN6_ALPHA = [1.0, 1.2, 3.0, 3.2]
HARTMANN6_A = [
    [10, 3, 17, 3.5, 1.7, 8],
    [0.05, 10, 17, 0.1, 8, 14],
    [3, 3.5, 1.7, 10, 17, 8],
    [17, 8, 0.05, 10, 0.1, 14],
]
HARTMANN6_P = [
    [0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
    [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
    [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
    [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381],
]


def hartmann6(x):
    f = 0.0
    for alpha, a, p in zip(HARTMANN6_ALPHA, HARTMANN6_A, HARTMANN6_P):
        e = 0.0
        for j in range(6):
            d = x[j] - p[j]
            e += a[j] * d * d
        f -= alpha * math.exp(-e)
    return f


def rosenbrock(x):
    f = 0.0
    for i in range(len(x) - 1):
        u, v = x[i + 1] - x[i] * x[i], 1 - x[i]
        f += 100 * u * u + v * v
    return f


def ackley(x):
    sq = sum(v * v for v in x)
    cs = sum(math.cos(2 * math.pi * v) for v in x)
    n = len(x)
    return -20 * math.exp(-0.2 * math.sqrt(sq / n)) - math.exp(cs / n) + 20 + math.e


# name: (function, dimensions)
PROBLEMS = {
    "branin": (branin, 2),
    "hartmann6": (hartmann6, 6),
    "rosenbrock10": (rosenbrock, 10),
    "ackley5": (ackley, 5),
}


def point(dim, args):
    if args:
        if len(args) != dim:
            sys.exit(f"objective.py: {len(args)} coordinates given, the problem has {dim}")
        return [float(a) for a in args]
    path = os.environ.get("HPSEARCH_PARAMS_FILE")
    if not path:
        sys.exit("objective.py: give the point as arguments, or its parameters in $HPSEARCH_PARAMS_FILE")
    with open(path) as f:
        params = json.load(f)
    want = [f"x{i}" for i in range(dim)]
    if sorted(params) != sorted(want):
        sys.exit(f"objective.py: parameters {sorted(params)}, want {want}")
    return [float(params[name]) for name in want]


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in PROBLEMS:
        sys.exit(f"usage: objective.py PROBLEM [X0 X1 ...], PROBLEM one of {', '.join(PROBLEMS)}")
    f, dim = PROBLEMS[sys.argv[1]]
    value = f(point(dim, sys.argv[2:]))
    print(json.dumps({"value": value}), flush=True)


if __name__ == "__main__":
    main()
