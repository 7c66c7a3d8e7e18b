"""Depth collapsed: the L-layer map of a pair as a piecewise Chebyshev interpolant when the inputs' norms take
few values.

Element (a, b) of the residual recursions depends only on its own state and on the diagonals K_aa^(l), K_bb^(l)
of the layers before (`residual_kernel`).  When every input has the same K^(0)_aa = q (inputs on a sphere), the
diagonals are the same for all inputs at every layer, so the L-layer map

    x = K^(0)_ab  ->  K^(L)_ab = F(x),      Theta^(L)_ab = A(x) Theta^(0)_ab + B(x)

(the NTK is affine in its own state, with coefficients that depend on K only) is one function of one variable on
[-q, q].  It is computed once, by the same engine (`residual_kernel.propagate` on a small matrix whose upper
triangle holds the nodes, so every activation and backend is served), and evaluated over the triangle: the cost is
O(P^2 n + pieces n L) instead of O(P^2 L).  Inputs whose K^(0)_aa take m <= ``MAX_CLASSES`` distinct values (to
``EQUAL_DIAGONAL_RTOL``, as the tables of `residual_kernel` treat them) get one interpolant per pair of classes, on
x = sqrt(q_a q_b) u, u in [-1, 1].

A deep network's map is steep near u = 1 (one Chebyshev series on [-1, 1] needs ~500 terms for erf at depth 200), so
u is split adaptively (Chebfun's splitting): on each piece the map is sampled at the ``DEGREE`` + 1
Chebyshev-Lobatto points; a piece whose last ``TAIL`` Chebyshev coefficients are below ``RTOL / 8`` of the largest
|value| of its function is then checked against the layered map at ``CHECKS`` points inside it that are not nodes,
and accepted when every one is within ``RTOL / 2``; a piece that fails either test is bisected.  An accepted piece
keeps only the terms it needs: its highest terms are dropped while their |c_k| sum to at most RTOL / 8 (a bound on
the change, `truncated`) before it is certified, so a map of moderate depth sums ~15 terms, not 33. The end points u
= +-1 are nodes, so the layered values there are reproduced exactly.  It gives up (the caller runs the layers) above
``MAX_PIECES`` pieces, when the depth is below ``MIN_LAYERS`` (the layers cost less than the evaluation) or the
build would cost more than ``BUILD_SHARE`` of the layered run; and it is not used for the response (rescaled by its
own diagonal).  The homogeneous activations (ReLU) have arc-cosine kernels with a square-root branch point at
rho = +-1, so their maps are built in the angle, u = 1 - 2 arccos(rho) / pi (`angle_variable`), where they are
analytic; their runs rescale between blocks, and the sampled values are multiplied back exactly.  Only their NNGP
is collapsed: the NTK's samples are not smooth to RTOL near rho = 1 (see `build`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numba
import numpy as np

from resprop.generated.residual_compiled import _acos  # the generated arccosine (<= 1.09 ulp, vectorisable)
from resprop.numeric.engine.mirror import mirror_columns

#: most distinct diagonal values (classes) for which the map is collapsed (m (m + 1) / 2 interpolants)
MAX_CLASSES = 8
#: target relative error of the interpolants (of the largest |value| of each function)
RTOL = 1e-13
#: polynomial degree on each piece (DEGREE + 1 Lobatto points; the check uses the DEGREE / 2 + 1 subset)
DEGREE = 32
#: most pieces of [-1, 1] per pair of classes; the narrowest piece
MAX_PIECES = 512
MIN_WIDTH = 2.0**-13
#: cells of the uniform grid of [-1, 1] that locates an element's piece (pieces are dyadic, >= MIN_WIDTH wide)
CELLS = int(round(2 / MIN_WIDTH))
#: a piece's series has converged when its last TAIL coefficients are below RTOL / 8 of the function's largest
#: |value|; it is then certified at the CHECKS points (relative to the piece, not nodes of the grid) against the
#: layered values, to RTOL / 2
TAIL = 3
CHECKS = np.array([-0.8711, -0.2963, 0.3417, 0.9127])
#: depth from which the collapse is tried: an evaluation costs about DEGREE Clenshaw steps (~0.3-0.5 ns each per
#: element, vectorised) against ~0.6-1.2 ns per layer and element for the compiled kernels
MIN_LAYERS = 32
#: the build (pieces x nodes x layers) may cost at most this share of the layered run (P^2 / 2 x layers)
BUILD_SHARE = 0.25
#: columns per block in the evaluation (its work arrays stay in L1)
JB = 512
TWO_OVER_PI = 2.0 / math.pi


@dataclass
class Collapsed:
    """The piecewise maps: for the pair of classes p, pieces ``starts[p]:starts[p + 1]`` of the flat arrays, with
    left ends ``left`` (the right end is the next left end; 1 for the last), half-widths ``half`` and Chebyshev
    coefficients ``coef[f, piece, :]`` of the functions f = K (0), and A, B (1, 2) for the second state; a piece is
    found through ``cell_piece`` (the piece of each cell of a uniform grid of [-1, 1]); ``ends[f, p]`` the layered
    values at u = -1 and u = 1, returned as they are there.  ``classes[a]`` the class of input a, ``pair[ca, cb]``
    = p, ``inv_root[a]`` = 1 / sqrt(q_class(a)); ``diagonal``/``second_diagonal``: the final diagonal of each
    class."""

    classes: np.ndarray
    values: np.ndarray
    pair: np.ndarray
    inv_root: np.ndarray
    starts: np.ndarray
    cell_piece: np.ndarray
    left: np.ndarray
    half: np.ndarray
    coef: np.ndarray
    ends: np.ndarray
    diagonal: np.ndarray
    second_diagonal: np.ndarray | None
    two: bool
    estimate: float
    #: coef[1] is Theta^(L) itself (`with_theta_from_k`), not A with B in coef[2]
    direct: bool = False
    #: the maps are functions of the angle: u = 1 - 2 theta / pi, theta = arccos(K^(0)_ab / sqrt(q_a q_b))
    #: (homogeneous activations, `angle_variable`), not of the correlation u = K^(0)_ab / sqrt(q_a q_b)
    angular: bool = False

    @property
    def pieces(self) -> int:
        return int(self.left.size)


def norm_classes(d: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(class of each value, representative value of each class): values within ``rtol`` x max|d| of a class's
    smallest value belong to it; None when there are more than MAX_CLASSES classes."""
    order = np.argsort(d, kind="stable")
    s = d[order]
    tol = rtol * float(np.max(np.abs(d)))
    starts = [0]
    for i in range(1, s.size):
        if s[i] - s[starts[-1]] > tol:
            starts.append(i)
            if len(starts) > MAX_CLASSES:
                return None
    labels_sorted = np.zeros(s.size, dtype=np.int64)
    for k, i in enumerate(starts):
        labels_sorted[i:] = k
    labels = np.empty_like(labels_sorted)
    labels[order] = labels_sorted
    reps = np.array([s[i] for i in starts])
    return labels, reps


