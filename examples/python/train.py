#!/usr/bin/env python3
"""Train a small neural network on the UCI Wine data set, the hpsearch way.

Standard library only. hpsearch runs this script once per segment of a trial
(a trial may take several, each resuming where the last one stopped) and:

- passes the trial's parameters as a JSON object in the file named by
  $HPSEARCH_PARAMS_FILE (and one by one as $HPSEARCH_PARAM_<NAME>), and a
  seed in $HPSEARCH_SEED;
- passes a checkpoint directory in $HPSEARCH_CHECKPOINT_DIR, holding what the
  previous segment saved, if any; the script resumes from it, saves into it
  every $HPSEARCH_CHECKPOINT_EVERY seconds, on SIGTERM and at the end, and
  hpsearch keeps what it holds when the script exits;
- passes the epoch to train up to in this segment in
  $HPSEARCH_RESOURCE_TARGET (a rung of the scheduler, or the segment's end;
  the script trains at most `epochs` epochs in all);
- reads metrics from the JSON lines this script prints on stdout, one per
  epoch: {"epoch": 3, "val_loss": 0.41, "val_accuracy": 0.94, ...};
- keeps everything written to stderr as the trial's log;
- sends SIGTERM a grace period before the segment's deadline, then SIGKILL.
  On SIGTERM the script finishes the epoch it is in (epochs take about 20 ms,
  far less than the grace period), saves and exits 0, which hpsearch takes
  as "suspended, resume later".

Resuming is exact: a trial trained in several segments reports the same
metrics, bit for bit, as one trained in one go.

Run by hand it uses the defaults below:  python3 train.py
"""

import json
import math
import os
import random
import signal
import sys
import time

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

CHECKPOINT_FILE = "state.json"  # in $HPSEARCH_CHECKPOINT_DIR
CHECKPOINT_FORMAT = 1  # changes whenever the file or the training changes


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


def load_segment(params):
    """Return (checkpoint directory or None, epoch to train up to, save interval in s or None)."""
    ckpt_dir = os.environ.get("HPSEARCH_CHECKPOINT_DIR") or None
    target = params["epochs"]
    raw = os.environ.get("HPSEARCH_RESOURCE_TARGET")
    if raw:
        value = float(raw)
        if not (math.isfinite(value) and value >= 0):
            sys.exit(f"train.py: HPSEARCH_RESOURCE_TARGET={raw} is not a number >= 0")
        # Whole epochs: train up to the last one at or below the target, and
        # never past `epochs` (a scheduler's max may be larger).
        target = min(target, int(value))
    every = None
    raw = os.environ.get("HPSEARCH_CHECKPOINT_EVERY")
    if raw:
        every = float(raw)
        if not (math.isfinite(every) and every > 0):
            sys.exit(f"train.py: HPSEARCH_CHECKPOINT_EVERY={raw} is not a number of seconds > 0")
    return ckpt_dir, target, every


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


class Checkpoint:
    """The full training state in $HPSEARCH_CHECKPOINT_DIR/state.json.

    Everything that decides the epochs to come is in it: the weights, the
    epoch reached, the random generator's state and the order of the
    training rows (shuffled again at the start of every epoch), plus what the
    run was made with, so that a checkpoint of another trial is refused.
    Floats go through JSON exactly: Python writes the shortest decimal that
    reads back as the same float.
    """

    def __init__(self, directory, params, seed):
        self.path = os.path.join(directory, CHECKPOINT_FILE)
        # epochs only says when to stop, so it may change between segments.
        self.fingerprint = {k: v for k, v in sorted(params.items()) if k != "epochs"}
        self.fingerprint["seed"] = seed

    def load(self, model, order, rng):
        """Restore the state saved in the file into model, order and rng, and
        return the epoch it was saved after; return None when there is no file."""
        try:
            with open(self.path) as f:
                state = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            sys.exit(f"train.py: checkpoint {self.path} cannot be read: {e}")
        try:
            if state["format"] != CHECKPOINT_FORMAT:
                sys.exit(f"train.py: checkpoint {self.path} has format {state['format']}; "
                         f"this script reads format {CHECKPOINT_FORMAT}")
            for name, value in self.fingerprint.items():
                if state["made_with"].get(name) != value:
                    sys.exit(f"train.py: checkpoint {self.path} was made with {name} = "
                             f"{state['made_with'].get(name)}, this run has {name} = {value}; "
                             f"a trial resumes only from its own checkpoints")
            layers = {"w1": model.w1, "b1": model.b1, "w2": model.w2, "b2": model.b2}
            for name, current in layers.items():
                saved = state[name]
                if json_shape(saved) != json_shape(current):
                    sys.exit(f"train.py: checkpoint {self.path}: {name} has shape "
                             f"{json_shape(saved)}, want {json_shape(current)}")
            if sorted(state["order"]) != sorted(order):
                sys.exit(f"train.py: checkpoint {self.path}: order is not a permutation "
                         f"of the {len(order)} training rows")
            epoch = state["epoch"]
            if not (isinstance(epoch, int) and epoch >= 0):
                sys.exit(f"train.py: checkpoint {self.path}: epoch {epoch!r} is not a whole number >= 0")
            version, internal, gauss_next = state["rng"]
            rng.setstate((version, tuple(internal), gauss_next))
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            sys.exit(f"train.py: checkpoint {self.path} is not one this script wrote: {e!r}")
        for name in layers:
            setattr(model, name, state[name])
        order[:] = state["order"]
        return epoch

    def save(self, epoch, rng, order, model):
        """Write the state atomically: a reader sees the old file or the new one."""
        version, internal, gauss_next = rng.getstate()
        state = {
            "format": CHECKPOINT_FORMAT,
            "made_with": self.fingerprint,
            "epoch": epoch,
            "rng": [version, list(internal), gauss_next],
            "order": order,
            "w1": model.w1, "b1": model.b1, "w2": model.w2, "b2": model.b2,
        }
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def json_shape(value):
    """The shape of a list, or of a list of equal-length lists: (n,) or (n, m)."""
    if not isinstance(value, list):
        return None
    if value and isinstance(value[0], list):
        return (len(value), len(value[0])) if all(len(row) == len(value[0]) for row in value) else None
    return (len(value),)


