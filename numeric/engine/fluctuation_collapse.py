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


#: Chebyshev points of the first kind in (-1, 1) (a piece's nodes) and the points between them (its check points)
_X = np.cos(np.pi * (np.arange(NODES) + 0.5) / NODES)
_MID = np.cos(np.pi * np.arange(1, NODES) / NODES)


def _row_scales(values: dict) -> dict:
    """The scale of each certified field over the last axis of its values (..., points): the largest |value|;
    for the mean shifts plus sqrt of the largest |variance| (the kernel's own scale: a mean shift may vanish)."""
    var = np.max(np.abs(values["variance"]), axis=-1)
    out = {}
    for name in CERTIFIED:
        if name not in values:
            continue
        out[name] = np.max(np.abs(values[name]), axis=-1)
        if name in ("mean_shift", "closure_mean_shift"):
            out[name] = out[name] + np.sqrt(var)
    return out


def _passes_midpoints(at_nodes: dict, at_mid: dict, tol: float) -> bool:
    """Whether the Chebyshev interpolants through ``at_nodes`` (..., NODES) agree with ``at_mid`` (..., NODES - 1)
    to ``tol`` of each certified field's scale over its row's nodes."""
    scales = _row_scales(at_nodes)
    for k, scale in scales.items():
        rows = at_nodes[k].reshape(-1, NODES)
        coef = C.chebfit(_X, rows.T, NODES - 1)  # (NODES, rows)
        err = np.abs(C.chebval(_MID, coef) - at_mid[k].reshape(-1, NODES - 1))  # (rows, NODES - 1)
        if np.any(err.max(axis=1) > tol * np.maximum(np.reshape(scale, -1), 1e-300)):
            return False
    return True


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
    while stack:
        a, b, level = stack.pop()
        inside = (theta >= a) & (theta <= b) & ~done
        if not inside.any():
            continue
        half, centre = (b - a) / 2, (a + b) / 2
        at_nodes = evaluate(centre + half * _X)
        at_mid = evaluate(centre + half * _MID)
        if names is None:
            names = list(at_nodes)
            out = {k: np.empty(theta.shape) for k in names}
        if _passes_midpoints(at_nodes, at_mid, tol):
            t = (theta[inside] - centre) / half
            for k in names:
                out[k][inside] = C.chebval(t, C.chebfit(_X, at_nodes[k], NODES - 1))
            done |= inside
        elif level < MAX_LEVEL:
            stack += [(a, centre, level + 1), (centre, b, level + 1)]
    return out, done


# ------------------------------------------------------------------------------------------ unequal norms
#: Chebyshev-Lobatto node counts per log-norm axis; nested (grid n's nodes are nodes of the next grid)
LOBATTO = (3, 5, 9, 17, 33)
#: bisections of the log-norm range before a box's pairs are left to the direct route
NORM_LEVELS = 3
#: actual pairs per box compared with the direct recursion before the box's interpolant is used
SAMPLE = 32
#: the power of the input kernel each field scales with (width Var K^: K^2; the mean shift: K); the fields are
#: interpolated divided by sqrt(K0_aa K0_bb) to that power, which takes out their growth with the norms (exactly
#: for a linear activation without bias) and leaves a relative accuracy where the norms are small
UNITS = {"variance": 2, "law_variance": 2, "closure_variance": 2, "variance_truncation": 2, "mean_shift": 1,
         "closure_mean_shift": 1, "mean_shift_truncation": 1}
#: log-norm intervals narrower than this are widened to it (one norm value; any grid interpolates it exactly)
MIN_SPAN = 1e-6
#: the largest log-norm grid whose node pairs also carry the theta-midpoint check; the node pairs a finer grid adds
#: are evaluated at the theta nodes only (the midpoints were half of all evaluations there)
THETA_CHECKED = 9


def _lobatto(n: int) -> np.ndarray:
    return np.cos(np.pi * np.arange(n) / (n - 1))


def _lagrange(n: int, x: np.ndarray) -> np.ndarray:
    """The Lagrange basis of the n Chebyshev-Lobatto nodes at x (m,) in [-1, 1]: (m, n), barycentric form."""
    nodes = _lobatto(n)
    w = (-1.0) ** np.arange(n)
    w[0] /= 2
    w[-1] /= 2
    d = x[:, None] - nodes[None, :]
    exact = d == 0
    t = w / np.where(exact, 1.0, d)
    L = t / t.sum(axis=1, keepdims=True)
    hit = exact.any(axis=1)
    L[hit] = exact[hit]
    return L