def lobatto(N: int) -> np.ndarray:
    return np.cos(np.pi * np.arange(N) / (N - 1))


def chebyshev_coefficients(values: np.ndarray) -> np.ndarray:
    """Coefficients c_k of sum c_k T_k(u) through the values at the Lobatto points (last axis), by the DCT-I."""
    from scipy.fft import dct

    N = values.shape[-1]
    c = dct(values, type=1, axis=-1) / (N - 1)
    c[..., 0] /= 2
    c[..., -1] /= 2
    return c


def truncated(coef: np.ndarray, ref: np.ndarray, tol: float) -> np.ndarray:
    """The series coef (F, N) with its highest terms set to 0 as far as the dropped |c_k| sum to at most ``tol``
    times ``ref`` (F, 1) for every function: since |T_k(y)| <= 1 on [-1, 1], that is a bound on what the
    truncation changes anywhere on the piece.  A map of moderate depth is smooth enough that far fewer than
    DEGREE + 1 terms carry it, and the evaluation costs one Clenshaw step per term and element."""
    tail = np.cumsum((np.abs(coef) / ref)[:, ::-1], axis=1)[:, ::-1]  # tail[f, k] = sum_{j >= k} |c_j| / ref
    fits = np.all(tail <= tol, axis=0)  # dropping terms k.. is allowed
    keep = coef.shape[1]
    while keep > 1 and fits[keep - 1]:
        keep -= 1
    out = coef.copy()
    out[:, keep:] = 0.0
    return out


