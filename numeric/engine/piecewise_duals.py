"""Dual kernels of piecewise-polynomial activations with breakpoints (sign, Heaviside, abs, Max/Min, floor, ...).

For (u, v) ~ N(0, [[d_a, c], [c, d_b]]), rho = c / sqrt(d_a d_b), s = sqrt(1 - rho^2), and phi checked and
classified by :mod:`resprop.numeric.engine.activation_check` (breakpoints t_j, polynomial pieces p_j between them):

    f(rho) = E[phi(u) phi(v)] = int N(z) phi(sqrt(d_a) z) g(z) dz,     g(z) = E[phi(v) | u = sqrt(d_a) z],

and likewise E[phi'(u) phi'(v)] with the pieces differentiated (finite only without jumps: for sign, Heaviside,
floor, phi' has a Dirac delta and ``mean_dphi_dphi`` refuses).

*Inner integral, exact.*  Given z, v ~ N(m, sigma^2) with m = sqrt(d_b) rho z, sigma = sqrt(d_b) s, and on each
interval (t_j, t_{j+1}) phi = p_j, expanded around m (Taylor shift) as sum_k q_jk (v - m)^k; then
E[(v - m)^k 1{t_j < v < t_{j+1}}] = sigma^k J_k(alpha, beta) (alpha, beta the standardised ends) by the
truncated-normal recursion J_0 = Phi(beta) - Phi(alpha), J_1 = N(alpha) - N(beta),
J_k = (k - 1) J_{k-2} + alpha^(k-1) N(alpha) - beta^(k-1) N(beta).

*Outer integral, breakpoint-aware Gauss--Legendre.*  z in [-L, L] (L = 10) on panels of width <= 1, split at
the breakpoints of phi(sqrt(d_a) z) (z = t_j / sqrt(d_a)); g has a smoothed step of width eps = s / |rho| around
z*_j = t_j / (sqrt(d_b) rho), so the panels are also split geometrically there (z*_j +- eps 2^k, k = -2, -1, ...,
up to width 1): an hp-refinement that keeps 16 nodes per panel accurate as rho -> +-1.  For s <= 1e-12 the inner
expectation is phi(sqrt(d_b) rho z) itself (error O(s)).  The diagonal moments E[phi(u)^2], E[phi'(u)^2] and
d E[phi^2] / dK = E[phi(u)^2 (u^2 / K - 1)] / (2 K) (Stein; finite also with jumps) use the same 1-D panels.

Accuracy (tests/test_user_activations.py): against closed forms (sign: (2/pi) asin rho, Heaviside:
1/4 + asin(rho)/(2 pi), |x|: (2/pi) sqrt(d_a d_b) (sqrt(1 - rho^2) + rho asin rho), relu) and 30-digit mpmath
quadrature (floor), relative to sqrt(E[phi(u)^2] E[phi(v)^2]): <= 1e-12 for variances in [1e-4, 1e4] and rho in
[-1, 1] (floor: variances up to ``max_variance`` below).

Range: the breakpoints within L standard deviations are used; a lattice (floor, ceiling, frac) has ~2 L sqrt(d) /
period of them, and more than ``MAX_BREAKPOINTS`` (floor(x): variance > ~40) is refused naming the variance.
Pieces must be polynomials of degree <= ``MAX_DEGREE``.

Cost: per correlation value ~ (20 + B + 2 B log2(1/eps)) * 16 outer nodes times B + 1 intervals; pairs with equal
(d_a, d_b, rho) are computed once.  A few ms per element for a handful of breakpoints, ~0.1-1 s per element for
floor at its largest variance: meant for P up to a few hundred inputs.
"""
from __future__ import annotations

import functools
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import sympy as sp
from scipy.special import ndtr

from resprop.derive.activations import x as X
from resprop.numeric.engine.activation_check import CheckedActivation, cache_key, check_activation
from resprop.numeric.engine.validation import ParameterError

Array = np.ndarray

#: half-width of the outer window in standard deviations (N(10) = 7.7e-23)
L_OUT = 10.0
#: Gauss--Legendre nodes per panel
N_GL = 16
#: most breakpoints within L_OUT standard deviations
MAX_BREAKPOINTS = 128
#: highest polynomial degree of a piece
MAX_DEGREE = 8
#: below this s = sqrt(1 - rho^2) the inner expectation is phi itself
S_DEGENERATE = 1e-12
#: elements of the inner (nodes x intervals) arrays per chunk
CHUNK = 1 << 17
#: cached pair values per table
PAIR_CACHE = 1 << 16

