#!/usr/bin/python3
"""Optuna's figures on hpsearch's benchmark problems, for docs/benchmarks.md.

Runs Optuna's TPE (independent and multivariate) and random samplers on
Branin (2-D), Hartmann6 (6-D), Rosenbrock 10-D on [-5, 10]^10 and Ackley 5-D
on [-32.768, 32.768]^5, each for 200 evaluations over 20 seeds, and prints
the median [interquartile range] of simple regret (best value found minus
the known minimum) after 25, 50, 100 and 200 evaluations as a Markdown
table, in the layout of `hpsearch bench`.

    apt-get install python3-optuna   # Debian's optuna 3.1
    /usr/bin/python3 scripts/optuna/bench.py [--seeds 20] [--evals 200]

(Debian's python3, where apt-get installs optuna.)
"""
import argparse
import math
import os
import statistics
import sys

import optuna

# The problems as examples/bench/objective.py defines them; internal/bench's
# tests check that file against the Go definitions.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "bench"))
from objective import ackley, branin, hartmann6, rosenbrock  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)


PROBLEMS = [
    ("branin", branin, [(-5, 10), (0, 15)], 0.397887),
    ("hartmann6", hartmann6, [(0, 1)] * 6, -3.32237),
    ("rosenbrock10", rosenbrock, [(-5, 10)] * 10, 0.0),
    ("ackley5", ackley, [(-32.768, 32.768)] * 5, 0.0),
]

SAMPLERS = {
    "optuna-random": lambda seed: optuna.samplers.RandomSampler(seed=seed),
    "optuna-tpe": lambda seed: optuna.samplers.TPESampler(seed=seed),
    "optuna-tpe-multivariate": lambda seed: optuna.samplers.TPESampler(seed=seed, multivariate=True),
}

CHECKPOINTS = [25, 50, 100, 200]


def run(fn, bounds, sampler, evals):
    study = optuna.create_study(sampler=sampler, direction="minimize")
    best, trace = math.inf, []

    def objective(trial):
        x = [trial.suggest_float(f"x{i}", lo, hi) for i, (lo, hi) in enumerate(bounds)]
        return fn(x)

    for _ in range(evals):
        study.optimize(objective, n_trials=1)
        best = min(best, study.trials[-1].value)
        trace.append(best)
    return trace


def quartiles(values):
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], statistics.median(values), q[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--evals", type=int, default=200)
    args = ap.parse_args()
    points = [c for c in CHECKPOINTS if c <= args.evals]
    print(f"Optuna {optuna.__version__}: median [IQR] simple regret over {args.seeds} seeds\n")
    print("| problem | sampler | " + " | ".join(f"{c} evals" for c in points) + " |")
    print("|---|---|" + "---:|" * len(points))
    for name, fn, bounds, optimum in PROBLEMS:
        for sname, make in SAMPLERS.items():
            traces = [run(fn, bounds, make(seed), args.evals) for seed in range(args.seeds)]
            cells = []
            for c in points:
                lo, med, hi = quartiles([t[c - 1] - optimum for t in traces])
                cells.append(f"{med:.3g} [{lo:.3g}, {hi:.3g}]")
            print(f"| {name} | {sname} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