def _clenshaw(c: np.ndarray, u: np.ndarray) -> np.ndarray:
    """sum_k c[..., k] T_k(u) for c (F, N) and u (M,): (F, M)."""
    b1 = np.zeros((c.shape[0], u.size))
    b2 = np.zeros_like(b1)
    for k in range(c.shape[1] - 1, 0, -1):
        b1, b2 = c[:, k:k + 1] + 2 * u * b1 - b2, b1
    return c[:, :1] + u * b1 - b2


def _layout(m: int, n_entries: list[int]) -> tuple[int, dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]]:
    """A small matrix of m classes x M inputs whose upper-triangle block of class pair (i, j) holds at least
    n_entries[index of (i, j)] positions: (size, pair -> (rows, cols))."""
    pairs = [(i, j) for i in range(m) for j in range(i, m)]
    need = max(n_entries)
    M = max(2, math.ceil((1 + math.sqrt(1 + 8 * need)) / 2))
    where = {}
    for (i, j), n in zip(pairs, n_entries):
        rr, cc = np.triu_indices(M, 1) if i == j else np.indices((M, M)).reshape(2, -1)
        where[(i, j)] = (rr[:n] + i * M, cc[:n] + j * M)
    return m * M, where


def correlation(u: np.ndarray, angular: bool) -> np.ndarray:
    """The correlation K^(0)_ab / sqrt(q_a q_b) at the map's variable u: u itself, or cos(pi (1 - u) / 2) when the
    maps are functions of the angle (exactly +-1 at u = +-1)."""
    return np.cos(0.5 * np.pi * (1.0 - u)) if angular else u


def angle_variable(rec) -> bool:
    """Whether the maps of ``rec`` are built in the angle: the arc-cosine kernels of the homogeneous activations
    (ReLU: E[phi phi] = q (sin t + (pi - t) cos t) / (2 pi) at rho = cos t, Cho & Saul 2009) have a square-root
    branch point at rho = +-1, so the L-layer map is not analytic in rho there, but it is in t: one layer takes
    t to arccos(rho'(t)) with 1 - rho'(t) = t^2 h(t), h analytic and h(0) > 0, so t' = t sqrt(h(t)) k(t^2 h(t))
    is analytic on [0, pi], and so is the composition of L layers."""
    from resprop.numeric.engine import residual_kernel as RK

    return rec.name in RK.HOMOGENEOUS