def _to_unit(s: np.ndarray, span: tuple[float, float]) -> np.ndarray:
    lo, hi = span
    return np.clip((2 * s - (lo + hi)) / (hi - lo), -1.0, 1.0)


def _widen(lo: float, hi: float) -> tuple[float, float]:
    if hi - lo >= MIN_SPAN:
        return lo, hi
    centre = (lo + hi) / 2
    return centre - MIN_SPAN / 2, centre + MIN_SPAN / 2


def interpolate_norm_pairs(evaluate: Callable[[np.ndarray, np.ndarray, np.ndarray], dict], s_a: np.ndarray,
                           s_b: np.ndarray, theta: np.ndarray, tol: float) -> tuple[dict, np.ndarray]:
    """Values of ``evaluate`` (log-norms s_a, s_b and angles theta, arrays of one length -> dict of arrays) at the
    pairs (s_a <= s_b: log K0_aa of the two inputs; theta the angle of their K0), from certified interpolants
    in three variables: Chebyshev-Lobatto in each log-norm (nested grids LOBATTO) times the piecewise Chebyshev
    interpolant in theta of `interpolate_pairs`, on boxes of the (s_a, s_b) range (bisected up to NORM_LEVELS
    times).  The pair problem is symmetric in its two inputs, so a box on the diagonal evaluates only its node
    pairs i <= j.  The fields are interpolated divided by sqrt(K0_aa K0_bb)^UNITS.

    Certification of a box, each comparison against ``tol`` times the field's scale over the theta-piece at the
    node pair (`_row_scales`):

    1. theta: at every node pair of the grids up to THETA_CHECKED nodes per log-norm (a 9 x 9 sampling of the
       box), each piece's interpolant against direct values at the midpoints between its nodes (pieces bisected
       until they pass, as in `interpolate_pairs`); the node pairs of the finer grid are evaluated at the theta
       nodes only: between the checked ones the theta interpolant's error varies smoothly with the log-norms, and
       check 3 tests the whole interpolant at pairs that are on no grid;
    2. log-norms (grids of 5 nodes and more): the Chebyshev coefficients of the last two degrees in either
       log-norm, summed, at every theta node (`_norm_tail`); otherwise the next grid, or at once a split of the
       box when the tail's decay over the grids so far predicts the next grid fails too;
    3. SAMPLE actual pairs of the box (a fixed draw) against their direct values.

    Returns (values, done); pairs of boxes or pieces that cannot be certified are left to the caller."""
    def normalised(sa: np.ndarray, sb: np.ndarray, t: np.ndarray) -> dict:
        got = evaluate(sa, sb, t)
        return {k: v * np.exp(-UNITS.get(k, 0) * (sa + sb) / 2) for k, v in got.items()}

    names: list[str] = []
    out: dict[str, np.ndarray] = {}
    done = np.zeros(theta.shape, dtype=bool)
    lo, hi = _widen(float(min(s_a.min(), s_b.min())), float(max(s_a.max(), s_b.max())))
    boxes = [((lo, hi), (lo, hi), 0)]
    while boxes:
        span_a, span_b, level = boxes.pop()
        inside = np.flatnonzero(~done & (s_a >= span_a[0]) & (s_a <= span_a[1]) & (s_b >= span_b[0])
                                & (s_b <= span_b[1]))
        if not inside.size:
            continue
        fitted = _fit_box(normalised, span_a, span_b, s_a[inside], s_b[inside], theta[inside], tol)
        if fitted is None:
            if level < NORM_LEVELS:
                if span_a == span_b:
                    mid = (span_a[0] + span_a[1]) / 2
                    left, right = (span_a[0], mid), (mid, span_a[1])
                    boxes += [(left, left, level + 1), (left, right, level + 1), (right, right, level + 1)]
                elif span_a[1] - span_a[0] >= span_b[1] - span_b[0]:
                    mid = (span_a[0] + span_a[1]) / 2
                    boxes += [((span_a[0], mid), span_b, level + 1), ((mid, span_a[1]), span_b, level + 1)]
                else:
                    mid = (span_b[0] + span_b[1]) / 2
                    boxes += [(span_a, (span_b[0], mid), level + 1), (span_a, (mid, span_b[1]), level + 1)]
            continue
        values, ok = fitted
        if not names:
            names = list(values)
            out = {k: np.empty(theta.shape) for k in names}
        back = inside[ok]
        for k in names:
            out[k][back] = values[k][ok] * np.exp(UNITS.get(k, 0) * (s_a[back] + s_b[back]) / 2)
        done[back] = True
    return out, done