_GL_X, _GL_W = np.polynomial.legendre.leggauss(N_GL)
_SQRT_2PI = math.sqrt(2 * math.pi)


@dataclass(frozen=True)
class _Pieces:
    """Breakpoints (B,) and ascending coefficients (B + 1, D + 1) of phi and phi' on the B + 1 intervals."""

    bps: Array
    coef: Array
    dcoef: Array


def _normal(z: Array) -> Array:
    return np.exp(-0.5 * z * z) / _SQRT_2PI


def _panels(edges: Array) -> tuple[Array, Array]:
    """Gauss--Legendre nodes and weights on the panels between sorted ``edges``."""
    edges = np.unique(edges)
    lo, hi = edges[:-1], edges[1:]
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    half, mid = (hi - lo) / 2, (hi + lo) / 2
    z = (mid[:, None] + half[:, None] * _GL_X).reshape(-1)
    w = (half[:, None] * _GL_W).reshape(-1)
    return z, w


def _horner(coef: Array, idx: Array, x: Array) -> Array:
    c = coef[idx]
    out = c[..., -1].copy()
    for k in range(coef.shape[1] - 2, -1, -1):
        out *= x
        out += c[..., k]
    return out


class PiecewiseDuals:
    """The dual kernels of one checked piecewise-polynomial activation."""

    def __init__(self, checked: CheckedActivation) -> None:
        if not checked.piecewise:
            raise ParameterError("activation", f"{checked.expr} is smooth: use the tabulated dual kernels")
        if not checked.polynomial:
            raise ParameterError("activation", f"{checked.expr}: the piecewise route needs polynomial pieces between "
                                               "the breakpoints (e.g. sign, Heaviside, abs, Max, floor, Piecewise "
                                               "of polynomials); non-polynomial pieces are not supported")
        self.checked = checked
        self.expr = checked.expr
        self._cache: dict[float, _Pieces] = {}

    # ---------------------------------------------------------------- pieces
    def max_variance(self) -> float:
        """Largest variance with at most MAX_BREAKPOINTS breakpoints in the window (inf without a lattice)."""
        if not self.checked.lattices:
            return math.inf
        density = sum(1.0 / p for p, _ in self.checked.lattices)
        return (MAX_BREAKPOINTS / (2 * L_OUT * density)) ** 2 * 0.95

    def pieces(self, d_max: float) -> _Pieces:
        """The pieces on the window |x| <= L_OUT sqrt(d_max) (rounded up to a power of two)."""
        if not self.checked.lattices:
            key = math.inf
        else:
            if d_max > self.max_variance():
                raise ParameterError("activation", f"{self.expr} has more than {MAX_BREAKPOINTS} breakpoints within "
                                     f"{L_OUT:g} standard deviations at the variance {d_max:.6g}; the piecewise route "
                                     f"supports variances up to {self.max_variance():.4g} for it (use smaller "
                                     "sigma_w2, sigma_b2, inputs or depth)")
            key = 2.0 ** math.ceil(math.log2(max(L_OUT * math.sqrt(d_max) + 2, 1.0)))
        if key not in self._cache:
            self._cache[key] = self._build(key)
        return self._cache[key]

    def _build(self, half: float) -> _Pieces:
        bps = self.checked.breakpoints_in(-half, half) if math.isfinite(half) else np.array(self.checked.breakpoints)
        edges = [-math.inf, *bps.tolist(), math.inf]
        polys = []
        for lo, hi in zip(edges[:-1], edges[1:]):
            mid = ((lo + hi) / 2 if math.isfinite(lo) and math.isfinite(hi)
                   else hi - 1 if math.isfinite(hi) else lo + 1 if math.isfinite(lo) else 0.0)
            piece = sp.expand(self.checked.piece(mid))
            poly = sp.Poly(piece, X)
            if poly.degree() > MAX_DEGREE:
                raise ParameterError("activation", f"{self.expr}: a piece of degree {poly.degree()} (at most "
                                                   f"{MAX_DEGREE})")
            polys.append([float(c) for c in reversed(poly.all_coeffs())])
        D = max(len(p) for p in polys)
        coef = np.zeros((len(polys), D))
        for i, p in enumerate(polys):
            coef[i, :len(p)] = p
        dcoef = np.zeros_like(coef)
        dcoef[:, :-1] = coef[:, 1:] * np.arange(1, D)
        return _Pieces(np.asarray(bps, dtype=float), coef, dcoef)

    # ---------------------------------------------------------------- one dimension
    def diagonal(self, d) -> tuple[Array, Array]:
        """(E[phi(u)^2], E[phi'(u)^2]) for u ~ N(0, d); the second is +inf for a discontinuous phi."""
        arr = _variances("d", d)
        values, inverse = np.unique(arr.reshape(-1), return_inverse=True)
        m1, m2 = np.empty(values.size), np.empty(values.size)
        pc = self.pieces(float(values.max())) if values.size else None
        for i, dv in enumerate(values.tolist()):
            assert pc is not None
            z, w, u = self._diag_nodes(pc, dv)
            idx = np.searchsorted(pc.bps, u)
            m1[i] = np.dot(w, _horner(pc.coef, idx, u) ** 2)
            m2[i] = math.inf if self.checked.discontinuous else np.dot(w, _horner(pc.dcoef, idx, u) ** 2)
        return m1[inverse].reshape(arr.shape), m2[inverse].reshape(arr.shape)

    def price_diag(self, d) -> Array:
        """d E[phi(u)^2] / dK at K = d: E[phi(u)^2 (u^2 / K - 1)] / (2 K) (finite also for jumps)."""
        arr = _variances("d", d)
        values, inverse = np.unique(arr.reshape(-1), return_inverse=True)
        out = np.empty(values.size)
        pc = self.pieces(float(values.max())) if values.size else None
        for i, dv in enumerate(values.tolist()):
            assert pc is not None
            z, w, u = self._diag_nodes(pc, dv)
            phi = _horner(pc.coef, np.searchsorted(pc.bps, u), u)
            out[i] = np.dot(w, phi * phi * (z * z - 1)) / (2 * dv)
        return out[inverse].reshape(arr.shape)

    @staticmethod
    def _diag_nodes(pc: _Pieces, d: float) -> tuple[Array, Array, Array]:
        a = math.sqrt(d)
        inner = pc.bps / a
        edges = np.concatenate([np.linspace(-L_OUT, L_OUT, int(2 * L_OUT) + 1), inner[np.abs(inner) < L_OUT]])
        z, w = _panels(edges)
        return z, w * _normal(z), a * z

    # ---------------------------------------------------------------- pairs
    def pair(self, d_a: float, d_b: float, rho: float, want_g: bool = True) -> tuple[float, float]:
        """(E[phi(u) phi(v)], E[phi'(u) phi'(v)]) at one (d_a, d_b, rho); g is NaN if not wanted or not finite."""
        pc = self.pieces(max(d_a, d_b))
        rho = min(1.0, max(-1.0, rho))
        a, b = math.sqrt(d_a), math.sqrt(d_b)
        s = math.sqrt(max(0.0, (1.0 - rho) * (1.0 + rho)))
        base = [np.linspace(-L_OUT, L_OUT, int(2 * L_OUT) + 1), pc.bps / a]
        degenerate = s <= S_DEGENERATE
        if rho != 0.0:
            zs = pc.bps / (b * rho)
            zs = zs[np.abs(zs) < L_OUT + 1]
            base.append(zs)
            eps = s / abs(rho)
            if not degenerate and eps < 1.0 and zs.size:
                k = np.arange(-2, math.ceil(math.log2(1.0 / eps)) + 1)
                steps = eps * 2.0 ** k
                base += [(zs[:, None] + steps).reshape(-1), (zs[:, None] - steps).reshape(-1)]
        edges = np.concatenate(base)
        edges = np.clip(edges, -L_OUT, L_OUT)
        z, w = _panels(edges)
        w = w * _normal(z)
        u = a * z
        ia = np.searchsorted(pc.bps, u)
        g_wanted = want_g and not self.checked.discontinuous
        sets = [pc.coef] + ([pc.dcoef] if g_wanted else [])
        results = []
        for coef in sets:
            phi_a = _horner(coef, ia, u)
            if degenerate:
                v = b * rho * z
                inner = _horner(coef, np.searchsorted(pc.bps, v), v)
            else:
                inner = _inner(coef, pc.bps, b * rho * z, b * s)
            results.append(float(np.dot(w, phi_a * inner)))
        return results[0], (results[1] if g_wanted else math.nan)