def _sample(reps, pairs, xs: list[np.ndarray], two: bool, sequences, mode: str, rec, angular: bool = False):
    """Run the layers on the values xs[p] (in units of u) of every class pair p: (values (F, n_p) per pair,
    final diagonals K and second of each class) or None when the run left the float64 range.  A run that rescaled
    between blocks (homogeneous activations) is multiplied back by its powers of two (exact)."""
    from resprop.numeric.engine import residual_kernel as RK

    m = reps.size
    n = [x.size * (2 if two else 1) for x in xs]
    size, where = _layout(m, n)
    M = size // m
    K0 = np.zeros((size, size))
    K0[np.arange(size), np.arange(size)] = np.repeat(reps, M)
    S0 = K0.copy()
    for (i, j), u in zip(pairs, xs):
        rr, cc = where[(i, j)]
        x = correlation(u, angular) * math.sqrt(reps[i] * reps[j])
        k = u.size
        K0[rr[:k], cc[:k]] = x
        if two:
            K0[rr[k:], cc[k:]] = x
            S0[rr[:k], cc[:k]] = 0.0   # B: the map of Theta^(0) = 0
            S0[rr[k:], cc[k:]] = 1.0   # A + B
    out = RK.propagate(K0, S0 if two else None, sequences, mode, rec, collapse=False)
    K_out = out.K
    second = out.second if out.second is not None else np.zeros((0, 0))
    with np.errstate(over="ignore"):
        if out.log_scale_K != 0.0:  # the scales are powers of two (Schedule.exp2_K): ldexp is exact
            K_out = np.ldexp(K_out, round(out.log_scale_K / math.log(2.0)))
        if out.log_scale_second != 0.0:
            second = np.ldexp(second, round(out.log_scale_second / math.log(2.0)))
    vals = []
    for (i, j), u in zip(pairs, xs):
        rr, cc = where[(i, j)]
        k = u.size
        fK = K_out[rr[:k], cc[:k]]
        if two:
            B = second[rr[:k], cc[:k]]
            vals.append(np.stack([fK, second[rr[k:], cc[k:]] - B, B]))
        else:
            vals.append(fK[None])
    if not all(np.all(np.isfinite(v)) for v in vals):
        return None
    if not (np.all(np.isfinite(K_out.diagonal())) and (not two or np.all(np.isfinite(second.diagonal())))):
        return None
    diag = K_out[np.arange(0, size, M), np.arange(0, size, M)]
    sdiag = second[np.arange(0, size, M), np.arange(0, size, M)] if two else None
    return vals, diag, sdiag