def _norm_tail(pieces: list, stacked: Callable[[tuple, list], dict], grid: list, n: int, tol: float) -> float:
    """How far the grid's interpolant in the two log-norms is from converged, as a ratio (<= 1: converged): the
    Chebyshev coefficients of its last two degrees in either log-norm (the size of what a finer grid would add,
    for the geometric decay of an analytic function), summed, over ``tol`` times each field's scale over the
    piece; the largest over fields, theta nodes and pieces."""
    x = _lobatto(n)
    tail = np.zeros((n, n), dtype=bool)
    tail[n - 2:, :] = True
    tail[:, n - 2:] = True
    worst = 0.0
    for pc in pieces:
        v = stacked(pc, grid)
        scales = _row_scales({k: a[:, :NODES].reshape(1, -1) for k, a in v.items()})
        for k in scales:
            vals = v[k][:, :NODES].reshape(n, n, NODES)
            coef = C.chebfit(x, vals.reshape(n, -1), n - 1).reshape(n, n, NODES)  # along s_a
            coef = C.chebfit(x, coef.transpose(1, 0, 2).reshape(n, -1), n - 1).reshape(n, n, NODES)  # along s_b
            ratio = np.abs(coef.transpose(1, 0, 2)[tail]).sum(axis=0) / (tol * max(float(scales[k][0]), 1e-300))
            worst = max(worst, float(ratio.max()))
    return worst