def _inner(coef: Array, bps: Array, m: Array, sigma: float) -> Array:
    """E[p(v)] for v ~ N(m, sigma^2), p the piecewise polynomial (coef on the intervals between bps), exactly."""
    n, nint, D = m.size, coef.shape[0], coef.shape[1]
    out = np.empty(n)
    lo_edge = np.concatenate([[-np.inf], bps])
    hi_edge = np.concatenate([bps, [np.inf]])
    rows = max(1, CHUNK // nint)
    for s0 in range(0, n, rows):
        mm = m[s0:s0 + rows, None]
        alpha = (lo_edge - mm) / sigma
        beta = (hi_edge - mm) / sigma
        # Taylor coefficients of each interval's polynomial around m: q[..., k]
        q = np.broadcast_to(coef, (mm.shape[0], nint, D)).copy()
        for k in range(D - 1):
            for i in range(D - 2, k - 1, -1):
                q[..., i] += mm * q[..., i + 1]
        na, nb = _normal(alpha), _normal(beta)  # 0 at +-inf
        j0 = np.where(alpha > 0, ndtr(-alpha) - ndtr(-beta), ndtr(beta) - ndtr(alpha))
        total = q[..., 0] * j0
        if D > 1:
            j1 = na - nb
            total += q[..., 1] * sigma * j1
            jm2, jm1 = j0, j1
            fa = np.where(np.isfinite(alpha), alpha, 0.0)
            fb = np.where(np.isfinite(beta), beta, 0.0)
            pa, pb = np.ones_like(fa), np.ones_like(fb)  # alpha^(k-1)
            for k in range(2, D):
                pa, pb = pa * fa, pb * fb
                jk = (k - 1) * jm2 + pa * na - pb * nb
                total += q[..., k] * sigma**k * jk
                jm2, jm1 = jm1, jk
        out[s0:s0 + rows] = total.sum(axis=1)
    return out


def _variances(name: str, d) -> Array:
    arr = np.asarray(d, dtype=float)
    if arr.size and not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
        raise ParameterError(name, "a variance is not finite and > 0 (the kernel overflowed float64 or "
                                   "underflowed to 0)")
    return arr


@functools.lru_cache(maxsize=64)
def _duals(key: str) -> PiecewiseDuals:
    return PiecewiseDuals(check_activation(sp.sympify(key)))


def duals(expr) -> PiecewiseDuals:
    """The (cached) PiecewiseDuals of an activation (text or SymPy expression)."""
    return _duals(cache_key(check_activation(expr).expr))


# --------------------------------------------------------------------------- the dual_tables interface
class PairTable:
    """E[phi phi] and E[phi' phi'] as functions of rho at fixed (d_a, d_b) (the interface of
    ``dual_tables.DualTable``): distinct rho values are computed once (cached)."""

    def __init__(self, pd: PiecewiseDuals, d_a: float, d_b: float) -> None:
        self.pd, self.d_a, self.d_b = pd, d_a, d_b
        pd.pieces(max(d_a, d_b))  # refuses a too-large variance now
        self._values: OrderedDict[float, tuple[float, float]] = OrderedDict()

    def both(self, rho, out_f: Array, out_g: Array | None = None) -> tuple[Array, Array | None]:
        r = np.clip(np.asarray(rho, dtype=float), -1.0, 1.0)
        values, inverse = np.unique(r.reshape(-1), return_inverse=True)
        f, g = np.empty(values.size), np.empty(values.size)
        for i, v in enumerate(values.tolist()):
            if v != v:  # NaN
                f[i] = g[i] = math.nan
                continue
            hit = self._values.get(v)
            if hit is None:
                hit = self.pd.pair(self.d_a, self.d_b, v)
                self._values[v] = hit
                if len(self._values) > PAIR_CACHE:
                    self._values.popitem(last=False)
            f[i], g[i] = hit
        out_f[...] = f[inverse].reshape(r.shape)
        if out_g is not None:
            out_g[...] = g[inverse].reshape(r.shape)
        return out_f, out_g

    def mean_phi_phi(self, rho, out: Array) -> Array:
        return self.both(rho, out)[0]

    def mean_dphi_dphi(self, rho, out: Array) -> Array:
        self.pd.checked.require_finite_dphi()
        self.both(rho, np.empty_like(out), out)
        return out


@functools.lru_cache(maxsize=128)
def _table(key: str, d_a: float, d_b: float) -> PairTable:
    return PairTable(_duals(key), d_a, d_b)


def build_table(expr, d_a: float, d_b: float, rtol: float = 1e-10) -> PairTable:
    """The table of one (d_a, d_b) (``rtol`` is accepted for the interface; the route gives ~1e-12)."""
    _variances("d_a, d_b", [d_a, d_b])
    return _table(cache_key(check_activation(expr).expr), float(d_a), float(d_b))


def mean_phi_phi_general(expr, K_aa, K_bb, K_ab, out_phi: Array, out_dphi: Array | None = None,
                         **_ignored) -> tuple[Array, Array | None]:
    """E[phi(u) phi(v)] (and E[phi'(u) phi'(v)], NaN for a discontinuous phi) elementwise over arrays."""
    K_aa, K_bb, K_ab = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (K_aa, K_bb, K_ab)))
    _variances("K_aa, K_bb", np.concatenate([K_aa.reshape(-1), K_bb.reshape(-1)]))
    key = cache_key(check_activation(expr).expr)
    pairs = np.stack([K_aa.reshape(-1), K_bb.reshape(-1)], axis=1)
    uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    rho = (K_ab.reshape(-1) / np.sqrt(pairs[:, 0] * pairs[:, 1]))
    f = np.empty(rho.size)
    g = np.empty(rho.size)
    for j, (da, db) in enumerate(uniq.tolist()):
        sel = np.nonzero(inverse == j)[0]
        rf, rg = np.empty(sel.size), np.empty(sel.size)
        _table(key, da, db).both(rho[sel], rf, rg)
        f[sel], g[sel] = rf, rg
    out_phi[...] = f.reshape(out_phi.shape)
    if out_dphi is not None:
        out_dphi[...] = g.reshape(out_dphi.shape)
    return out_phi, out_dphi