def build(d0: np.ndarray, sd0: np.ndarray | None, sequences, mode: str, rec, rtol: float = RTOL,
          classes=None, P: int | None = None) -> Collapsed | None:
    """The collapsed maps of the run ``propagate(K0, second0, sequences, mode, rec)`` for inputs with diagonal
    d0 (and second-state diagonal sd0), or None when it does not apply or does not pay (module docstring)."""
    from resprop.numeric.engine import residual_kernel as RK

    L = len(sequences[0])
    P = d0.size if P is None else P
    if mode == "response" or L < MIN_LAYERS or rec.expr is not None:
        return None
    angular = angle_variable(rec)
    if angular and mode != "nngp":
        # the NTK of an arc-cosine kernel needs J'(rho) = (pi - arccos rho) / pi, and the layered reference computes
        # rho = K_ab / sqrt(K_aa K_bb) to an ulp: near rho = 1 its arccos is off by up to sqrt(2 ulp) ~ 2e-8, so the
        # samples of A and B carry ~1e-9 .. 1e-11 of noise near u = 1 (measured: the last Chebyshev coefficients
        # stall at 6.6e-11 of the scale on every piece [1 - h, 1]) and cannot certify a map to RTOL: run the layers
        return None
    found = norm_classes(d0, RK.EQUAL_DIAGONAL_RTOL) if classes is None else classes
    if found is None:
        return None
    labels, reps = found
    m = reps.size
    two = mode != "nngp"
    if two:
        assert sd0 is not None
        if np.max(np.abs(sd0 - reps[labels])) > RK.EQUAL_DIAGONAL_RTOL * np.max(np.abs(sd0)):
            return None  # the second state's diagonal is not a function of the class
    pairs = [(i, j) for i in range(m) for j in range(i, m)]
    budget = BUILD_SHARE * P * (P - 1) / 2  # elements' worth of layered work the sampling may use
    nodes = lobatto(DEGREE + 1)[::-1]  # increasing
    todo: list[list[tuple[float, float]]] = [[(-1.0, 1.0)] for _ in pairs]
    done: list[list[tuple[float, float, np.ndarray]]] = [[] for _ in pairs]
    scale = np.zeros((len(pairs), 3 if two else 1))
    endpoint: list[dict[float, np.ndarray]] = [{} for _ in pairs]
    used = 0
    diag = sdiag = None
    worst = 0.0

    def sample(pts: list[np.ndarray]):
        nonlocal used, diag, sdiag
        used += sum(x.size for x in pts) * (2 if two else 1)
        if used > budget:
            return None
        got = _sample(reps, pairs, [x if x.size else np.zeros(1) for x in pts], two, sequences, mode, rec, angular)
        if got is not None:
            diag, sdiag = got[1], got[2]
        return None if got is None else got[0]

    while any(todo):
        if sum(len(d) + len(t) for d, t in zip(done, todo)) > MAX_PIECES * len(pairs):
            return None
        vals = sample([np.concatenate([(lo + hi) / 2 + (hi - lo) / 2 * nodes for lo, hi in t]) if t else
                       np.zeros(0) for t in todo])
        if vals is None:
            return None
        fresh: list[list[tuple[float, float, np.ndarray]]] = [[] for _ in pairs]
        nxt: list[list[tuple[float, float]]] = [[] for _ in pairs]
        for p, t in enumerate(todo):
            if not t:
                continue
            V = vals[p][:, :len(t) * (DEGREE + 1)].reshape(vals[p].shape[0], len(t), DEGREE + 1)
            scale[p] = np.maximum(scale[p], np.max(np.abs(V), axis=(1, 2)))
            ref = np.where(scale[p] > 0, scale[p], 1.0)[:, None]
            for q, (lo, hi) in enumerate(t):
                if lo == -1.0:
                    endpoint[p][-1.0] = V[:, q, 0]
                if hi == 1.0:
                    endpoint[p][1.0] = V[:, q, -1]
                coef = chebyshev_coefficients(V[:, q, ::-1])  # Lobatto order u_k = cos(pi k / n)
                if np.max(np.abs(coef[:, -TAIL:]) / ref) <= rtol / 8:  # the series has reached round-off
                    fresh[p].append((lo, hi, truncated(coef, ref, rtol / 8)))
                else:
                    mid = (lo + hi) / 2
                    nxt[p] += [(lo, mid), (mid, hi)]
        # certify the accepted pieces: the interpolant against the layers at CHECKS points inside each piece
        pts = [np.concatenate([(lo + hi) / 2 + (hi - lo) / 2 * CHECKS for lo, hi, _ in f]) if f else np.zeros(0)
               for f in fresh]
        if any(x.size for x in pts):
            vals = sample(pts)
            if vals is None:
                return None
            for p, f in enumerate(fresh):
                ref = np.where(scale[p] > 0, scale[p], 1.0)[:, None]
                for q, (lo, hi, coef) in enumerate(f):
                    got = vals[p][:, q * CHECKS.size:(q + 1) * CHECKS.size]
                    err = float(np.max(np.abs(_clenshaw(coef, CHECKS) - got) / ref))
                    if err <= rtol / 2:
                        done[p].append((lo, hi, coef))
                        worst = max(worst, err)
                    else:
                        mid = (lo + hi) / 2
                        nxt[p] += [(lo, mid), (mid, hi)]
        if any(hi - lo < MIN_WIDTH for t in nxt for lo, hi in t):
            return None
        todo = nxt
    # a piece accepted early was judged against the scale known then; the final scale only grows: still valid
    starts = np.zeros(len(pairs) + 1, dtype=np.int64)
    lefts, halves, coefs, ends = [], [], [], []
    for p in range(len(pairs)):
        pieces = sorted(done[p], key=lambda e: e[0])
        # the values at u = -1 and 1 (nodes of the first and last piece): sums of the Chebyshev coefficients
        ends.append(np.stack([endpoint[p][-1.0], endpoint[p][1.0]], axis=-1))
        starts[p + 1] = starts[p] + len(pieces)
        lefts += [lo for lo, _, _ in pieces]
        halves += [(hi - lo) / 2 for lo, hi, _ in pieces]
        coefs += [c for _, _, c in pieces]
    pair = np.zeros((m, m), dtype=np.int64)
    for p, (i, j) in enumerate(pairs):
        pair[i, j] = pair[j, i] = p
    coef = np.stack(coefs, axis=1)  # (F, pieces, DEGREE + 1)
    # the columns that every piece truncated to zero are dropped: an evaluation sums only the terms in use
    in_use = np.flatnonzero(np.any(coef != 0.0, axis=(0, 1)))
    coef = np.ascontiguousarray(coef[..., :int(in_use[-1]) + 1 if in_use.size else 1])
    left = np.array(lefts)
    # cell c = [-1 + c w, -1 + (c + 1) w) of width w = MIN_WIDTH lies in exactly one dyadic piece; a piece of
    # half-width h covers 2 h / w cells (exact: dyadic widths), in order.  int16 while the pieces allow it (MAX_PIECES
    # x 36 pairs do): the grid is 32 KiB per pair of classes, a few percent of a small output
    index = np.int16 if starts[-1] <= np.iinfo(np.int16).max else np.int64
    cell_piece = np.empty((len(pairs), CELLS), dtype=index)
    for p in range(len(pairs)):
        cells = np.rint(2.0 * np.asarray(halves[starts[p]:starts[p + 1]]) / MIN_WIDTH).astype(np.int64)
        cell_piece[p] = np.repeat(np.arange(starts[p], starts[p + 1], dtype=index), cells)
    assert diag is not None
    return Collapsed(labels, reps, pair, 1.0 / np.sqrt(reps[labels]), starts, cell_piece, left, np.array(halves),
                     coef, np.ascontiguousarray(np.stack(ends, axis=1)), diag, sdiag, two, worst, angular=angular)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _evaluate_tile(K, S, r0, r1, c0, c1, o_r, o_c, mirror, classes, inv_root, pair, cell_piece, left, half, coef,
                   ends, two, single, direct, angular):
    """Replace K (and S) on a tile by the collapsed maps, in place: u = K / sqrt(q_a q_b) clipped into [-1, 1],
    its piece from the uniform cell grid, K <- F(u), S <- A(u) S + B(u) by Clenshaw's recurrence, over blocks of JB
    columns whose elements are grouped by piece (each group runs with its coefficients as scalars).  ``single``:
    one class and one piece (equal norms, a smooth map), so that a block needs no piece lookup or grouping (the
    same operations per element).  ``direct``: coef[1] is Theta^(L) itself (S is only
    written), else S <- A(u) S + B(u).  ``angular``: the maps' variable is 1 - 2 arccos(u) / pi (`angle_variable`).

    The tile is rows r0:r1, columns c0:c1 of the upper triangle; K and S hold the element (i, j) at
    [i - o_r, j - o_c] (the whole matrices: o_r = o_c = 0; a tile's own array: its corner).  Column blocks are the
    outer loop; with ``mirror`` (whole matrices), once a block is done for every row of the tile its transpose is
    copied below the diagonal while it is still in cache (tiles write disjoint parts of the lower triangle that
    no tile reads).  Returns whether every value above the diagonal is finite (checked while mirroring; True
    without ``mirror``)."""
    finite = True
    nf = coef.shape[0]
    cells = cell_piece.shape[1]
    y = np.empty(JB)
    u = np.empty(JB)
    piece = np.empty(JB, dtype=np.int64)
    b1 = np.empty(JB)
    b2 = np.empty(JB)
    res = np.empty((3, JB))
    ys = np.empty(JB)
    out = np.empty(JB)
    order = np.empty(JB, dtype=np.int64)
    count = np.empty(coef.shape[1] + 1, dtype=np.int64)
    for j0 in range(c0, c1, JB):
        m = min(JB, c1 - j0)
        for i in range(r0, r1):
            a = i
            ca = classes[a]
            ra = inv_root[a]
            if single:
                lo = left[0]
                hw = half[0]
                for t in range(m):
                    u[t] = K[i - o_r, j0 + t - o_c] * ra * inv_root[j0 + t]
                    uc = min(max(u[t], -1.0), 1.0)
                    if angular:
                        uc = 1.0 - TWO_OVER_PI * _acos(uc)
                    y[t] = min(max((uc - lo) / hw - 1.0, -1.0), 1.0)
                for f in range(nf):
                    _clenshaw_run(coef[f, 0], y[:m], b1, b2, res[f, :m])
                _ends(res, u, classes, pair, ca, ends, j0, 0, m, nf)
                _store(K, S, res, i - o_r, j0 - o_c, m, two, direct)
                continue
            pmin = coef.shape[1]
            pmax = -1
            for t in range(m):
                b = j0 + t
                p = pair[ca, classes[b]]
                u[t] = K[i - o_r, j0 + t - o_c] * ra * inv_root[b]
                uc = min(max(u[t], -1.0), 1.0)
                if angular:
                    uc = 1.0 - TWO_OVER_PI * _acos(uc)
                cell = min(int((uc + 1.0) * (0.5 * cells)), cells - 1)
                pc = cell_piece[p, cell]
                piece[t] = pc
                pmin = min(pmin, pc)
                pmax = max(pmax, pc)
                y[t] = min(max((uc - left[pc]) / half[pc] - 1.0, -1.0), 1.0)
            if pmin == pmax:  # one piece in the block: no grouping
                for f in range(nf):
                    _clenshaw_run(coef[f, pmin], y[:m], b1, b2, res[f, :m])
                _ends(res, u, classes, pair, ca, ends, j0, 0, m, nf)
                _store(K, S, res, i - o_r, j0 - o_c, m, two, direct)
                continue
            # the block's elements grouped by piece (a counting sort: few distinct pieces), so that each group
            # runs with its coefficients as scalars of the vectorised loop
            span = pmax - pmin + 1
            for q in range(span + 1):
                count[q] = 0
            for t in range(m):
                count[piece[t] - pmin + 1] += 1
            for q in range(span):
                count[q + 1] += count[q]
            for t in range(m):
                q = piece[t] - pmin
                order[count[q]] = t
                count[q] += 1
            for t in range(m):
                ys[t] = y[order[t]]
            g0 = 0
            while g0 < m:
                pc = piece[order[g0]]
                g1 = g0 + 1
                while g1 < m and piece[order[g1]] == pc:
                    g1 += 1
                for f in range(nf):
                    _clenshaw_run(coef[f, pc], ys[g0:g1], b1, b2, out[g0:g1])
                    for t in range(g0, g1):
                        res[f, order[t]] = out[t]
                g0 = g1
            _ends(res, u, classes, pair, ca, ends, j0, 0, m, nf)
            _store(K, S, res, i - o_r, j0 - o_c, m, two, direct)
        if not mirror:
            continue
        # the block's transpose below the diagonal (mirror.py's compiled copy)
        finite = mirror_columns(K, r0, r1, j0, j0 + m, m) and finite
        if two:
            finite = mirror_columns(S, r0, r1, j0, j0 + m, m) and finite
    return finite


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _clenshaw_run(cf, y, b1, b2, out):
    """out[t] = sum_k cf[k] T_k(y[t]) (Clenshaw), vectorised over t; b1, b2: work arrays of at least len(y).  The
    recurrence is unrolled four steps at a time (b1, b2 stay in registers for four steps; the same operations)."""
    n = y.shape[0]
    N = cf.shape[0]
    for t in range(n):
        b1[t] = 0.0
        b2[t] = 0.0
    k = N - 1
    while k >= 4:
        c1 = cf[k]
        c2 = cf[k - 1]
        c3 = cf[k - 2]
        c4 = cf[k - 3]
        for t in range(n):
            yt = y[t]
            p1 = b1[t]
            p2 = b2[t]
            q1 = c1 + 2.0 * yt * p1 - p2
            q2 = c2 + 2.0 * yt * q1 - p1
            q3 = c3 + 2.0 * yt * q2 - q1
            b1[t] = c4 + 2.0 * yt * q3 - q2
            b2[t] = q3
        k -= 4
    while k >= 1:
        ck = cf[k]
        for t in range(n):
            b0 = ck + 2.0 * y[t] * b1[t] - b2[t]
            b2[t] = b1[t]
            b1[t] = b0
        k -= 1
    c0 = cf[0]
    for t in range(n):
        out[t] = c0 + y[t] * b1[t] - b2[t]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _ends(res, u, classes, pair, ca, ends, j0, c0, m, nf):
    """Elements at u = -1 or 1 (antipodal or duplicate inputs) take the layered values there, not the sum."""
    for t in range(m):
        if u[t] >= 1.0 or u[t] <= -1.0:
            p = pair[ca, classes[c0 + j0 + t]]
            e = 1 if u[t] >= 1.0 else 0
            for f in range(nf):
                res[f, t] = ends[f, p, e]


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _store(K, S, res, i, j0, m, two, direct):
    for t in range(m):
        K[i, j0 + t] = res[0, t]
    if two:
        if direct:
            for t in range(m):
                S[i, j0 + t] = res[1, t]
        else:
            for t in range(m):
                S[i, j0 + t] = res[1, t] * S[i, j0 + t] + res[2, t]


