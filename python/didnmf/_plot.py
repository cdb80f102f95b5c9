"""Pictures through ``didnmf plot`` (a fitted model) and of ``didnmf sweep`` (its sweep.png),
shown inline in a notebook: an IPython.display.Image when IPython is importable, else the
PNG's path."""

import json
import os
import shutil
import tempfile

import numpy as np

from ._run import run

__all__ = ["plot_model", "show_png"]

KINDS = {"basis": "basis.png", "convergence": "convergence.png"}


def show_png(path):
    """An IPython.display.Image of the PNG at path when IPython is importable, else path."""
    try:
        from IPython.display import Image
    except ImportError:
        return path
    with open(path, "rb") as f:
        return Image(data=f.read(), format="png")


def plot_model(report, components, feature_names, kind="basis", out=None, verbose=0):
    """Draw a fitted model (its report.json and basis) with ``didnmf plot`` and return the
    picture of ``kind`` ('basis' or 'convergence') as ``show_png`` does.

    The result directory ``didnmf plot`` reads is written into a temporary directory: report
    (as report.json), components_.T (as basis.npy) and the feature names (as features.txt,
    when there are names and none holds a newline). The pictures go into ``out`` when given,
    else into a new temporary directory, kept only when the path is returned."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}. Got {kind!r} instead.")
    with tempfile.TemporaryDirectory(prefix="didnmf-plot-") as tmp:
        result = os.path.join(tmp, "result")
        os.mkdir(result)
        with open(os.path.join(result, "report.json"), "w", encoding="utf-8") as f:
            json.dump(report, f)
        np.save(os.path.join(result, "basis.npy"), np.ascontiguousarray(components.T, dtype=np.float64))
        if feature_names is not None:
            names = [str(n) for n in feature_names]
            if not any("\n" in n or "\r" in n for n in names):
                with open(os.path.join(result, "features.txt"), "w", encoding="utf-8") as f:
                    f.write("".join(n + "\n" for n in names))
        keep = out is not None
        target = os.fspath(out) if keep else os.path.join(tmp, "pictures")
        run(["plot", "--result", result, "--out", target], verbose=verbose)
        png = os.path.join(target, KINDS[kind])
        if not os.path.exists(png):
            raise RuntimeError(f"didnmf plot did not draw {KINDS[kind]} into {target}")
        shown = show_png(png)
        if shown is not png or keep:
            return shown
        # No IPython: the path is the answer, so the picture must outlive this directory.
        kept = tempfile.mkdtemp(prefix="didnmf-plot-")
        for name in os.listdir(target):
            shutil.move(os.path.join(target, name), os.path.join(kept, name))
        return os.path.join(kept, KINDS[kind])
