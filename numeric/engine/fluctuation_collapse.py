"""Pairs of inputs with shared norms: the pair recursion of `fluctuations` as a certified function of the angle.

When the inputs' norms take a few values (normalised data: one), every pair (a, b) of a class pair (k_a, k_b) is
the same two-input problem up to the input correlation r0 = K0_ab / sqrt(k_a k_b).  The depth-L coefficients
(variance, mean shift, ...) are then smooth functions of theta = arccos(r0) -- for ReLU the arc-cosine kernels are
analytic in theta, while their singular terms near theta = 0 (G'' ~ 1/sin theta) are resolved by refinement --
so they are computed at Chebyshev nodes of a few theta-pieces and interpolated to every pair, like the depth
collapse of ``resprop.kernel`` (`depth_collapse`).  Cost: O(nodes depth) recursions plus O(P^2) evaluation,
instead of O(P^2 depth) recursions.

Certification: each piece's interpolant is compared with direct evaluations at the midpoints between its nodes and
bisected until every certified field is within ``tol`` of its scale there (``variance``, ``law_variance``,
``closure_variance``: their largest |value|; ``mean_shift``, ``closure_mean_shift``: largest |mean shift| + sqrt of the
largest variance).  Pairs closer than THETA_FLOOR to r0 = +-1 are computed directly.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.polynomial import chebyshev as C

__all__ = ["NODES", "THETA_FLOOR", "MAX_LEVEL", "CERTIFIED", "interpolate_pairs"]

#: Chebyshev nodes (first kind) per piece
NODES = 17
#: pairs with theta or pi - theta below this (|r0| > 1 - 5e-7) are left to the direct recursion
THETA_FLOOR = 1e-3
#: the smallest piece is (span) / 2^MAX_LEVEL; a piece that cannot be certified there is left to the direct route
MAX_LEVEL = 12
#: the fields whose interpolation error is certified, and the scale each is measured against
CERTIFIED = ("variance", "law_variance", "closure_variance", "mean_shift", "closure_mean_shift")


def _scale(name: str, values: dict) -> float:
    if name in ("mean_shift", "closure_mean_shift"):
        return float(np.max(np.abs(values[name])) + np.sqrt(np.max(np.abs(values["variance"]))))
    return float(np.max(np.abs(values[name])))


def interpolate_pairs(evaluate: Callable[[np.ndarray], dict], theta: np.ndarray, tol: float
                      ) -> tuple[dict, np.ndarray]:
    """Values of ``evaluate`` (theta array -> dict of arrays over theta) at the angles ``theta`` of the pairs,
    from certified piecewise Chebyshev interpolants on [min theta, max theta].  Returns (values, done): ``done``
    marks the pairs that were interpolated; the others (pieces that could not be certified) are left to the
    caller."""
    names: list[str] | None = None
    out: dict[str, np.ndarray] = {}
    done = np.zeros(theta.shape, dtype=bool)
    lo, hi = float(theta.min()), float(theta.max())
    if hi - lo < 1e-12:
        hi = lo + 1e-12
    stack = [(lo, hi, 0)]
    x = np.cos(np.pi * (np.arange(NODES) + 0.5) / NODES)  # Chebyshev points of the first kind in (-1, 1)
    mid = np.cos(np.pi * np.arange(1, NODES) / NODES)  # the points between them
    while stack:
        a, b, level = stack.pop()
        inside = (theta >= a) & (theta <= b) & ~done
        if not inside.any():
            continue
        half, centre = (b - a) / 2, (a + b) / 2
        at_nodes = evaluate(centre + half * x)
        at_mid = evaluate(centre + half * mid)
        if names is None:
            names = list(at_nodes)
            out = {k: np.empty(theta.shape) for k in names}
        coef = {k: C.chebfit(x, at_nodes[k], NODES - 1) for k in names}
        good = all(np.max(np.abs(C.chebval(mid, coef[k]) - at_mid[k])) <= tol * max(_scale(k, at_nodes), 1e-300)
                   for k in CERTIFIED if k in coef)
        if good:
            t = (theta[inside] - centre) / half
            for k in names:
                out[k][inside] = C.chebval(t, coef[k])
            done |= inside
        elif level < MAX_LEVEL:
            stack += [(a, centre, level + 1), (centre, b, level + 1)]
    return out, done