def evaluate_tile(col: Collapsed, K: np.ndarray, S: np.ndarray | None, r0: int, r1: int, c0: int, c1: int,
                  whole: bool = True) -> bool:
    """The tile rows r0:r1, columns c0:c1 replaced by the collapsed maps, in place (S is only written when
    ``col.direct``).  ``whole``: K and S are the whole matrices, and the tile is copied below the diagonal as it
    goes (True when every copied value is finite); else they are the tile's own (r1 - r0, c1 - c0) arrays (the
    caller mirrors and checks)."""
    single = col.pair.shape[0] == 1 and col.left.size == 1
    o_r, o_c = (0, 0) if whole else (r0, c0)
    return bool(_evaluate_tile(K, S if col.two else np.zeros((1, 1)), r0, r1, c0, c1, o_r, o_c, whole, col.classes,
                               col.inv_root, col.pair, col.cell_piece, col.left, col.half, col.coef, col.ends,
                               col.two, single, col.direct, col.angular))


def times_u(c: np.ndarray) -> np.ndarray:
    """Chebyshev coefficients of y f(y) from those of f (last axis, N -> N + 1): y T_0 = T_1 and
    y T_k = (T_{k+1} + T_{k-1}) / 2."""
    N = c.shape[-1]
    d = np.zeros(c.shape[:-1] + (N + 1,))
    d[..., 1:N + 1] += 0.5 * c
    d[..., 1] += 0.5 * c[..., 0]
    d[..., 0:N - 1] += 0.5 * c[..., 1:N]
    return d