@dataclass(frozen=True)
class GeneralData:
    """The general path's per-layer data (the interface of ``dual_tables.general_data``): the distinct diagonal
    values and the activation's key (pair values are computed on demand by PairTable, cached per pair)."""

    key: str
    values: Array

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes)


def general_data(expr, values, rtol: float = 1e-10, cache: bool = True) -> GeneralData:
    """The data of the general path for the diagonal values ``values`` (deduplicated, sorted)."""
    vals = np.unique(_variances("K_aa", np.asarray(values, dtype=float).reshape(-1)))
    key = cache_key(check_activation(expr).expr)
    _duals(key).pieces(float(vals.max()))  # refuses a too-large variance now
    return GeneralData(key, vals)


def mean_phi_phi_strip(data: GeneralData, ia: Array, ib: Array, rho, out_phi: Array,
                       out_dphi: Array | None = None) -> tuple[Array, Array | None]:
    """E[phi(u) phi(v)] (and E[phi' phi']) for a strip: rows with diagonal values ``data.values[ia]``, columns
    ``data.values[ib]``, correlations ``rho`` of shape (ia.size, ib.size)."""
    da = data.values[np.asarray(ia)][:, None]
    db = data.values[np.asarray(ib)][None, :]
    rho = np.asarray(rho, dtype=float)
    K_ab = rho * np.sqrt(da) * np.sqrt(db)
    return mean_phi_phi_general(sp.sympify(data.key), np.broadcast_to(da, rho.shape), np.broadcast_to(db, rho.shape),
                                K_ab, out_phi, out_dphi)


def diagonal(expr, d) -> tuple[Array, Array]:
    """(E[phi(u)^2], E[phi'(u)^2]) for u ~ N(0, d) (the second +inf for a discontinuous phi)."""
    return duals(expr).diagonal(d)


def price_diag(expr, d) -> Array:
    """d E[phi(u)^2] / dK at K = d."""
    return duals(expr).price_diag(d)


__all__ = ["PiecewiseDuals", "PairTable", "GeneralData", "build_table", "general_data", "mean_phi_phi_strip",
           "mean_phi_phi_general", "diagonal", "price_diag", "duals",
           "L_OUT", "MAX_BREAKPOINTS"]
