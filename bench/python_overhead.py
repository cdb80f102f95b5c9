#!/usr/bin/env python3
"""What the Python path adds to a local fit: didnmf.NMF(...).fit(path) against the didnmf
command it runs, on the same files, in one run (alternating, median of --reps each), with
the factors checked bit for bit.

    /usr/bin/python3 bench/python_overhead.py [--reps 3] [--max-iter 200] [--bin PATH]

Input: Fashion-MNIST (Debian's dataset-fashion-mnist: 70000 images of 28x28, train and test
stacked), K=10. The command is timed as a subprocess started from this process with exactly
the arguments the estimator gives it (recorded from its first fit), so both include the
command's start, reading, initialisation, iterations and writing; the estimator adds its
parameter checks, the binary lookup, reading basis.npy, coef.npy and report.json back, and
reconstruction_err_. A third series fits the same images as an in-memory uint8 array
(written to a temporary .npy by the estimator). Prints one JSON line a series.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import numpy as np  # noqa: E402

import didnmf  # noqa: E402
import didnmf._estimator as estimator  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
FILES = [os.path.join(DATA, "train-images-idx3-ubyte.gz"), os.path.join(DATA, "t10k-images-idx3-ubyte.gz")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-iter", type=int, default=200)
    ap.add_argument("--bin", default=None, help="the didnmf command (default: go build ./cmd/didnmf)")
    args = ap.parse_args()
    if not all(os.path.exists(f) for f in FILES):
        sys.exit(f"needs {DATA} (apt-get install dataset-fashion-mnist)")
    tmp = tempfile.mkdtemp(prefix="didnmf-pyoverhead-")
    binary = args.bin
    if binary is None:
        binary = os.path.join(tmp, "didnmf")
        subprocess.run(["go", "build", "-o", binary, "./cmd/didnmf"], cwd=ROOT, check=True)
    os.environ["DIDNMF_BIN"] = binary

    recorded = []
    real_run = estimator.run

    def recording_run(argv, **kw):
        recorded.append([str(a) for a in argv])
        return real_run(argv, **kw)

    estimator.run = recording_run
    params = dict(n_components=10, random_state=1, max_iter=args.max_iter, tol=1e-4)

    def fit_path():
        return didnmf.NMF(**params).fit(FILES)

    fit_path()  # warm the page cache and the binary; records the arguments
    cli_args = recorded[0]
    out = cli_args.index("--out") + 1

    def fit_cli(i):
        argv = list(cli_args)
        argv[out] = os.path.join(tmp, f"cli-{i}")
        subprocess.run([binary] + argv, check=True, stdout=subprocess.DEVNULL)
        return argv[out]

    images = np.concatenate([_idx_images(f) for f in FILES])
    times = {"command": [], "estimator (paths)": [], "estimator (uint8 array)": []}
    for i in range(args.reps):
        t = time.perf_counter()
        d = fit_cli(i)
        times["command"].append(time.perf_counter() - t)
        t = time.perf_counter()
        est = fit_path()
        times["estimator (paths)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        arr = didnmf.NMF(**params).fit(images)
        times["estimator (uint8 array)"].append(time.perf_counter() - t)
        basis = np.load(os.path.join(d, "basis.npy"))
        if not (np.array_equal(basis.T, est.components_) and np.array_equal(basis.T, arr.components_)):
            sys.exit("the estimator's components_ differ from the command's basis")
    base = statistics.median(times["command"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(json.dumps({"series": name, "seconds": [round(x, 3) for x in ts], "median": round(med, 3),
                          "ratio_to_command": round(med / base, 4), "iterations": est.n_iter_}))


def _idx_images(path):
    import gzip

    with gzip.open(path, "rb") as f:
        raw = f.read()
    n, h, w = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, h * w)


if __name__ == "__main__":
    main()