def with_theta_from_k(col: Collapsed) -> Collapsed:
    """The maps for Theta^(0) = K^(0) (the NTK from the input kernel): Theta^(L) = A(u) x + B(u), x = u
    sqrt(q_a q_b), is one function G(u) per pair of classes.  On a piece u = centre + half y, so G's Chebyshev
    coefficients there are sqrt(q_a q_b) (centre a_k + half (y A)_k) + b_k (`times_u`), one degree more than A's:
    the evaluation sums two series per element instead of three.  Exact algebra on the certified pieces (the
    error of G is at most |x| times that of A plus that of B); the ends are A(+-1) (+-sqrt(q_a q_b)) + B(+-1)."""
    if not col.two or col.direct or col.angular:  # x = sqrt(q_a q_b) cos(pi (1 - u) / 2) is no polynomial in u
        return col
    n_pairs = col.starts.size - 1
    s = np.empty(n_pairs)
    for p in range(n_pairs):
        i, j = np.argwhere(col.pair == p)[0]
        s[p] = math.sqrt(col.values[i] * col.values[j])
    s_piece = np.repeat(s, np.diff(col.starts))
    centre = col.left + col.half
    A, B = col.coef[1], col.coef[2]
    N = A.shape[-1]
    G = s_piece[:, None] * (centre[:, None] * np.pad(A, ((0, 0), (0, 1))) + col.half[:, None] * times_u(A))
    G[:, :N] += B
    coef = np.zeros((2, G.shape[0], N + 1))
    coef[0, :, :N] = col.coef[0]  # a leading zero coefficient: Clenshaw gives the same bits
    coef[1] = G
    ends = np.empty((2,) + col.ends.shape[1:])
    ends[0] = col.ends[0]
    ends[1] = col.ends[1] * (s[:, None] * np.array([-1.0, 1.0])) + col.ends[2]
    return replace(col, coef=np.ascontiguousarray(coef), ends=np.ascontiguousarray(ends), direct=True)
