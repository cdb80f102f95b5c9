"""scikit-learn's ``reconstruction_err_`` from a didnmf report.json and the factors.

scikit-learn 1.2's NMF sets ``reconstruction_err_ = sqrt(2 D_beta(X | W H))``
(``_beta_divergence(X, W, H, beta, square_root=True)``): for the Frobenius loss
``||X - W H||_F``. report.json holds what that needs, so X is never read again:

- Frobenius: ``rmse = sqrt(||X - W H||^2 / (m n))``, computed by the command directly from
  the final factors, so ``||X - W H||_F = sqrt(rmse^2 m n)``;
- other beta-divergences: ``objective``, which is ``2 D_beta(X | W H)`` at the final factors
  plus twice scikit-learn's penalty terms when alpha_W or alpha_H is set; the penalty is
  recomputed here from W and H (with the command's scaling, by n_features for W and
  n_samples for H) and taken off.

With missing values or held-out entries (``missing='nan'``, ``test_fraction``) both are
over the entries the fit saw.
"""

import math

import numpy as np

__all__ = ["reconstruction_err"]


def penalty_twice(report, W, H):
    """Twice scikit-learn's penalty terms of (W, H), as the command adds them to its
    objective: 2 l1W ||W||_1 + l2W ||W||^2 + 2 l1H ||H||_1 + l2H ||H||^2 with
    l1W = m alpha_W l1_ratio, l2W = m alpha_W (1 - l1_ratio), and n, alpha_H for H."""
    m, n = report["m"], report["n"]
    alpha_w, alpha_h = report.get("alpha_coef", 0.0), report.get("alpha_basis", 0.0)
    l1 = report.get("l1_ratio", 0.0)
    total = 0.0
    for A, scale, alpha in ((W, m, alpha_w), (H, n, alpha_h)):
        if alpha:
            l1_reg = scale * alpha * l1
            l2_reg = scale * alpha * (1 - l1)
            A = np.asarray(A, dtype=np.float64)
            total += 2 * l1_reg * float(np.abs(A).sum()) + l2_reg * float(np.vdot(A, A))
    return total


def reconstruction_err(report, W, H):
    """scikit-learn's reconstruction_err_ of a fit from its report.json and W, H."""
    if "loss" not in report:  # Frobenius
        return math.sqrt(report["rmse"] ** 2 * report["m"] * report["n"])
    return math.sqrt(max(report["objective"] - penalty_twice(report, W, H), 0.0))