def _fit_box(evaluate: Callable[[np.ndarray, np.ndarray, np.ndarray], dict], span_a: tuple[float, float],
             span_b: tuple[float, float], s_a: np.ndarray, s_b: np.ndarray, theta: np.ndarray, tol: float
             ) -> tuple[dict, np.ndarray] | None:
    """One box of `interpolate_norm_pairs`: (values at its pairs, which pairs were certified) or None when the
    log-norm grids or the sample check fail."""
    symmetric = span_a == span_b
    fine = LOBATTO[-1]
    t_all = np.concatenate([_X, _MID])
    nodes_a = (span_a[0] + span_a[1]) / 2 + (span_a[1] - span_a[0]) / 2 * _lobatto(fine)
    nodes_b = (span_b[0] + span_b[1]) / 2 + (span_b[1] - span_b[0]) / 2 * _lobatto(fine)
    lo_t, hi_t = float(theta.min()), float(theta.max())
    if hi_t - lo_t < 1e-12:
        hi_t = lo_t + 1e-12
    pieces = [(lo_t, hi_t, 0)]
    cache: dict = {}  # (piece, i, j) in fine-grid indices -> dict of arrays over t_all

    def key(i: int, j: int) -> tuple[int, int]:
        return (min(i, j), max(i, j)) if symmetric else (i, j)

    def fill(grid: list, todo_pieces: list, mids: bool) -> None:
        """Evaluate the grid's node pairs not yet in the cache for each piece: at the theta nodes, and with
        ``mids`` at the midpoints too."""
        t_eval = t_all if mids else _X
        want = [(pc, key(i, j)) for pc in todo_pieces for i, j in grid if (pc[:2], key(i, j)) not in cache]
        want = list(dict.fromkeys(want))
        if not want:
            return
        sa = np.concatenate([np.full(t_eval.size, nodes_a[ij[0]]) for _, ij in want])
        sb = np.concatenate([np.full(t_eval.size, nodes_b[ij[1]]) for _, ij in want])
        th = np.concatenate([(pc[0] + pc[1]) / 2 + (pc[1] - pc[0]) / 2 * t_eval for pc, _ in want])
        got = evaluate(sa, sb, th)
        for w, (pc, ij) in enumerate(want):
            cache[pc[:2], ij] = {k: v[w * t_eval.size:(w + 1) * t_eval.size] for k, v in got.items()}

    def stacked(pc, grid_ij, mids: bool = False) -> dict:
        """The cached values of the grid's node pairs over the piece's theta nodes (and midpoints)."""
        rows = [cache[pc[:2], key(i, j)] for i, j in grid_ij]
        end = t_all.size if mids else NODES
        return {k: np.stack([r[k][:end] for r in rows]) for k in rows[0]}

    g = 0
    tails: list[float] = []
    while True:
        n = LOBATTO[g]
        idx = [i * ((fine - 1) // (n - 1)) for i in range(n)]
        grid = [(i, j) for i in idx for j in idx]
        live = [pc for pc in pieces if ((theta >= pc[0]) & (theta <= pc[1])).any()]
        checked = n <= THETA_CHECKED
        fill(grid, live, mids=checked)
        pieces = [] if checked else live
        split = False
        for pc in live if checked else []:  # a piece failing at MAX_LEVEL is dropped: its pairs stay with the caller
            v = stacked(pc, grid, mids=True)
            if _passes_midpoints({k: a[:, :NODES] for k, a in v.items()}, {k: a[:, NODES:] for k, a in v.items()},
                                 tol):
                pieces.append(pc)
            elif pc[2] < MAX_LEVEL:
                centre = (pc[0] + pc[1]) / 2
                pieces += [(pc[0], centre, pc[2] + 1), (centre, pc[1], pc[2] + 1)]
                split = True
        if split:
            continue
        if not pieces:
            return None
        if g > 0:
            tails.append(_norm_tail(pieces, stacked, grid, n, tol))
            if tails[-1] <= 1.0:
                break
            # geometric decay: from this grid to the next the degree doubles; if the tail's decay so far
            # predicts the next grid fails too, split the box now instead of paying for the next grid
            if len(tails) >= 2 and g + 1 < len(LOBATTO):
                steps = (LOBATTO[g + 1] - LOBATTO[g]) / (LOBATTO[g] - LOBATTO[g - 1])
                if tails[-1] * (tails[-1] / max(tails[-2], 1e-300)) ** steps > 1.0:
                    return None
        g += 1
        if g == len(LOBATTO):
            return None

    # the interpolant of grid n at the pairs.  A pair's log-norms are two of at most P distinct values, so the
    # contraction over the first log-norm is done once per distinct value (O(P n^2) per theta node), and a pair
    # costs O(NODES n): ~n times less than contracting the (NODES, n, n) coefficients pair by pair
    u_a, in_a = np.unique(s_a, return_inverse=True)
    u_b, in_b = np.unique(s_b, return_inverse=True)
    La_u = _lagrange(n, _to_unit(u_a, span_a))  # (distinct s_a, n)
    Lb_u = _lagrange(n, _to_unit(u_b, span_b))
    values: dict[str, np.ndarray] = {}
    ok = np.zeros(theta.shape, dtype=bool)
    for pc in pieces:
        sel = np.flatnonzero((theta >= pc[0]) & (theta <= pc[1]) & ~ok)
        if not sel.size:
            continue
        v = stacked(pc, grid)
        along_a = {k: np.einsum("ui,tij->utj", La_u, C.chebfit(_X, a[:, :NODES].T, NODES - 1).reshape(NODES, n, n))
                   for k, a in v.items()}  # (distinct s_a, NODES, n) per field
        for k in v:
            if k not in values:
                values[k] = np.empty(theta.shape)
        for c0 in range(0, sel.size, 8192):  # chunks: the (pairs, NODES) work arrays stay small at P ~ 1000
            c = sel[c0:c0 + 8192]
            T = C.chebvander((theta[c] - (pc[0] + pc[1]) / 2) / ((pc[1] - pc[0]) / 2), NODES - 1)  # (m, NODES)
            for k in v:
                inner = np.einsum("mtj,mj->mt", along_a[k][in_a[c]], Lb_u[in_b[c]])
                values[k][c] = np.einsum("mt,mt->m", T, inner)
        ok[sel] = True
    # the sample of actual pairs against their direct values
    candidates = np.flatnonzero(ok)
    if candidates.size:
        pick = np.sort(np.random.default_rng(0).choice(candidates, min(SAMPLE, candidates.size), replace=False))
        direct = evaluate(s_a[pick], s_b[pick], theta[pick])
        near_a = np.argmin(np.abs(_to_unit(s_a[pick], span_a)[:, None] - _lobatto(n)[None, :]), axis=1)
        near_b = np.argmin(np.abs(_to_unit(s_b[pick], span_b)[:, None] - _lobatto(n)[None, :]), axis=1)
        for q, p_i in enumerate(pick):
            pc = next(pc for pc in pieces if pc[0] <= theta[p_i] <= pc[1])
            row = cache[pc[:2], key(idx[near_a[q]], idx[near_b[q]])]
            scales = _row_scales({k: a[:NODES] for k, a in row.items()})
            for k in scales:
                if abs(values[k][p_i] - direct[k][q]) > tol * max(float(scales[k]), 1e-300):
                    return None
        for k in values:
            values[k][pick] = direct[k]
    return values, ok
