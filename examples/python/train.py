#!/usr/bin/env python3
"""Train a small neural network on the UCI Wine data set, the hpsearch way.

Standard library only. hpsearch runs this script once per trial and:

- passes the trial's parameters as a JSON object in the file named by
  $HPSEARCH_PARAMS_FILE (and one by one as $HPSEARCH_PARAM_<NAME>), and a
  seed in $HPSEARCH_SEED;
- reads metrics from the JSON lines this script prints on stdout, one per
  epoch: {"epoch": 3, "val_loss": 0.41, "val_accuracy": 0.94, ...};
- keeps everything written to stderr as the trial's log;
- sends SIGTERM a grace period before the trial's timeout, then SIGKILL.

Run by hand it uses the defaults below:  python3 train.py
"""

import json
import math
import os
import random
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

DEFAULTS = {
    "learning_rate": 0.05,  # SGD step size
    "l2": 1e-4,  # L2 penalty on the weights
    "batch_size": 16,  # examples per SGD step
    "epochs": 30,  # passes over the training split
    "hidden_units": 64,  # width of the hidden layer
}

SPLIT_SEED = 20240601  # fixed: every trial is evaluated on the same rows
VAL_FRACTION = 0.2


def log(*args):
    """Write a line to stderr, which hpsearch keeps as the trial's log."""
    print(*args, file=sys.stderr, flush=True)


def report(**metrics):
    """Print one metric report: a JSON object on a line of its own."""
    print(json.dumps(metrics), flush=True)


def load_params():
    params = dict(DEFAULTS)
    path = os.environ.get("HPSEARCH_PARAMS_FILE")
    if path:
        with open(path) as f:
            given = json.load(f)
        unknown = sorted(set(given) - set(DEFAULTS))
        if unknown:
            sys.exit(f"train.py: unknown parameters {unknown}; this script reads {sorted(DEFAULTS)}")
        params.update(given)
    params["batch_size"] = int(params["batch_size"])
    params["epochs"] = int(params["epochs"])
    params["hidden_units"] = int(params["hidden_units"])
    for name in ("learning_rate", "batch_size", "epochs", "hidden_units"):
        if not params[name] > 0:
            sys.exit(f"train.py: parameter {name} = {params[name]} must be > 0")
    if not params["l2"] >= 0:
        sys.exit(f"train.py: parameter l2 = {params['l2']} must be >= 0")
    return params


def load_wine():
    """Return (rows, labels, class names) from wine_data.csv.

    The first line is a header: n_rows,n_features,class names...; then one
    row per wine: 13 measurements and the class (0, 1 or 2).
    """
    with open(os.path.join(HERE, "wine_data.csv")) as f:
        header = f.readline().strip().split(",")
        n_rows, n_features, names = int(header[0]), int(header[1]), header[2:]
        rows, labels = [], []
        for line in f:
            if line.strip():
                fields = line.strip().split(",")
                rows.append([float(v) for v in fields[:n_features]])
                labels.append(int(fields[n_features]))
    if len(rows) != n_rows:
        sys.exit(f"train.py: wine_data.csv has {len(rows)} rows, its header says {n_rows}")
    return rows, labels, names


def stratified_split(labels, rng):
    """Split row indices into training and validation, a fifth of each class."""
    train, val = [], []
    for c in sorted(set(labels)):
        idx = [i for i, y in enumerate(labels) if y == c]
        rng.shuffle(idx)
        n_val = round(len(idx) * VAL_FRACTION)
        val += idx[:n_val]
        train += idx[n_val:]
    return train, val


def standardise(rows, train_idx):
    """Scale every feature to mean 0, variance 1 on the training split."""
    n_features = len(rows[0])
    mean = [sum(rows[i][j] for i in train_idx) / len(train_idx) for j in range(n_features)]
    std = [
        math.sqrt(sum((rows[i][j] - mean[j]) ** 2 for i in train_idx) / len(train_idx)) or 1.0
        for j in range(n_features)
    ]
    return [[(r[j] - mean[j]) / std[j] for j in range(n_features)] for r in rows]