stop_requested = False


def on_sigterm(signum, frame):
    # hpsearch sends SIGTERM a grace period before the segment's deadline.
    # The training loop finishes the epoch it is in, saves and exits 0.
    global stop_requested
    stop_requested = True


def main():
    signal.signal(signal.SIGTERM, on_sigterm)
    params = load_params()
    seed = int(os.environ.get("HPSEARCH_SEED", "0"))
    ckpt_dir, target, every = load_segment(params)
    rows, labels, names = load_wine()
    train_idx, val_idx = stratified_split(labels, random.Random(SPLIT_SEED))
    x = standardise(rows, train_idx)
    train = [(x[i], labels[i]) for i in train_idx]
    val = [(x[i], labels[i]) for i in val_idx]
    log(f"train.py: wine {len(train)} training / {len(val)} validation rows, "
        f"classes {names}, seed {seed}, params {json.dumps(params, sort_keys=True)}")

    rng = random.Random(seed)
    model = MLP(len(x[0]), params["hidden_units"], len(names), rng)
    order = list(range(len(train)))  # the rows in the order of the last shuffle
    epoch = 0  # epochs completed
    checkpoint = Checkpoint(ckpt_dir, params, seed) if ckpt_dir else None
    if checkpoint:
        restored = checkpoint.load(model, order, rng)
        if restored is not None:
            epoch = restored
            log(f"train.py: resumed from {checkpoint.path} after epoch {epoch}")
    if epoch >= target:
        log(f"train.py: epoch {epoch} reached, nothing to train up to epoch {target}")
        return

    bs = params["batch_size"]
    last_save = time.monotonic()
    while epoch < target:
        epoch += 1
        rng.shuffle(order)
        total = 0.0
        for start in range(0, len(order), bs):
            batch = [train[i] for i in order[start:start + bs]]
            total += model.step(batch, params["learning_rate"], params["l2"])
        train_loss = total / len(train)
        val_loss, val_accuracy = model.evaluate(val)
        if not (math.isfinite(train_loss) and math.isfinite(val_loss)):
            sys.exit(f"train.py: training diverged in epoch {epoch}; lower learning_rate "
                     f"(now {params['learning_rate']})")
        report(epoch=epoch, train_loss=train_loss, val_loss=val_loss, val_accuracy=val_accuracy)
        if stop_requested:
            if checkpoint:
                checkpoint.save(epoch, rng, order, model)
            log(f"train.py: got SIGTERM, stopping after epoch {epoch}"
                + (f", saved to {checkpoint.path}" if checkpoint else ""))
            return
        if checkpoint and every and time.monotonic() - last_save >= every:
            checkpoint.save(epoch, rng, order, model)
            last_save = time.monotonic()
    if checkpoint:
        checkpoint.save(epoch, rng, order, model)
        log(f"train.py: reached epoch {epoch}, saved to {checkpoint.path}")


if __name__ == "__main__":
    main()
