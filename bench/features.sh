#!/bin/sh
# The figures of BENCHMARKS.md "What NMF users ask for", in one run on this machine: what
# penalties cost DID, masked DID against plain DID on Fashion-MNIST, the beta losses and
# transform against scikit-learn on the same bytes, and a rank sweep on Fashion-MNIST.
# Needs Debian's dataset-fashion-mnist and python3-sklearn. Each line printed is a label and
# one JSON line. Usage: bench/features.sh [REPS]   (from the repository's root)
set -eu
REPS=${1:-3}
NODE=${NODE:-/tmp/didnmf-features/node}
W=${WORK:-/tmp/didnmf-features}
F=/usr/share/datasets/fashion-mnist
PY=/usr/bin/python3
mkdir -p "$W"
go build -o "$NODE" ./cmd/didnmf
FM="--input $F/train-images-idx3-ubyte.gz --input $F/t10k-images-idx3-ubyte.gz"
[ -f "$W/fm.npy" ] || "$NODE" convert $FM --out "$W/fm.npy"
[ -f "$W/x.npy" ] || "$NODE" convert --input synthetic:m=50,n=200000,k=10,seed=1 --out "$W/x.npy"
[ -f "$W/fm_nan5.npy" ] || "$PY" -c "
import numpy as np
x = np.load('$W/fm.npy'); m = np.random.default_rng(1).random(x.shape) < 0.05
x[m] = np.nan; np.save('$W/fm_nan5.npy', x)
x = np.load('$W/x.npy'); np.save('$W/x_pos.npy', x + 1e-3 * (x <= 0))"
bench() { label=$1; shift; printf '%s ' "$label"; "$NODE" bench "$@" --json 2>/dev/null | tail -1; }

# Penalties: plain and penalized DID, alternately.
for r in $(seq "$REPS"); do
  bench "did 1e6 plain" --input synthetic:m=5,n=1000000,k=3,seed=1 --rank 3 --iters 30
  bench "did 1e6 penalized" --input synthetic:m=5,n=1000000,k=3,seed=1 --rank 3 --iters 30 --alpha-coef 0.01 --l1-ratio 0.5
  bench "did fashion-mnist plain" $FM --rank 10 --iters 10
  bench "did fashion-mnist penalized" $FM --rank 10 --iters 10 --alpha-coef 0.01 --l1-ratio 0.5
done
# Missing values: 5% NaN, and 5% held out, against the plain fit, alternately.
for r in $(seq "$REPS"); do
  bench "did fashion-mnist plain" --input "$W/fm.npy" --rank 10 --iters 10
  bench "did fashion-mnist 5% missing" --input "$W/fm_nan5.npy" --missing nan --rank 10 --iters 10
  bench "did fashion-mnist 5% held out" --input "$W/fm.npy" --test-fraction 0.05 --rank 10 --iters 10
  bench "mu fashion-mnist plain" --input "$W/fm.npy" --algo mu --rank 10 --iters 5
  bench "mu fashion-mnist 5% missing" --input "$W/fm_nan5.npy" --missing nan --algo mu --rank 10 --iters 5
done
# Beta losses, MU, 200000 x 50, K=10, against scikit-learn's mu on the same bytes.
for loss in kl is 1.5; do
  in="$W/x.npy"; [ "$loss" = is ] && in="$W/x_pos.npy"
  for r in $(seq "$REPS"); do bench "mu loss $loss" --input "$in" --algo mu --loss "$loss" --rank 10 --iters 20; done
  printf 'scikit-learn mu loss %s ' "$loss"; "$PY" bench/sklearn_features.py mu "$in" 10 "$loss"
done
# Transform: a basis fitted on the 60000 training images, the 10000 test images projected.
rm -rf "$W/fit"
"$NODE" factorize --input $F/train-images-idx3-ubyte.gz --rank 10 --out "$W/fit" --quiet
"$NODE" convert --input $F/t10k-images-idx3-ubyte.gz --out "$W/test.npy"
for r in $(seq "$REPS"); do
  rm -rf "$W/tr"
  start=$(date +%s%N)
  "$NODE" transform --basis "$W/fit/basis.npy" --input "$W/test.npy" --out "$W/tr" --quiet
  end=$(date +%s%N)
  printf 'didnmf transform {"ms": %d}\n' $(( (end - start) / 1000000 ))
done
printf 'scikit-learn transform '; "$PY" bench/sklearn_features.py transform "$W/test.npy" "$W/fit/basis.npy" "$W/tr/coef.npy"
# A rank sweep: K = 2..20, 3 seeds, on this process (one job at a time on both cores).
rm -rf "$W/sweep"
"$NODE" sweep $FM --ranks 2:20 --seeds 3 --quiet --out "$W/sweep"
printf 'sweep fashion-mnist '; "$PY" -c "
import json; r = json.load(open('$W/sweep/sweep.json'))
print(json.dumps({'jobs': len(r['runs']), 'seconds': r['seconds'], 'cores_busy': r.get('cores_busy'), 'suggested_k': r['suggested_k'], 'rule': r['rule']}))"