class MLP:
    """inputs -> hidden (tanh) -> classes (softmax), trained by SGD."""

    def __init__(self, n_in, n_hidden, n_out, rng):
        self.w1 = [[rng.gauss(0, math.sqrt(1 / n_in)) for _ in range(n_in)] for _ in range(n_hidden)]
        self.b1 = [0.0] * n_hidden
        self.w2 = [[rng.gauss(0, math.sqrt(1 / n_hidden)) for _ in range(n_hidden)] for _ in range(n_out)]
        self.b2 = [0.0] * n_out

    def forward(self, x):
        h = [math.tanh(b + sum(w * xi for w, xi in zip(row, x))) for row, b in zip(self.w1, self.b1)]
        z = [b + sum(w * hj for w, hj in zip(row, h)) for row, b in zip(self.w2, self.b2)]
        top = max(z)
        e = [math.exp(v - top) for v in z]
        s = sum(e)
        return h, [v / s for v in e]

    def step(self, batch, lr, l2):
        """One SGD step on a list of (x, y); returns the batch's summed loss."""
        n_hidden, n_in, n_out = len(self.w1), len(self.w1[0]), len(self.w2)
        gw1 = [[0.0] * n_in for _ in range(n_hidden)]
        gb1 = [0.0] * n_hidden
        gw2 = [[0.0] * n_hidden for _ in range(n_out)]
        gb2 = [0.0] * n_out
        loss = 0.0
        for x, y in batch:
            h, p = self.forward(x)
            loss -= math.log(max(p[y], 1e-300))
            dz = list(p)
            dz[y] -= 1.0
            dh = [0.0] * n_hidden
            for k in range(n_out):
                gb2[k] += dz[k]
                row, grow = self.w2[k], gw2[k]
                for j in range(n_hidden):
                    grow[j] += dz[k] * h[j]
                    dh[j] += dz[k] * row[j]
            for j in range(n_hidden):
                d = dh[j] * (1.0 - h[j] * h[j])
                gb1[j] += d
                grow = gw1[j]
                for i in range(n_in):
                    grow[i] += d * x[i]
        scale = 1.0 / len(batch)
        for w, g in ((self.w1, gw1), (self.w2, gw2)):
            for row, grow in zip(w, g):
                for i in range(len(row)):
                    row[i] -= lr * (grow[i] * scale + l2 * row[i])
        for b, g in ((self.b1, gb1), (self.b2, gb2)):
            for i in range(len(b)):
                b[i] -= lr * g[i] * scale
        return loss

    def evaluate(self, data):
        """Return (mean cross-entropy, accuracy) on a list of (x, y)."""
        loss, correct = 0.0, 0
        for x, y in data:
            _, p = self.forward(x)
            loss -= math.log(max(p[y], 1e-300))
            correct += max(range(len(p)), key=p.__getitem__) == y
        return loss / len(data), correct / len(data)


stop_requested = False


def on_sigterm(signum, frame):
    # hpsearch sends SIGTERM a grace period before the trial's timeout. Finish
    # the epoch, report it and exit; a script that can resume would save a
    # checkpoint here.
    global stop_requested
    stop_requested = True


def main():
    signal.signal(signal.SIGTERM, on_sigterm)
    params = load_params()
    seed = int(os.environ.get("HPSEARCH_SEED", "0"))
    rows, labels, names = load_wine()
    train_idx, val_idx = stratified_split(labels, random.Random(SPLIT_SEED))
    x = standardise(rows, train_idx)
    train = [(x[i], labels[i]) for i in train_idx]
    val = [(x[i], labels[i]) for i in val_idx]
    log(f"train.py: wine {len(train)} training / {len(val)} validation rows, "
        f"classes {names}, seed {seed}, params {json.dumps(params, sort_keys=True)}")

    rng = random.Random(seed)
    model = MLP(len(x[0]), params["hidden_units"], len(names), rng)
    bs = params["batch_size"]
    for epoch in range(1, params["epochs"] + 1):
        rng.shuffle(train)
        total = 0.0
        for start in range(0, len(train), bs):
            total += model.step(train[start:start + bs], params["learning_rate"], params["l2"])
        train_loss = total / len(train)
        val_loss, val_accuracy = model.evaluate(val)
        if not (math.isfinite(train_loss) and math.isfinite(val_loss)):
            sys.exit(f"train.py: training diverged in epoch {epoch}; lower learning_rate "
                     f"(now {params['learning_rate']})")
        report(epoch=epoch, train_loss=train_loss, val_loss=val_loss, val_accuracy=val_accuracy)
        if stop_requested:
            log(f"train.py: got SIGTERM, stopping after epoch {epoch}")
            return


if __name__ == "__main__":
    main()
