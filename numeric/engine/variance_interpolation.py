"""Functions of the variance at many values: Chebyshev interpolation in log d, refined until it checks.

The general path of the kernel engine needs, at every layer, functions of one variance d at all P diagonal values
K_aa: the Hermite coefficients a_k(d), k <= K (`dual_tables._diag_data`), and E[phi^2], E[phi'^2]
(`dual_tables.diagonal`).  Each is an analytic function of log d, so instead of P evaluations (a trapezoidal or
graded rule each) it is evaluated on n Chebyshev--Lobatto nodes in log d spanning the values and interpolated
(barycentric formula, Berrut & Trefethen, SIAM Review 46 (2004) 501).  The node sets are nested (n = 17, 33, 65,
...: each adds the midpoints in angle), and the interpolant on n nodes must predict the values at the n - 1 new
nodes to ``tol`` times the row's scale before the finer one is used: a check that can fail, on the actual function.
When it does not pass by ``N_MAX`` nodes, or when there are too few values for interpolation to pay
(``values.size < MIN_VALUES``), the function is evaluated at every value directly.

Measured (tests/test_variance_interpolation.py): tanh, d in [0.15, 4.2], the 331 Hermite coefficients to 2e-15 of
sqrt(E[phi^2]) with 65 nodes (the 33-node interpolant predicts the new nodes to ~2e-15; 17 give 7e-11 and fail the
check); E[phi^2], E[phi'^2] to ~2e-15 relative (P = 4000 Gaussian inputs, 65 nodes).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

Array = np.ndarray

#: first node count (2^4 + 1) and the largest (2^8 + 1); nested: each refinement doubles the intervals
N_START = 17
N_MAX = 257
#: below this many distinct values the direct evaluation is used (it costs at most ~2 N_START evaluations more)
MIN_VALUES = 96
#: values per call of the direct evaluation (bounds its temporaries)
DIRECT_CHUNK = 512
#: values per barycentric matrix when the interpolant is evaluated (bounds its temporaries; no effect on results
#: beyond round-off)
INTERPOLATION_CHUNK = 128


def _lobatto(n: int) -> Array:
    return np.cos(np.pi * np.arange(n) / (n - 1))


def _weights(n: int) -> Array:
    w = (-1.0) ** np.arange(n)
    w[0] *= 0.5
    w[-1] *= 0.5
    return w


def _barycentric_matrix(nodes: Array, weights: Array, t: Array) -> Array:
    """(len(t), len(nodes)) matrix M with M @ f(nodes) the interpolant at t (rows of exact hits are unit)."""
    diff = t[:, None] - nodes[None, :]
    hit = diff == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        M = weights / diff
    rows = np.any(hit, axis=1)
    if np.any(rows):
        M[rows] = hit[rows].astype(float)
    M /= M.sum(axis=1, keepdims=True)
    return M


def _direct(evaluate: Callable[[Array], Array], values: Array, transpose: bool) -> Array:
    """evaluate at every value, DIRECT_CHUNK values per call (the callers' rules hold (chunk x nodes) arrays)."""
    out = None
    for lo in range(0, values.size, DIRECT_CHUNK):
        part = np.asarray(evaluate(values[lo:lo + DIRECT_CHUNK]))
        if out is None:  # written in place: no list of parts and no concatenated copy beside the result
            out = np.empty((part.shape[1], values.size) if transpose else (values.size, part.shape[1]))
        if transpose:
            out[:, lo:lo + part.shape[0]] = part.T
        else:
            out[lo:lo + part.shape[0]] = part
    if out is None:  # no values
        empty = np.asarray(evaluate(values))
        return np.ascontiguousarray(empty.T) if transpose else empty
    return out


def _interpolate(nodes: Array, F: Array, t: Array, transpose: bool) -> Array:
    """The interpolant of the node values F (one row per node) at t: (len(t), m), or its transpose; the
    barycentric matrix is built INTERPOLATION_CHUNK values at a time (it is (values x nodes), with two temporaries
    of that size: at P = 1000 and 65 nodes, ~1.5 MiB at once), each value's row on its own."""
    weights = _weights(nodes.size)
    out = np.empty((F.shape[1], t.size) if transpose else (t.size, F.shape[1]))
    for lo in range(0, t.size, INTERPOLATION_CHUNK):
        part = slice(lo, lo + INTERPOLATION_CHUNK)
        M = _barycentric_matrix(nodes, weights, t[part])
        if transpose:
            np.matmul(F.T, M.T, out=out[:, part])
        else:
            np.matmul(M, F, out=out[part])
    return out


def on_values(evaluate: Callable[[Array], Array], values: Array, scale: Callable[[Array], Array], tol: float,
              min_values: int | None = None, transpose: bool = False) -> tuple[Array, int]:
    """evaluate(values) (an (len(values), m) array, one row per value), through interpolation in log d when it
    checks.  ``values``: sorted distinct variances > 0; ``scale(F)``: the scale of a block of rows F, broadcastable
    to F (the check is |interpolated - evaluated| <= tol * scale, elementwise at every new node); returns (rows,
    nodes used; 0 when evaluated directly).  The result depends only on (evaluate, values, tol), not on who calls."""
    values = np.asarray(values, dtype=float)
    min_values = MIN_VALUES if min_values is None else min_values
    if values.size < max(min_values, 2) or values[0] == values[-1]:
        return _direct(evaluate, values, transpose), 0
    u = np.log(values)
    mid, half = 0.5 * (u[0] + u[-1]), 0.5 * (u[-1] - u[0])
    t = np.clip((u - mid) / half, -1.0, 1.0)
    n = N_START
    nodes = _lobatto(n)
    F = np.asarray(evaluate(np.exp(mid + half * nodes)))
    while True:
        n2 = 2 * n - 1
        if n2 > N_MAX or n2 >= values.size:
            return _direct(evaluate, values, transpose), 0
        fine = _lobatto(n2)
        new = fine[1::2]
        F_new = np.asarray(evaluate(np.exp(mid + half * new)))
        predicted = _barycentric_matrix(nodes, _weights(n), new) @ F
        F_all = np.empty((n2,) + F.shape[1:])
        F_all[0::2], F_all[1::2] = F, F_new
        if np.all(np.abs(predicted - F_new) <= tol * scale(F_new)):
            return _interpolate(fine, F_all, t, transpose), n2
        n, nodes, F = n2, fine, F_all
