"""Dual kernels of any smooth activation at scale: E[phi(u) phi(v)] and E[phi'(u) phi'(v)].

For (u, v) ~ N(0, [[d_a, c], [c, d_b]]), c = rho sqrt(d_a d_b), and an activation phi given as a SymPy
expression in ``resprop.derive.activations.x``, this module evaluates

    f(rho) = E[phi(u) phi(v)],        g(rho) = E[phi'(u) phi'(v)]      (g = f' / sqrt(d_a d_b), Price)

for millions of pairs without the O(P^2 m^2) tensor quadrature of ``generated/gauss_hermite.py``.

Method
------
*Hermite (Mehler) series.*  With the normalised probabilists' Hermite polynomials h_k = He_k / sqrt(k!) and
a_k(d) = E[phi(sqrt(d) z) h_k(z)], z ~ N(0, 1),

    f(rho) = sum_k a_k(d_a) a_k(d_b) rho^k,
    g(rho) = sum_k (k + 1) a_{k+1}(d_a) a_{k+1}(d_b) rho^k / sqrt(d_a d_b)

(the second is the first differentiated: the Hermite coefficients of phi'(sqrt(d) z) are
sqrt(k + 1) a_{k+1}(d) / sqrt(d)).  Since sum_k a_k(d)^2 = E[phi(u)^2] =: A^2 (Parseval), the tail after K terms
obeys, for |rho| <= 1 and by Cauchy--Schwarz,

    |f - f_K| <= |rho|^(K+1) sqrt(T_a T_b),      T_a = A^2 - sum_{k<=K} a_k(d_a)^2            (*)

and likewise for g with T'_a = E[phi'(u)^2] - sum_{k<=K} (k + 1) a_{k+1}^2 / d_a.  (*) is rigorous given the
coefficients, costs nothing and holds on all of [-1, 1]: the number of terms K is raised along
``K_LADDER`` until sqrt(T_a T_b) <= tol A B for both f and g.  It also explains why a global polynomial is slow
for tanh at large d: phi(sqrt(d) z) is analytic only in the strip |Im z| < pi / (2 sqrt d), so a_k decays like
exp(-pi sqrt(2k) / (2 sqrt d)) and f is C-infinity but not analytic at rho = +-1 (tanh at d = 20 needs K ~ 2000).

*Quadrature.*  a_k(d) and A^2 are computed by the trapezoidal rule on a uniform z-grid, which converges
geometrically for integrands analytic in a strip: the error is the Fourier transform of the integrand at 2 pi/h
(Poisson summation).  The step is set from the *bandwidth* Omega of the activation, measured once per expression
(the angular frequency above which the spectrum of a windowed phi and phi' is < 1e-14 of its L1 norm, one FFT),
plus the bandwidth sqrt(K + 1/2) + 8 of h_k(z) exp(-z^2/2) and 8.6 of the Gaussian.  Every rule is computed on a
grid of half that step, and the two interleaved coarse rules (even / odd nodes) give an error estimate (their
difference is the leading aliasing term); a too-large estimate halves the step.  ``diagonal`` is the same rule
for E[phi^2] and E[phi'^2] (bandwidth 2 Omega sqrt(d) + 8.6).

*Tables (equal or fixed diagonals, part A).*  For fixed (d_a, d_b), f and g are interpolated in
theta = arccos(rho) on M uniform intervals by cubic polynomials through the 4 Chebyshev points of each interval.
The map theta = arccos(rho) is the grading toward rho = +-1: f(1 - e) is Gevrey-1 in e (derivatives growing
like n!^2 for tanh) while f(cos theta) is Gevrey-1/2 in theta, so uniform intervals in theta resolve the ends
(uniform in rho, tanh at d = 20 needs more than 4096 cubic intervals instead of ~2000).  M comes from an
estimate of the fourth theta derivative (the series differentiated term by term: d^2/dtheta^2 C^k =
k (k - 1) C^(k-2) - k^2 C^k, C = cos theta), then the interpolant is checked a posteriori against the series at
the midpoint of every interval, where the node polynomial prod(theta - theta_j) attains its maximum
|omega| = 2 (w/4)^4 and the remainder F''''(xi) omega / 4! is therefore largest; M grows until twice the worst
midpoint error is below rtol / 4.  The stored bound is

    error_bound = 2 max_midpoints |p - f_K| / scale + sqrt(T_a T_b) / scale + quadrature estimate + 5e-15

(scale = sqrt(E[phi(u)^2] E[phi(v)^2]), resp. with phi'), per function in ``error_bound_phi`` /
``error_bound_dphi`` and their maximum in ``error_bound`` (~1.1e-11 - 1.3e-11 at the default rtol = 1e-10).
The tail term is rigorous; the interpolation term is the measured remainder at its extremal points with a factor
2 for the variation of F'''' inside an interval (an a-posteriori estimate, not a proof).  Measured against
mpmath (closed forms, or 2-D Gauss--Legendre at dps 25) for tanh, SiLU, GELU, erf, sin(x) + x^2/10 and
x exp(-x^2/2), d in [1e-3, 20] (equal and unequal), the error is <= 7.5e-12 and below the stored bound.  If
K_LADDER[-1] terms do not certify all of [-1, 1] (very steep activations or d >> 20), the nodes with
|rho| > rho_s, rho_s^(K+1) sqrt(T_a T_b) = tol, are computed by the pair quadrature below (slow but rare).

Evaluation: rho is clipped into [-1, 1], s = arccos(rho) M / pi, i = floor(s), t = s - i; the cubic of interval
i in t (coefficients of f and g packed as one complex array, so that one ``np.take`` serves both) is evaluated by
Horner.  Cost per element of ``both``: clip, arccos, 4 arithmetic passes, 4 complex gathers, 3 complex
multiply-adds and 2 copies: ~6 ns per element on a 32k block (~8x np.arcsin, which NumPy 2 vectorises to
0.75 ns; each gather alone costs ~0.5 ns), ~4 ns (~5x) for one function with real coefficients.  Evaluation is
thread safe (per-thread scratch buffers) and works in blocks of ``BLOCK`` elements.  Cost per table: the
coefficients (a matrix product with a cached (K x n_z) Hermite matrix, n_z ~ 100-700), the series at 5 M points
(baby-step giant-step, O(M K)) and the fit: ~0.6-1.5 ms for tanh at d ~ 1 (K ~ 120, M ~ 450; a depth-50
network's 50 tables take ~80 ms), ~10-70 ms at d = 20 (K ~ 2200, M ~ 2000); the first table of an activation
also compiles it (SymPy, ~0.2 s).  Tables are cached (LRU within ``TABLE_CACHE_BYTES``) by (expression, d_a, d_b, rtol).

*General path (unequal diagonals, part C).*  ``mean_phi_phi_general`` (any broadcast arrays) and
``mean_phi_phi_strip`` (a block of rows x columns, what the kernel engine calls) read a `_DiagData` built by
``general_data`` for one set of diagonal values: the tables of every pair when there are at most
``MAX_TABLE_PAIRS`` pairs, else the Hermite coefficients of every value, computed together on one grid, with one
K for which every value's relative tails T / A^2 are <= tol (tol = rtol / 50; then every pair is certified on all
of [-1, 1]).  The data is immutable once built: the kernel engine builds it once per layer, for all P diagonal
values, before the strips run, and passes it to them, so that no thread ever looks up a cache entry another may
evict (``_DIAG_CACHE`` only keeps whole data objects of recent ``mean_phi_phi_general`` calls, by reference).  The
series is summed per element with the smallest ladder K certified by (*) for that element's |rho| (for f and g: the
result does not depend on whether g is wanted), found from the bottom of the ladder up on the elements not yet
certified.  Two backends give the same bits per element (``SERIES_BACKEND``): the compiled one
(`resprop.numeric.engine.mehler_compiled`, Numba; the default where it imports) finds each element's level from
per-value thresholds on |rho|, sorts a row's elements by level and sums groups of one level by Horner, ~30-40 ns
per element at a mean K_e ~ 20 (about half of it the level and the sort); the NumPy one (the reference) sorts
elements by K and sums by Horner on the active prefix in passes of ``SERIES_BLOCK`` elements, ~2.3 ns a term plus
~60 ns per element.  Elements that K_LADDER[-1] terms
cannot certify get the conditional 1-D reduction f = E_z1[phi(a z1) E_z2[phi(b rho z1 + b s z2)]],
s = sqrt(1 - rho^2), by trapezoidal rules in z1 and z2 (cost ~ n1 n2 evaluations per element, grids from the
bandwidth).  Everything runs in chunks whose temporaries stay below ``byte_budget`` (broadcast inputs are indexed
without being materialised); the persistent state is the coefficient matrix (n_diag x K doubles).  The result of
an element depends only on the element and the data, not on the chunking.  Measured error vs mpmath <= 3e-13.

The coefficients of many values (>= ``variance_interpolation.MIN_VALUES``) are not computed at every value: they
are analytic in log d, so they are computed on nested Chebyshev--Lobatto nodes in log d (17, 33, 65, ...) and
interpolated once the coarser interpolant predicts the new nodes to COEFFICIENT_INTERPOLATION_TOL = 1e-14 of
sqrt(E[phi^2]) (`resprop.numeric.engine.variance_interpolation`; tanh on [0.15, 4.2]: 65 nodes for 1000 values);
the tails are then raised by the interpolation's allowance, 2 tau A sum_k |a_k| (resp. sum_k k |a_k|), so that
the certification stays an upper bound.  E[phi^2] and E[phi'^2] of many values are interpolated the same way
(MOMENT_INTERPOLATION_TOL = 1e-14).  The K of a set of values is first found on ``K_PROBE`` of them.
Cost: tanh, P = 1000 Gaussian inputs in dim 10 (diagonals in [0.2, 4.2], median |rho| 0.2): K ~ 330-470,
mean K_e ~ 24, ~12 ms per layer for the data of the 1000 values (was ~30 ms for the coefficients and 10 ms for the
moments, evaluated at every value).

``diagonal(expr, d)`` returns E[phi(u)^2] and E[phi'(u)^2] for an array of variances (deduplicated), by the
graded Gauss--Legendre rule of `resprop.generated.gauss_hermite` (panels in u at the Gaussian's and the
activation's scales): ~1e-15 relative against mpmath for d in 1e-8 .. 1e8 (tests/test_variance_accuracy.py), a
ParameterError naming ``d`` where the refined rule disagrees (activations oscillating at large |x|).  The general
path is unchanged: its series and the trapezoidal pair quadrature still scale with sqrt(d) and are practical
(and measured) only up to d ~ 20 - 50.

*Tables at large variance (max(d_a, d_b) > D_SERIES = 20).*  The full series is taken only to K_SERIES_LARGE =
512 terms (certified for |rho| <= rho_s ~ 0.95 whatever d is: rho_s^513 <= tol), and 1 - |rho| < 1 - rho_s is
covered by the windows of `resprop.numeric.engine.heat_smoothing`: Mehler series in the correlation r of the
heat-smoothed activation about rho0 = 1 - Delta, whose length depends on d Delta, not on d (~50-130 terms a
window, log_4(d) windows; see that module).  The windows are checked against each other and against the series at
+-rho_s (the disagreement enters the bound; a ParameterError naming ``d_a`` if it exceeds rtol, e.g. sin^2 beyond
d ~ 30 - 100).  The cubic intervals are uniform in s = log((eps + theta) / (eps + pi - theta)), eps = 1/sqrt(d)
(the boundary layers at theta = 0, pi have width ~ 1/sqrt(d)), so M grows like log d (tanh: 785 at d = 20, 1152
at 200, 1669 at 5000, instead of 450 sqrt(d)); evaluation adds one log and four arithmetic passes per element
(``both``: 8.8 ns per element against 7.6 ns uniform, 2^20 elements, one thread).
Cost per table (tanh, CPU time, one BLAS thread): 2.6 ms at d = 1, 13 ms at 20, 19 ms at 50, 32 ms at 200, 64 ms
at 1000, 57-82 ms at 3000 (tanh, atan; before: 1.1 s at 50, 10 s at 100, 31 s at 200); the windows dominate, the
one at the largest Delta most (its trapezoidal z-rule has ~ Omega sqrt(d Delta) nodes).  Measured
against mpmath (tests/test_large_variance_tables.py; rho = 0, 0.5, -0.9, +-0.99, +-(1 - 1e-6)) for tanh,
softplus, SiLU, atan and sin^2 at d = 1e-8 .. 1000: error <= ~1e-11 and below the stored bound.  ``build_table``
refuses d_a or d_b > D_TABLE_MAX = 5000 up front (the series coefficients' trapezoidal rule and the first window
still grow like sqrt(d); graded rules in z would lift this).  The kernel engine does not build one such table per
layer: `resprop.numeric.engine.table_family` interpolates the equal-variance tables across log d from anchors
built by ``large_variance_parts`` (one per quarter octave, cached), which makes a deep network's tables cost
~2 per quarter octave of variance instead of one per layer.
"""
from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import sympy as sp

from resprop.derive.activations import x as X
from resprop.numeric.engine import heat_smoothing
from resprop.numeric.engine.bytes_lru import BytesLRU, cached
from resprop.numeric.engine.validation import ParameterError

Array = np.ndarray
Fn = Callable[[Array], Array]

#: ladder of series lengths (the smallest certified one is used)
K_LADDER = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
#: local polynomial degree of the tables (odd: the interval midpoint is an extremum of the node polynomial)
DEGREE = 3
#: elements per evaluation block (the scratch of a block stays in L2)
BLOCK = 32768
#: bytes of cached tables (`bytes_lru`: a count would thrash when a deep run needs one table per layer, ~20-40 KiB
#: each, more than the count holds)
TABLE_CACHE_BYTES = 64 << 20
#: at most this many distinct (d_a, d_b) pairs go through tables in the general path
MAX_TABLE_PAIRS = 16
#: half-width (in standard deviations) of the z-grids: Hermite coefficients, diagonal moments, pair quadrature
L_HERMITE = 13.0
L_DIAG = 10.0
L_PAIR = 10.0
#: bandwidth of exp(-z^2/2) at the 1e-16 level, and the safety factor on every step
OMEGA_GAUSS = 8.6
MARGIN = 1.15
#: largest number of table intervals
M_MAX = 1 << 15
#: largest variance of a table (``build_table`` refuses beyond it): the trapezoidal z-rules of the series
#: coefficients and of the first window grow like sqrt(d); measured against mpmath up to d = 1000
#: (tests/test_large_variance_tables.py)
D_TABLE_MAX = 5000.0
#: above this variance a table takes the series only to K_SERIES_LARGE terms (certified for |rho| <= rho_s >= 0.95)
#: and the windows of `heat_smoothing` near |rho| = 1 (instead of the pair quadrature)
D_SERIES = 20.0
#: first number of graded intervals (large d; the a-posteriori check raises it)
M_GRADED = 512
K_SERIES_LARGE = 512

_EPS = float(np.finfo(float).eps)
_SQRT_2PI = math.sqrt(2 * math.pi)


# =========================================================================== D. the activation
@dataclass(frozen=True)
class Activation:
    """phi and phi' as vectorised NumPy callables, and the bandwidth of phi (see the module docstring)."""

    expr: sp.Expr
    phi: Fn
    dphi: Fn
    bandwidth: float
    key: str


def _lambdify(e: sp.Expr) -> Fn:
    raw = sp.lambdify(X, e, modules=["scipy", "numpy"])
    far: list = []  # the asymptotic series at +-oo, found the first time the printed form overflows

    def fn(z: Array) -> Array:
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            r = np.asarray(raw(z), dtype=float)
        if r.shape != np.shape(z):
            r = np.broadcast_to(r, np.shape(z)).copy()
        bad = ~np.isfinite(r) & np.isfinite(z)
        if bad.any():  # e.g. log(1 + exp(x)) at x > 709: SymPy's series at +-oo (derive.codegen.far_field_series)
            if not far:
                from resprop.derive.codegen import far_field_series

                try:
                    series = far_field_series(e)
                except ValueError:
                    series = None
                far.append(None if series is None else
                           tuple(sp.lambdify(X, t, modules=["scipy", "numpy"]) for t in series))
            if far[0] is not None:
                r = np.array(r, dtype=float)
                zz = np.asarray(z, dtype=float)
                with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                    for side, g in ((zz > 0, far[0][0]), (zz < 0, far[0][1])):
                        m = bad & side
                        if m.any():
                            r[m] = np.asarray(g(zz[m]), dtype=float) + 0 * zz[m]
        return r

    return fn


def _normalise(expr: sp.Expr | str) -> sp.Expr:
    if isinstance(expr, str):
        if "__" in expr:
            raise ParameterError("activation", f"not a SymPy expression in x: {expr!r}")
        expr = sp.sympify(expr, locals={"x": X})
    if not isinstance(expr, sp.Expr):
        raise ParameterError("activation", f"must be a SymPy expression in x, got {expr!r}")
    plain = sp.Symbol("x")
    if plain in expr.free_symbols:
        expr = expr.subs(plain, X)
    if not expr.free_symbols <= {X}:
        raise ParameterError("activation", f"expression must depend on x only, got {expr}")
    return expr


def activation(expr: sp.Expr | str) -> Activation:
    """The compiled activation of a SymPy expression in x (cached on ``sp.srepr``), checked by
    ``activation_check.check_activation`` (piecewise ones belong to ``piecewise_duals``).

    Cached on the expression itself as well: the kernel engine asks once per layer, and normalising and checking
    the expression each time was SymPy work per layer (tanh, P = 200, L = 50: ~20 KiB of the call's peak above its
    output, and Python time)."""
    try:
        return _activation_of(expr)
    except TypeError:  # an unhashable argument: the ParameterError of the uncached route
        return _activation_uncached(expr)


@functools.lru_cache(maxsize=64, typed=True)
def _activation_of(expr: sp.Expr | str) -> Activation:
    return _activation_uncached(expr)


def _activation_uncached(expr: sp.Expr | str) -> Activation:
    from resprop.numeric.engine.activation_check import cache_key, check_activation

    checked = check_activation(_normalise(expr))
    if checked.piecewise:
        raise ParameterError("activation", f"{checked.expr} is piecewise (breakpoints at "
                                           f"{list(checked.breakpoints) or 'a lattice'}): the Hermite tables need a "
                                           "smooth phi; piecewise activations go through "
                                           "resprop.numeric.engine.piecewise_duals (resprop.kernel does this)")
    return _activation(cache_key(checked.expr))


@functools.cache
def _activation(key: str) -> Activation:
    expr = sp.sympify(key)
    d1 = sp.diff(expr, X)
    phi, dphi = _lambdify(expr), _lambdify(d1)
    probe = np.linspace(-40.0, 40.0, 801)
    for name, fn in (("phi", phi), ("phi'", dphi)):
        v = fn(probe)
        if not np.all(np.isfinite(v)):
            raise ParameterError("activation", f"{name} of {expr} is not finite on [-40, 40]")
    return Activation(expr=expr, phi=phi, dphi=dphi, bandwidth=_bandwidth((phi, dphi)), key=key)


def _bandwidth(fns: tuple[Fn, ...]) -> float:
    """Angular frequency above which the spectrum of phi(x) exp(-x^2/128) (and of phi') is < 1e-14 of its L1
    norm: one FFT on |x| <= 85 with step 1/48 (Nyquist 151)."""
    n, h = 8192, 1.0 / 48
    xs = (np.arange(n) - n // 2) * h
    window = np.exp(-xs * xs / 128.0)
    omega = 2 * np.pi * np.fft.rfftfreq(n, h)
    top = 1.0
    for fn in fns:
        g = fn(xs) * window
        l1 = float(np.abs(g).sum() * h)
        if l1 == 0.0:
            continue
        spec = np.abs(np.fft.rfft(g)) * h
        above = np.nonzero(spec > 1e-14 * l1)[0]
        if above.size and above[-1] >= 0.85 * spec.size:
            raise ParameterError("activation", "phi or phi' is not smooth enough for the tabulated dual kernels "
                                               "(its spectrum is not below 1e-14 of its norm at |omega| ~ 130); "
                                               "use a closed form (relu) or a smooth activation")
        if above.size:
            top = max(top, float(omega[above[-1]]))
    return top


# =========================================================================== quadrature helpers
def _ladder(n: float, base: int = 8) -> int:
    """Round n up to the ladder base * 2^(j/4) (so that grids and their caches are reused)."""
    return int(_ladder_array(np.array([n]), base)[0])


def _ladder_array(n: Array, base: int = 8) -> Array:
    j = np.maximum(0, np.ceil(4 * np.log2(np.maximum(n, base) / base) - 1e-9))
    return np.ceil(base * 2 ** (j / 4)).astype(np.int64)


def _half_grid(L: float, omega: float) -> tuple[int, float]:
    """Number of nonnegative fine nodes and fine step of a symmetric rule on [-L, L] whose *coarse* rule (every
    second node) has step 2 pi / (MARGIN omega)."""
    n = _ladder(L * MARGIN * omega / np.pi)
    return n, L / n


@functools.lru_cache(maxsize=24)
def _hermite_matrix(n: int, h: float, K: int) -> tuple[Array, Array]:
    """(G_even, G_odd): G[k, j] = w_j h_k(z_j) for even and for odd k, on the nonnegative nodes z_j = j h,
    j = 0..n, with w_j = h phi_N(z_j) halved at z = 0 (for the folded rule sum_j w_j (F(z_j) + F(-z_j))).
    Rows by the stable three-term recurrence h_{k+1} = (z h_k - sqrt(k) h_{k-1}) / sqrt(k + 1)."""
    z = np.arange(n + 1) * h
    w = h * np.exp(-z * z / 2) / _SQRT_2PI
    w[0] /= 2
    G = np.empty((K + 1, n + 1))
    G[0] = w
    if K >= 1:
        G[1] = z * w
    for k in range(1, K):
        np.multiply(z, G[k], out=G[k + 1])
        G[k + 1] -= math.sqrt(k) * G[k - 1]
        G[k + 1] /= math.sqrt(k + 1)
    ge, go = np.ascontiguousarray(G[0::2]), np.ascontiguousarray(G[1::2])
    ge.setflags(write=False)
    go.setflags(write=False)
    return ge, go


def _hermite_coefficients(act: Activation, d: Array, K: int, estimate: bool = True) -> tuple[Array, Array]:
    """a_k(d) for k = 0..K (rows: the values of d) and, if ``estimate``, an estimate of their quadrature error
    (per d: the norm over k of half the difference of the two interleaved coarse rules; else zeros)."""
    d = np.atleast_1d(np.asarray(d, dtype=float))
    a_max = math.sqrt(float(d.max()))
    n, h = _half_grid(L_HERMITE, act.bandwidth * a_max + math.sqrt(K + 0.5) + 8.0)
    ge, go = _hermite_matrix(n, h, K)
    z = np.arange(n + 1) * h
    out = np.empty((d.size, K + 1))
    err = np.zeros(d.size)
    rows = max(1, (1 << 20) // (16 * (n + 1)))
    copies = 2 if estimate else 1
    for lo in range(0, d.size, rows):
        s = np.sqrt(d[lo:lo + rows])[:, None] * z
        p, m = act.phi(s), act.phi(-s)
        r = s.shape[0]
        # rows 0..r-1: the fine rule; rows r..2r-1: the coarse rule on the even nodes (weights doubled)
        ev = np.empty((copies * r, n + 1))
        od = np.empty((copies * r, n + 1))
        np.add(p, m, out=ev[:r])
        np.subtract(p, m, out=od[:r])
        if estimate:
            ev[r:], od[r:] = ev[:r], od[:r]
            ev[r:, 1::2] = 0.0
            od[r:, 1::2] = 0.0
            ev[r:] *= 2
            od[r:] *= 2
        re_, ro = ev @ ge.T, od @ go.T
        out[lo:lo + r, 0::2] = re_[:r]
        out[lo:lo + r, 1::2] = ro[:r]
        if estimate:  # coarse (even nodes) - fine = (even - odd) / 2; the estimate is |even - odd| / 2
            de, do = re_[r:] - re_[:r], ro[r:] - ro[:r]
            err[lo:lo + r] = np.sqrt(np.sum(de * de, axis=1) + np.sum(do * do, axis=1))
    return out, err


def _diag_moments(act: Activation, d: Array) -> tuple[Array, Array, Array]:
    """E[phi(u)^2], E[phi'(u)^2] for u ~ N(0, d) (d a 1-D array of distinct values > 0), and the relative error
    estimate of each (the difference to the rule with every panel halved).

    The graded Gauss--Legendre rule of `resprop.generated.gauss_hermite` in u itself (panels at the Gaussian's
    scale and graded toward the activation's features at 0): ~1e-15 relative at any d in 1e-8 .. 1e8 for a
    non-oscillating activation (tests/test_variance_accuracy.py)."""
    from resprop.generated.gauss_hermite import expect1

    d = np.asarray(d, dtype=float)

    def sq(fn: Fn) -> Fn:
        return lambda u: fn(u) ** 2

    out, err = [], np.zeros(d.size)
    for fn in (act.phi, act.dphi):
        full, fine = expect1(sq(fn), d), expect1(sq(fn), d, refined=True)
        err = np.maximum(err, np.abs(full - fine) / np.maximum(np.abs(fine), 1e-300))
        out.append(fine)
    return out[0], out[1], err


#: relative accuracy that the interpolation in log d of E[phi^2], E[phi'^2] must show before it replaces the graded
#: rule at every value (`variance_interpolation`)
MOMENT_INTERPOLATION_TOL = 1e-14


def _moments_at(act: Activation, values: Array) -> tuple[Array, Array, Array]:
    """`_diag_moments` at the sorted distinct ``values``, through interpolation in log d when it checks (many
    values); the direct rule wherever an interpolated error estimate is not below 1e-13 (so that a refusal names
    the actual variances)."""
    from resprop.numeric.engine.variance_interpolation import on_values

    def evaluate(d: Array) -> Array:
        return np.column_stack(_diag_moments(act, d))

    def scale(F: Array) -> Array:
        return np.column_stack([np.abs(F[:, 0]), np.abs(F[:, 1]), np.full(F.shape[0], np.inf)])

    F, n = on_values(evaluate, values, scale, MOMENT_INTERPOLATION_TOL)
    if n and not np.all(F[:, 2] <= 1e-13):
        F = evaluate(values)
    return F[:, 0], F[:, 1], F[:, 2]


@functools.lru_cache(maxsize=4096)
def _moments_of_one(key: str, d: float) -> tuple[float, float, float]:
    """`_moments_at` at the one variance d (activation ``key``), cached: a warm run on equal norms computes none,
    and its peak memory no longer holds the rule's temporaries (~1e3 nodes x a few arrays)."""
    m_phi, m_dphi, err = _moments_at(_activation(key), np.array([d]))
    return float(m_phi[0]), float(m_dphi[0]), float(err[0])


def diagonal(expr: sp.Expr | str, d) -> tuple[Array, Array]:
    """(E[phi(u)^2], E[phi'(u)^2]) for u ~ N(0, d), elementwise over the array ``d`` (variances > 0).

    Graded Gauss--Legendre panels in u (`_diag_moments`): relative error ~1e-15 for d in 1e-8 .. 1e8 when the
    activation does not oscillate at large |x|; a refined rule (every panel halved) checks it, and a ParameterError
    names ``d`` where the two differ by more than 1e-12.  Equal values are computed once."""
    act = activation(expr)
    arr = np.asarray(d, dtype=float)
    if arr.size and not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
        raise ParameterError("d", "variances must be finite and > 0")
    if arr.size == 1:  # the equal-norm diagonal's one value per layer: no sort
        values, inverse = arr.reshape(1), np.zeros(1, dtype=np.intp)
    else:
        values, inverse = np.unique(arr.reshape(-1), return_inverse=True)
    if values.size == 1:  # one variance (equal norms: one per layer), cached like the tables of one variance
        m_phi, m_dphi, err = (np.array([v]) for v in _moments_of_one(act.key, float(values[0])))
    else:
        m_phi, m_dphi, err = _moments_at(act, values)
    if np.any(~(err <= 1e-12)):
        bad = values[~(err <= 1e-12)]
        raise ParameterError("d", f"E[phi^2], E[phi'^2] of {act.expr} are not resolved to 1e-12 at variances "
                                  f"{bad[:3].tolist()} (an activation oscillating at large |x|); smaller variances")
    return m_phi[inverse].reshape(arr.shape), m_dphi[inverse].reshape(arr.shape)


# =========================================================================== series
def _polyval_many(coefs: Array, x: Array) -> Array:
    """sum_k coefs[i, k] x^k for each row i and each x (baby-step giant-step: one matrix product with the
    powers x^0..x^(B-1), then a Horner recursion in x^B over K / B blocks).  Returns (rows, x.size)."""
    coefs = np.atleast_2d(coefs)
    m, k1 = coefs.shape
    x = np.asarray(x, dtype=float).reshape(-1)
    B = max(1, int(math.ceil(math.sqrt(k1))))
    nb = -(-k1 // B)
    padded = np.zeros((m, nb * B))
    padded[:, :k1] = coefs
    powers = np.empty((B, x.size))
    powers[0] = 1.0
    for j in range(1, B):
        np.multiply(powers[j - 1], x, out=powers[j])
    xb = powers[B - 1] * x
    blocks = (padded.reshape(m * nb, B) @ powers).reshape(m, nb, x.size)
    acc = blocks[:, nb - 1].copy()
    for j in range(nb - 2, -1, -1):
        acc *= xb
        acc += blocks[:, j]
    return acc


def _d2_theta(c: Array) -> Array:
    """Power-series coefficients (in C = cos theta) of d^2/dtheta^2 sum_k c_k C^k:
    d^2 C^k / dtheta^2 = k (k - 1) C^(k-2) - k^2 C^k."""
    k = np.arange(c.size, dtype=float)
    out = -(k * k) * c
    out[:-2] += (k[2:] * (k[2:] - 1)) * c[2:]
    return out


@dataclass(frozen=True)
class _Series:
    """The certified Hermite series of one (d_a, d_b): coefficients of f and g, scales and bounds."""

    cf: Array          # f = sum cf_k rho^k
    cg: Array          # g = sum cg_k rho^k
    scale_f: float     # sqrt(E phi(u)^2 E phi(v)^2)
    scale_g: float
    tail_f: float      # sqrt(T_a T_b) / scale_f (the rigorous tail bound at |rho| = 1)
    tail_g: float
    quad_f: float      # quadrature error estimate (relative)
    quad_g: float
    rho_s: float       # |rho| <= rho_s is certified to tol (1.0 when all of [-1, 1] is)
    moments: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # E phi(u)^2, E phi(v)^2, E phi'(u)^2, ...


def _tails(c: Array, total: float, weights: Array | None = None) -> Array:
    """T(K) = total - sum_{k <= K} w_k c_k^2 for K = 0..len - 1 (floored at a few ulps of total)."""
    sq = c * c if weights is None else weights * c * c
    return np.maximum(total - np.cumsum(sq), 0.0) + 8 * _EPS * abs(total)


def _series(act: Activation, d_a: float, d_b: float, tol: float, k_max: int | None = None) -> _Series:
    k_max = K_LADDER[-1] if k_max is None else k_max
    mom, dmom, merr = _diag_moments(act, np.unique([d_a, d_b]))
    ia, ib = (0, 0) if d_a == d_b else ((0, 1) if d_a < d_b else (1, 0))
    A2, B2, Ap2, Bp2 = mom[ia], mom[ib], dmom[ia], dmom[ib]
    scale_f = math.sqrt(A2 * B2)
    scale_g = math.sqrt(Ap2 * Bp2)
    ab = math.sqrt(d_a * d_b)
    K = 64
    while True:
        coef, qerr = _hermite_coefficients(act, np.array([d_a, d_b]), K + 1)
        ca, cb = coef[0], coef[1]
        k = np.arange(K + 2, dtype=float)
        Tfa, Tfb = _tails(ca, A2), _tails(cb, B2)
        Tga = _tails(ca[1:], Ap2 * d_a, k[1:]) / d_a
        Tgb = _tails(cb[1:], Bp2 * d_b, k[1:]) / d_b
        tf = np.sqrt(Tfa[:K + 1] * Tfb[:K + 1]) / max(scale_f, 1e-300)
        tg = np.sqrt(Tga[:K + 1] * Tgb[:K + 1]) / max(scale_g, 1e-300)
        ok = np.nonzero((tf <= tol) & (tg <= tol))[0]
        if ok.size or K >= k_max:
            break
        K = min(k_max, _ladder(_next_terms(np.maximum(tf, tg), tol, k_max), 16))
    Kc = int(ok[0]) if ok.size else K
    cf = ca[:Kc + 1] * cb[:Kc + 1]
    cg = k[1:Kc + 2] * ca[1:Kc + 2] * cb[1:Kc + 2] / ab
    merr_max = float(merr.max())
    quad_f = qerr[0] / max(math.sqrt(A2), 1e-300) + qerr[1] / max(math.sqrt(B2), 1e-300) + merr_max
    quad_g = math.sqrt(Kc + 2.0) * (qerr[0] / max(math.sqrt(Ap2 * d_a), 1e-300)
                                    + qerr[1] / max(math.sqrt(Bp2 * d_b), 1e-300)) + merr_max
    t_f, t_g = float(tf[Kc]), float(tg[Kc])
    worst = max(t_f, t_g)
    rho_s = 1.0 if worst <= tol else (tol / worst) ** (1.0 / (Kc + 1))
    return _Series(cf, cg, scale_f, scale_g, t_f, t_g, quad_f, quad_g, rho_s,
                   (float(A2), float(B2), float(Ap2), float(Bp2)))


def _next_terms(tail: Array, tol: float, k_max: int) -> int:
    """The next series length to try: log tail(K) ~ alpha - beta sqrt(K) (analytic in a strip) fitted on the
    upper half of the computed tails and solved for tail = tol, with 20% margin; at least doubling."""
    K = tail.size - 1
    ks = np.arange(K // 2, K + 1)
    lt = np.log(np.maximum(tail[ks], 1e-300))
    slope, icpt = np.polyfit(np.sqrt(ks), lt, 1)
    want = 2 * K
    if slope < 0:
        want = max(want, int(1.2 * ((math.log(tol) - icpt) / slope) ** 2))
    return int(min(k_max, want))


# =========================================================================== the pair quadrature (fallback)
def _pair_quadrature(act: Activation, a: Array, b: Array, rho: Array, byte_budget: int
                     ) -> tuple[Array, Array, Array, Array]:
    """f, g and absolute error estimates of both at elements (a = sqrt d_a, b = sqrt d_b, rho) by the conditional
    reduction f = E_z1[phi(a z1) E_z2[phi(b rho z1 + b s z2)]] with trapezoidal rules in z1 and z2 (steps from
    the bandwidth; outer error from the interleaved coarse rule).  Elements are grouped by quantised grid
    sizes, so an element's grids do not depend on which other elements are passed; its value does only to
    round-off (the matrix products' summation order varies with the batch's shape: <= 1e-15 relative measured)."""
    a, b, rho = (np.asarray(v, dtype=float).reshape(-1) for v in (a, b, rho))
    f = np.empty(rho.size)
    g = np.empty(rho.size)
    err_f = np.empty(rho.size)
    err_g = np.empty(rho.size)
    s = np.sqrt(np.maximum(1.0 - rho * rho, 0.0))
    om = act.bandwidth
    n1 = _ladder_array(L_PAIR * MARGIN * (om * (a + b * np.abs(rho)) + OMEGA_GAUSS) / np.pi)
    n2 = _ladder_array(L_PAIR * 1.3 * MARGIN * (om * b * s + OMEGA_GAUSS) / (2 * np.pi))
    keys = n1.astype(np.int64) * 1_000_003 + n2
    for key in np.unique(keys):
        idx = np.nonzero(keys == key)[0]
        N1, N2 = int(n1[idx[0]]), int(n2[idx[0]])
        h1, h2 = L_PAIR / N1, L_PAIR / N2
        z1 = np.arange(-N1, N1 + 1) * h1
        w1 = h1 * np.exp(-z1 * z1 / 2) / _SQRT_2PI
        z2 = np.arange(-N2, N2 + 1) * h2
        w2 = h2 * np.exp(-z2 * z2 / 2) / _SQRT_2PI
        per = 8 * z1.size * z2.size * 4
        rows = max(1, byte_budget // per)
        coarse = np.zeros_like(w1)
        coarse[0::2] = 2 * w1[0::2]
        for lo in range(0, idx.size, rows):
            sel = idx[lo:lo + rows]
            ae, be, re_, se = a[sel, None], b[sel, None, None], rho[sel, None, None], s[sel, None, None]
            u = ae * z1
            v = be * (re_ * z1[None, :, None] + se * z2[None, None, :])
            for fn, dst, edst in ((act.phi, f, err_f), (act.dphi, g, err_g)):
                inner = fn(v) @ w2                      # (e, n1)
                outer = fn(u) * inner
                full = outer @ w1
                dst[sel] = full
                edst[sel] = np.abs(outer @ coarse - full)
    return f, g, err_f, err_g


# =========================================================================== A. tables
_TLS = threading.local()


def _scratch() -> tuple[Array, Array, Array, Array, Array, Array]:
    """Per-thread buffers of BLOCK elements: idx, tc, acc, buf (complex) and two float."""
    bufs = getattr(_TLS, "bufs", None)
    if bufs is None:
        bufs = (np.empty(BLOCK, dtype=np.intp), np.empty(BLOCK, dtype=complex), np.empty(BLOCK, dtype=complex),
                np.empty(BLOCK, dtype=complex), np.empty(BLOCK), np.empty(BLOCK))
        _TLS.bufs = bufs
    return bufs


@functools.cache
def _cheb_local(n: int) -> tuple[Array, Array, Array]:
    """Chebyshev points t_j in [0, 1] (of the first kind), the matrix from values at them to monomial
    coefficients in t, and the Taylor-shift matrix p(t) -> p(t + 1)."""
    t = (1 - np.cos((2 * np.arange(n) + 1) * np.pi / (2 * n))) / 2
    V = np.vander(t, n, increasing=True)
    to_mono = np.linalg.inv(V)
    shift = np.array([[math.comb(j, i) if j >= i else 0 for j in range(n)] for i in range(n)], dtype=float)
    return t, to_mono, shift


class DualTable:
    """f(rho) = E[phi(u) phi(v)] and g(rho) = E[phi'(u) phi'(v)] for one (d_a, d_b) as piecewise cubics in
    theta = arccos(rho) (see the module docstring).  ``error_bound`` is the relative error bound (relative to
    sqrt(E phi(u)^2 E phi(v)^2), resp. with phi')."""

    def __init__(self, act: Activation, d_a: float, d_b: float, series: _Series, coef_f: Array, coef_g: Array,
                 err_f: float, err_g: float, eps: float = 0.0) -> None:
        self.activation = act
        self.d_a, self.d_b = d_a, d_b
        self.degree = coef_f.shape[1] - 1
        self.n_intervals = coef_f.shape[0] - 1
        self.n_terms = series.cf.size
        self.scale_phi, self.scale_dphi = series.scale_f, series.scale_g
        self.series = series
        self.error_bound_phi = err_f
        self.error_bound_dphi = err_g
        self.error_bound = max(err_f, err_g)
        # eps > 0: the intervals are uniform in s = log((eps + theta) / (eps + pi - theta)) (`_theta_map`)
        self.eps = eps
        self._pe = math.pi + eps
        self._s0 = math.log(eps / self._pe) if eps else 0.0
        self._scale = self.n_intervals / (-2 * self._s0 if eps else math.pi)
        n = self.degree + 1
        self._cf = [np.ascontiguousarray(coef_f[:, j]) for j in range(n)]
        self._cg = [np.ascontiguousarray(coef_g[:, j]) for j in range(n)]

    @functools.cached_property
    def _cc(self) -> list[Array]:
        """The coefficients of f and g packed as complex numbers (`both`, the NumPy evaluation), built on first use:
        the compiled kernels read ``_cf``, ``_cg`` and never need them."""
        return [np.ascontiguousarray(f + 1j * g) for f, g in zip(self._cf, self._cg)]

    @property
    def nbytes(self) -> int:
        """Bytes of the coefficient arrays (what the table cache counts)."""
        packed = self.__dict__.get("_cc", ())
        return sum(a.nbytes for a in (*self._cf, *self._cg, *packed))

    def __repr__(self) -> str:
        return (f"DualTable({self.activation.expr}, d_a={self.d_a:g}, d_b={self.d_b:g}, intervals="
                f"{self.n_intervals}, terms={self.n_terms}, error_bound={self.error_bound:.1e})")

    # ------------------------------------------------------------------ evaluation
    def _index(self, r: Array, t: Array, fl: Array, idx: Array) -> None:
        np.clip(r, -1.0, 1.0, out=t)
        np.arccos(t, out=t)
        if self.eps:  # s - s0 = log((eps + theta) / (eps + pi - theta)) - s0
            np.subtract(self._pe, t, out=fl)
            np.add(t, self.eps, out=t)
            np.divide(t, fl, out=t)
            np.log(t, out=t)
            np.subtract(t, self._s0, out=t)
        np.multiply(t, self._scale, out=t)
        np.floor(t, out=fl)
        # NaN rho: index M (fmin drops the NaN; cast to an integer it was INT_MIN, which np.take(mode="wrap") walks
        # back into range one period at a time: a hang), the result is NaN through t
        np.fmin(fl, self.n_intervals, out=fl)
        np.copyto(idx, fl, casting="unsafe")
        np.subtract(t, fl, out=t)

    def _one(self, coefs: list[Array], rho, out: Array | None) -> Array:
        r, out, o_flat = _prepare(rho, out)
        for lo in range(0, r.size, BLOCK):
            rb, o = r[lo:lo + BLOCK], o_flat[lo:lo + BLOCK]
            m = rb.size
            idx, _, _, _, t, buf = (v[:m] for v in _scratch())
            self._index(rb, t, buf, idx)
            np.take(coefs[-1], idx, out=o, mode="wrap")
            for c in coefs[-2::-1]:
                np.multiply(o, t, out=o)
                np.take(c, idx, out=buf, mode="wrap")
                np.add(o, buf, out=o)
        return _finish(out, o_flat)

    def mean_phi_phi(self, rho, out: Array | None = None) -> Array:
        """Fill ``out`` (shape of rho, float64) with E[phi(u) phi(v)] at correlation rho (clipped into [-1, 1])."""
        return self._one(self._cf, rho, out)

    def mean_dphi_dphi(self, rho, out: Array | None = None) -> Array:
        """Fill ``out`` with E[phi'(u) phi'(v)] at correlation rho."""
        return self._one(self._cg, rho, out)

    def both(self, rho, out_phi: Array | None = None, out_dphi: Array | None = None) -> tuple[Array, Array]:
        """Fill ``out_phi`` and ``out_dphi`` at once (one interval lookup, complex-packed coefficients)."""
        r, out_phi, f_flat = _prepare(rho, out_phi)
        _, out_dphi, g_flat = _prepare(rho, out_dphi)
        cc = self._cc
        for lo in range(0, r.size, BLOCK):
            rb, o1, o2 = r[lo:lo + BLOCK], f_flat[lo:lo + BLOCK], g_flat[lo:lo + BLOCK]
            m = rb.size
            idx, tc, acc, buf, _, _ = (v[:m] for v in _scratch())
            self._index(rb, o1, o2, idx)
            np.copyto(tc, o1)
            np.take(cc[-1], idx, out=acc, mode="wrap")
            for c in cc[-2::-1]:
                np.multiply(acc, tc, out=acc)
                np.take(c, idx, out=buf, mode="wrap")
                np.add(acc, buf, out=acc)
            np.copyto(o1, acc.real)
            np.copyto(o2, acc.imag)
        return _finish(out_phi, f_flat), _finish(out_dphi, g_flat)


def _prepare(rho, out: Array | None) -> tuple[Array, Array, Array]:
    """Flat float64 rho, the output array (allocated if None) and a flat C-contiguous array to write to (a view
    of ``out`` when it is contiguous, else a copy that `_finish` writes back)."""
    rho = np.asarray(rho, dtype=float)
    if out is None:
        out = np.empty(rho.shape)
    elif not isinstance(out, np.ndarray) or out.shape != rho.shape or out.dtype != np.float64:
        raise ParameterError("out", f"must be a float64 array of shape {rho.shape}")
    r = rho.reshape(-1) if rho.flags.c_contiguous else np.ascontiguousarray(rho).reshape(-1)
    flat = out.reshape(-1) if out.flags.c_contiguous else np.empty(r.size)
    return r, out, flat


def _finish(out: Array, flat: Array) -> Array:
    if not np.shares_memory(out, flat):
        out[...] = flat.reshape(out.shape)
    return out


def _exact_values(act: Activation, ser: _Series, d_a: float, d_b: float, rho: Array, wins: list | None = None
                  ) -> tuple[Array, Array, float]:
    """f and g at rho: the series where it is certified; beyond rho_s the windows of `heat_smoothing` (``wins``,
    large variances) or the pair quadrature."""
    vals = _polyval_many(np.vstack([ser.cf, _pad(ser.cg, ser.cf.size)]), rho)
    f, g = vals[0], vals[1]
    qerr = 0.0
    if wins:
        far = np.nonzero(np.abs(rho) > ser.rho_s)[0]
        fw, gw, done = heat_smoothing.evaluate(wins, rho[far])
        f[far[done]], g[far[done]] = fw[done], gw[done]  # the rest: |rho| - rho_s ~ ulps, the series holds
    elif ser.rho_s < 1.0:
        far = np.nonzero(np.abs(rho) > ser.rho_s)[0]
        if far.size:
            n = far.size
            fq, gq, ef, eg = _pair_quadrature(act, np.full(n, math.sqrt(d_a)), np.full(n, math.sqrt(d_b)),
                                              rho[far], 64 << 20)
            f[far], g[far] = fq, gq
            qerr = max(float(ef.max()) / max(ser.scale_f, 1e-300), float(eg.max()) / max(ser.scale_g, 1e-300))
    return f, g, qerr


def _pad(c: Array, n: int) -> Array:
    out = np.zeros(n)
    out[:c.size] = c[:n]
    return out


def _choose_intervals(ser: _Series, tol: float, n: int) -> int:
    """M from the n-th theta derivative of the series on a coarse theta grid: the remainder of interpolation
    at n Chebyshev points on an interval of width w is <= |F^(n)| 2 (w/4)^n / n!."""
    theta = np.linspace(0.0, np.pi, 513)
    rows = []
    for c, scale in ((ser.cf, ser.scale_f), (ser.cg, ser.scale_g)):
        dc = c
        for _ in range(n // 2):
            dc = _d2_theta(dc)
        rows.append(dc / max(scale, 1e-300))
    width = max(len(r) for r in rows)
    vals = np.abs(_polyval_many(np.vstack([_pad(r, width) for r in rows]), np.cos(theta)))
    env = vals.max(axis=0)
    env = np.maximum.reduce([np.roll(env, s) for s in (-2, -1, 0, 1, 2)])
    peak = 1.5 * float(env.max())
    if peak <= 0:
        return 4
    w = 4 * (tol * math.factorial(n) / (2 * peak)) ** (1.0 / n)
    return int(min(M_MAX, max(4, math.ceil(np.pi / w))))


def _theta_map(eps: float, u: Array) -> Array:
    """theta at u = (s - s0) / (s1 - s0) in [0, 1] for the graded map s = log((eps + theta) / (eps + pi - theta))
    (s0 = -s1 = log(eps / (eps + pi))); eps = 0: theta = pi u (uniform)."""
    if not eps:
        return np.pi * u
    s0 = math.log(eps / (math.pi + eps))
    q = np.exp(s0 * (1.0 - 2.0 * u))
    return np.clip((q * (math.pi + eps) - eps) / (1.0 + q), 0.0, np.pi)


def _fit(act: Activation, ser: _Series, d_a: float, d_b: float, M: int, wins: list | None = None,
         eps: float = 0.0) -> tuple[Array, Array, float, float, float]:
    n = DEGREE + 1
    t, to_mono, shift = _cheb_local(n)
    i = np.arange(M)
    theta_nodes = _theta_map(eps, ((i[:, None] + t[None, :]) / M).reshape(-1))
    # midpoints of every interval (test points: the node polynomial is extremal there)
    theta_mid = _theta_map(eps, (i + 0.5) / M)
    rho_all = np.cos(np.concatenate([theta_nodes, theta_mid]))
    f, g, qerr = _exact_values(act, ser, d_a, d_b, rho_all, wins)
    nn = theta_nodes.size
    cf = np.empty((M + 1, n))
    cg = np.empty((M + 1, n))
    cf[:M] = f[:nn].reshape(M, n) @ to_mono.T
    cg[:M] = g[:nn].reshape(M, n) @ to_mono.T
    cf[M] = shift @ cf[M - 1]  # the interval of theta = pi (rho = -1): p_{M-1}(t + 1)
    cg[M] = shift @ cg[M - 1]
    half = 0.5 ** np.arange(n)
    ef = float(np.max(np.abs(cf[:M] @ half - f[nn:]))) / max(ser.scale_f, 1e-300)
    eg = float(np.max(np.abs(cg[:M] @ half - g[nn:]))) / max(ser.scale_g, 1e-300)
    return cf, cg, ef, eg, qerr


def build_table(expr: sp.Expr | str, d_a: float, d_b: float, rtol: float = 1e-10) -> DualTable:
    """The interpolant of E[phi(u) phi(v)] and E[phi'(u) phi'(v)] in rho for diagonals (d_a, d_b) (cached, LRU).

    ``rtol`` is the target relative error; the achieved bound is ``table.error_bound``."""
    act = activation(expr)
    for name, v in (("d_a", d_a), ("d_b", d_b)):
        if not (math.isfinite(float(v)) and float(v) > 0):
            raise ParameterError(name, f"must be a finite variance > 0, got {v!r}")
        if float(v) > D_TABLE_MAX:
            raise ParameterError(name, f"variance {float(v):g} (K_aa of the layer) is beyond the range of the "
                                       f"tabulated dual kernels of {act.expr}, 0 < d <= {D_TABLE_MAX:g} (accurate to "
                                       "1e-10 there; beyond, the uniform theta intervals exceed M_MAX); smaller "
                                       "weights, depth or branch_scale keep the variances in range")
    if not (0 < float(rtol) < 1):
        raise ParameterError("rtol", f"must lie in (0, 1), got {rtol!r}")
    return _table(act.key, float(d_a), float(d_b), float(rtol))


_TABLES = BytesLRU(lambda: TABLE_CACHE_BYTES)


@cached(_TABLES)
def _table(key: str, d_a: float, d_b: float, rtol: float) -> DualTable:
    act = _activation(key)
    tol_series = _series_tol(rtol)
    tol_interp = rtol / 4  # on twice the largest measured midpoint error
    large = max(d_a, d_b) > D_SERIES
    ser = _series(act, d_a, d_b, tol_series, K_SERIES_LARGE if large else None)
    wins, werr = None, 0.0
    if large and ser.rho_s < 1.0:
        wins, werr = _windows(act, ser, d_a, d_b, tol_series, rtol)
    n = DEGREE + 1
    # large d: intervals graded toward theta = 0 and pi (boundary layers of width ~ 1 / sqrt(d)), M ~ log d
    eps = 1.0 / math.sqrt(max(d_a, d_b)) if large else 0.0
    M = _choose_intervals(ser, tol_interp / 3, n) if not eps else M_GRADED
    for _ in range(8):
        cf, cg, ef, eg, qerr = _fit(act, ser, d_a, d_b, M, wins, eps)
        qerr = max(qerr, werr)
        worst = 2 * max(ef, eg)
        if worst <= tol_interp or M >= M_MAX:
            break
        M = int(min(M_MAX, math.ceil(M * 1.1 * (worst / tol_interp) ** (1.0 / n))))
    err_f, err_g = _bounds(ser, ef, eg, qerr, tol_series)
    return DualTable(act, d_a, d_b, ser, cf, cg, err_f, err_g, eps)


def _bounds(ser: _Series, ef: float, eg: float, qerr: float, tol_series: float) -> tuple[float, float]:
    """The stored error bounds of a table (see the module docstring) from its measured midpoint errors."""
    floor = 1e-15 * (DEGREE + 2)
    err_f = 2 * ef + ser.tail_f * (1.0 if ser.rho_s >= 1.0 else 0.0) + ser.quad_f + qerr + floor
    err_g = 2 * eg + ser.tail_g * (1.0 if ser.rho_s >= 1.0 else 0.0) + ser.quad_g + qerr + floor
    if ser.rho_s < 1.0:  # the series is certified to tol_series inside rho_s, the quadrature outside
        err_f += tol_series
        err_g += tol_series
    return err_f, err_g


def large_variance_parts(act: Activation, d: float, M: int, rtol: float
                         ) -> tuple[_Series, Array, Array, float, float]:
    """The table of an equal pair (d, d) in the large-variance construction (series to K_SERIES_LARGE terms,
    heat-smoothing windows, intervals graded with eps = 1/sqrt(d)) on exactly ``M`` intervals: (series, cubic
    coefficients of f and g, error bounds).  `table_family` interpolates these across variances."""
    tol_series = _series_tol(rtol)
    ser = _series(act, d, d, tol_series, K_SERIES_LARGE)
    wins, werr = None, 0.0
    if ser.rho_s < 1.0:
        wins, werr = _windows(act, ser, d, d, tol_series, rtol)
    cf, cg, ef, eg, qerr = _fit(act, ser, d, d, M, wins, 1.0 / math.sqrt(d))
    err_f, err_g = _bounds(ser, ef, eg, max(qerr, werr), tol_series)
    return ser, cf, cg, err_f, err_g


def _windows(act: Activation, ser: _Series, d_a: float, d_b: float, tol: float, rtol: float) -> tuple[list, float]:
    """The windows of `heat_smoothing` for 1 - |rho| <= 1 - rho_s, and their error (relative): the largest
    certified tail + quadrature estimate of a window, the disagreement of neighbouring windows, and that of the first
    windows with the series at +-rho_s.  A ParameterError names ``d_a`` if they are not certified or disagree by
    more than rtol (an activation the rules do not resolve at this variance)."""
    wins = heat_smoothing.windows(act, d_a, d_b, 1.0 - ser.rho_s, ser.moments, tol)
    err = math.inf
    if wins:
        scales = (ser.scale_f, ser.scale_g)
        edge = _polyval_many(np.vstack([ser.cf, _pad(ser.cg, ser.cf.size)]), np.array([ser.rho_s, -ser.rho_s]))
        first = {w.sign: w for w in reversed(wins)}
        seam = max(abs(edge[0, i] - first[s].cf[0]) / scales[0] + abs(edge[1, i] - first[s].cg[0]) / scales[1]
                   for i, s in ((0, 1), (1, -1)))
        err = max(w.err for w in wins) + heat_smoothing.overlap_error(wins, scales) + seam
    if not err <= rtol:
        raise ParameterError("d_a", f"the dual kernels of {act.expr} at variances ({d_a:g}, {d_b:g}) are not "
                                    f"resolved near |rho| = 1 (window error {err:.1e} > rtol = {rtol:g}; an "
                                    "activation oscillating at large |x|, e.g. sin(x)**2 beyond d ~ 30-100); smaller "
                                    "variances")
    return wins, err


# =========================================================================== C. general path
def _chunks(shape: tuple[int, ...], limit: int) -> Iterator[tuple[slice | int, ...]]:
    """Index tuples covering an array of ``shape`` in pieces of at most ``limit`` elements (row blocks of the
    leading axis, recursing into it when one row is too large)."""
    if len(shape) == 0:
        yield ()
        return
    inner = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
    if inner <= limit:
        rows = max(1, limit // max(inner, 1))
        for lo in range(0, shape[0], rows):
            yield (slice(lo, min(shape[0], lo + rows)),)
        return
    for i in range(shape[0]):
        for rest in _chunks(shape[1:], limit):
            yield (i, *rest)


@dataclass(frozen=True, eq=False)
class _DiagData:
    """Everything the general path needs about one set of diagonal values (read-only once built, so that any
    number of threads may share it): the tables of every pair of values (``tables``, when there are at most
    ``MAX_TABLE_PAIRS`` pairs), else the Hermite coefficients of every value and their log tails."""

    act: Activation
    values: Array                  # distinct diagonal values (sorted)
    rtol: float
    coefT: Array | None = None     # (K + 1, n_values): a_k(d) (transposed: one row per k)
    logtail_f: Array | None = None  # (levels, n_values): 0.5 log(T(K_l) / A^2)
    logtail_g: Array | None = None
    levels: tuple[int, ...] = ()
    tables: dict[tuple[int, int], DualTable] | None = None

    @property
    def nbytes(self) -> int:
        arrays = (self.values, self.coefT, self.logtail_f, self.logtail_g)
        return sum(a.nbytes for a in arrays if a is not None)


#: diagonal data of recent ``mean_phi_phi_general`` calls, keyed by (activation, the bytes of the sorted distinct
#: values, rtol): whole immutable `_DiagData` objects, LRU within ``_DIAG_CACHE_BYTES``.  A lookup takes a reference
#: under the lock and never reads an entry after releasing it, so an entry evicted by another thread stays valid for
#: whoever holds it.  (The kernel engine does not rely on it: it builds each layer's data once with
#: `general_data` before the strips of the layer run, and passes it to them.)
_DIAG_CACHE_BYTES = 64 << 20
_DIAG_CACHE = BytesLRU(lambda: _DIAG_CACHE_BYTES)


def general_data(expr: sp.Expr | str, values, rtol: float = 1e-10, cache: bool = True,
                 moments: tuple[Array, Array] | None = None) -> _DiagData:
    """The diagonal data of the general path for the diagonal values ``values`` (any array of variances > 0; its
    distinct values are used): tables of every pair when there are at most ``MAX_TABLE_PAIRS`` pairs, else the
    Hermite coefficients and log tails of every value (`_diag_data`).  Pass it as ``data=`` to
    `mean_phi_phi_general` or to `mean_phi_phi_strip` to evaluate many chunks of one set of diagonals: it is
    computed once and read-only afterwards, so threads share it safely; the result of an element depends only on
    the element and on this set of values, not on the chunking.  ``cache=False`` bypasses ``_DIAG_CACHE``;
    ``moments``: (E[phi^2], E[phi'^2]) at the sorted distinct values if the caller has them (from `diagonal`)."""
    act = activation(expr)
    vals = np.unique(np.asarray(values, dtype=float).reshape(-1))
    if vals.size == 0 or not (np.all(np.isfinite(vals)) and vals[0] > 0):
        raise ParameterError("K_aa", "diagonal variances must be finite and > 0")
    if not (0 < float(rtol) < 1):
        raise ParameterError("rtol", f"must lie in (0, 1), got {rtol!r}")
    if moments is not None and not all(np.shape(m) == vals.shape for m in moments):
        raise ParameterError("moments", "must be two arrays, one value per distinct diagonal value")
    return _general_data(act, vals, float(rtol), cache, moments)


def _general_data(act: Activation, values: Array, rtol: float, cache: bool,
                  moments: tuple[Array, Array] | None = None) -> _DiagData:
    key = (act.key, values.tobytes(), rtol)
    if cache:
        hit = _DIAG_CACHE.get(key)
        if hit is not None:
            return hit
    if values.size * values.size <= MAX_TABLE_PAIRS:
        v = values.tolist()
        tables = {(i, j): build_table(act.expr, v[i], v[j], rtol) for i in range(len(v)) for j in range(len(v))}
        data = _DiagData(act, values, rtol, tables=tables)
    else:
        data = _diag_data(act, values, rtol, moments)
    if cache:
        _DIAG_CACHE.put(key, data)
    return data


#: diagonal values on which `_diag_data` first finds the series length (then checked on all values)
K_PROBE = 17


def _series_length(act: Activation, values: Array, m_phi: Array, m_dphi: Array, tol: float, K: int, k_max: int,
                   probe: bool = False) -> tuple[int, Array, Array, bool]:
    """Raise K from ``K`` (``_next_terms``) until the relative tails of every value are <= tol (or K = k_max);
    returns (K computed, coefficients (K + 1, n_values), indices k where every tail is certified, whether the
    coefficients were interpolated).  ``probe``: the coefficients evaluated at every value (a few values), else
    `_coefficients_at`.  The tails are computed in blocks of TAIL_ROWS values (two blocks of temporaries)."""
    while True:
        coef = None  # the last try's coefficients go before the next are built (not two sets at once)
        if probe:
            coef, interpolated = _hermite_coefficients(act, values, K, estimate=False)[0].T, False
        else:
            coef, interpolated = _coefficients_at(act, values, K)
        worst = _tail_summary(coef, m_phi, m_dphi, values, K, interpolated, np.zeros(0, dtype=np.intp))[0]
        worst[0] = np.inf
        ok = np.nonzero(worst <= tol)[0]
        if ok.size or K >= k_max:
            return K, coef, ok, interpolated
        K = min(k_max, _ladder(_next_terms(np.sqrt(worst), math.sqrt(tol), k_max), 16))


#: values per block of the tails' temporaries in `_series_length` and `_diag_data`
TAIL_ROWS = 128


def _tail_summary(coefT: Array, m_phi: Array, m_dphi: Array, values: Array, K: int, interpolated: bool,
                  cols: Array) -> tuple[Array, Array, Array]:
    """The largest relative tail over the values per k (f at k = 0, max of f and g at k >= 1) and 0.5 log of
    the tails at the rows ``cols`` (lf, lg: (len(cols), n_values)); compiled (value by value) when the series
    backend is, else in blocks of TAIL_ROWS values with `_relative_tails`: the same bits."""
    amp = np.sqrt(np.maximum(m_phi, 1e-300))
    tau = COEFFICIENT_INTERPOLATION_TOL if interpolated else 0.0
    if _use_compiled():
        from resprop.numeric.engine import mehler_compiled

        if interpolated:
            slack_f, slack_g = _tail_slack(coefT, m_phi, m_dphi, values, K, amp, tau)
        else:
            slack_f = slack_g = np.zeros(values.size)
        return mehler_compiled.relative_tails(coefT, m_phi, m_dphi, values, slack_f, slack_g, 8 * _EPS, cols)
    worst = np.full(K + 1, -np.inf)
    lf = np.empty((len(cols), values.size))
    lg = np.empty((len(cols), values.size))
    for lo in range(0, values.size, TAIL_ROWS):
        sl = slice(lo, lo + TAIL_ROWS)
        rf, rg = _relative_tails(coefT[:, sl], m_phi[sl], m_dphi[sl], values[sl], K, interpolated)
        np.maximum(worst, rf.max(axis=1), out=worst)
        np.maximum(worst[1:], rg.max(axis=1), out=worst[1:])
        if len(cols):
            lf[:, sl] = 0.5 * np.log(rf[cols])
            lg[:, sl] = 0.5 * np.log(rg[cols - 1])  # g has K terms
    return worst, lf, lg


def _tail_slack(coefT: Array, m_phi: Array, m_dphi: Array, values: Array, K: int, amp: Array, tau: float
                ) -> tuple[Array, Array]:
    """The interpolation's allowance added to the relative tails of f and of g, per value (see `_relative_tails`)."""
    k = np.arange(K + 1, dtype=float)
    sum_abs, k_abs = np.empty(values.size), np.empty(values.size)
    for lo in range(0, values.size, TAIL_ROWS):  # |a_k| a block of values at a time, not a copy of all of them
        absc = np.abs(coefT[:, lo:lo + TAIL_ROWS])
        sum_abs[lo:lo + TAIL_ROWS] = absc.sum(axis=0)
        k_abs[lo:lo + TAIL_ROWS] = k @ absc
    slack_f = (2 * tau * amp * sum_abs + (K + 1) * (tau * amp) ** 2) / np.maximum(m_phi, 1e-300)
    slack_g = ((2 * tau * amp * k_abs + K * (K + 1) / 2 * (tau * amp) ** 2)
               / np.maximum(m_dphi * values, 1e-300))
    return slack_f, slack_g


def _relative_tails(coefT: Array, m_phi: Array, m_dphi: Array, values: Array, K: int, interpolated: bool
                    ) -> tuple[Array, Array]:
    """rf[k, i] = (max(A^2 - sum_{j<=k} a_j^2, 0) + 8 eps A^2) / A^2 (T / A^2 after the term k) and rg the same for
    g (K - 1 terms of g), per value (columns of ``coefT``, rows k); raised by the interpolation's allowance when the
    coefficients were interpolated.  Sums run down the rows (contiguous)."""
    k = np.arange(K + 1, dtype=float)[:, None]
    mf, mg = m_phi[None, :], (m_dphi * values)[None, :]
    rf = np.multiply(coefT, coefT)
    np.cumsum(rf, axis=0, out=rf)
    np.subtract(mf, rf, out=rf)
    np.maximum(rf, 0.0, out=rf)
    rf += 8 * _EPS * mf
    rf /= np.maximum(m_phi, 1e-300)[None, :]
    if interpolated:
        # each a_k is within tau A of its value, so sum_{j<=k} a_j^2 is within 2 tau A sum_j |a_j| + (K + 1)
        # tau^2 A^2 of its value: the tails are raised by that, relative to A^2 (resp. G = E[phi'^2] d, with
        # the weights j); a pessimistic allowance, ~1e-13 for tanh at K ~ 330
        slack_f, slack_g = _tail_slack(coefT, m_phi, m_dphi, values, K, np.sqrt(np.maximum(m_phi, 1e-300)),
                                       COEFFICIENT_INTERPOLATION_TOL)
        rf += slack_f[None, :]
    rg = np.square(coefT[1:])
    rg *= k[1:]
    np.cumsum(rg, axis=0, out=rg)
    np.subtract(mg, rg, out=rg)
    np.maximum(rg, 0.0, out=rg)
    rg += 8 * _EPS * mg
    rg /= np.maximum(m_dphi * values, 1e-300)[None, :]
    if interpolated:
        rg += slack_g[None, :]
    return rf, rg


def _diag_data(act: Activation, values: Array, rtol: float, moments: tuple[Array, Array] | None = None
               ) -> _DiagData:
    """Hermite coefficients of every distinct diagonal value (all computed together, on one grid), with a common
    K raised (``_next_terms``) until every value's relative tails T / A^2 are <= tol = rtol / 50, so that every
    pair is certified on all of [-1, 1] (or K = K_LADDER[-1]); and the log tails at the ladder levels.  A pure
    function of (activation, values, rtol)."""
    tol = _series_tol(rtol)
    k_max = K_LADDER[-1]
    m_phi, m_dphi = (np.asarray(m, dtype=float) for m in moments) if moments is not None else \
        _moments_at(act, values)[:2]
    K = 65
    if values.size > 2 * K_PROBE:  # the K that a spread of the values needs, on those values alone (cheap)
        probe = np.unique(np.linspace(0, values.size - 1, K_PROBE).round().astype(np.intp))
        K_probe, _, ok_probe, _ = _series_length(act, values[probe], m_phi[probe], m_dphi[probe], tol, K, k_max,
                                                 probe=True)
        # start where the probe's tails certified (its values span the range, the extremes included), a rung of
        # the ladder above it, not at the probe's whole length: the coefficients of all values are (K + 1) x P,
        # and tanh at K_aa ~ 1 needs 18 rows of the 66 computed (at P = 1000, 0.5 MiB of temporaries per layer);
        # if some value's tails are not certified there, `_series_length` raises K as before
        K = min(K_probe, _ladder(int(ok_probe[0]) + 2, 16)) if ok_probe.size else K_probe
    K_top, coef, ok, interpolated = _series_length(act, values, m_phi, m_dphi, tol, K, k_max)
    K = int(ok[0]) if ok.size else K_top
    ladder = tuple(lv for lv in K_LADDER if lv < K) + (K,)
    _, lf, lg = _tail_summary(coef, m_phi, m_dphi, values, K_top, interpolated, np.asarray(ladder))
    coefT = coef[:K + 1]  # a view when most rows are kept; else a copy, so that the rest is freed
    if not coefT.flags.c_contiguous or 4 * (K + 1) < 3 * (K_top + 1):
        coefT = np.array(coefT, order="C")
    return _DiagData(act, values, rtol, coefT=coefT, logtail_f=lf, logtail_g=lg, levels=ladder)


#: relative accuracy (to sqrt(E[phi^2])) that the interpolation in log d of the Hermite coefficients must show
#: before it replaces their evaluation at every diagonal value (`variance_interpolation`)
COEFFICIENT_INTERPOLATION_TOL = 1e-14


def _coefficients_at(act: Activation, values: Array, K: int) -> tuple[Array, bool]:
    """a_k(d), k = 0..K, at the sorted distinct ``values``, as a (K + 1, n_values) array (one row per k): on
    Chebyshev nodes in log d and interpolated when that checks to COEFFICIENT_INTERPOLATION_TOL (many values), else
    at every value; and whether it interpolated."""
    from resprop.numeric.engine.variance_interpolation import on_values

    def scale(F: Array) -> Array:
        return np.sqrt(np.sum(F * F, axis=1))[:, None]

    coef, nodes = on_values(lambda d: _hermite_coefficients(act, d, K, estimate=False)[0], values, scale,
                            COEFFICIENT_INTERPOLATION_TOL, transpose=True)
    return coef, nodes > 0


def _compact(arr: Array) -> Array:
    """``arr`` without the repetitions of its broadcast (stride-0) axes, which are kept with length 1."""
    return arr[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for st, n in zip(arr.strides, arr.shape))]


def _unique_values(arrays: tuple[Array, ...], limit: int) -> Array:
    vals = np.empty(0)
    for arr in arrays:
        c = _compact(arr)
        if c.size <= limit:
            vals = np.union1d(vals, c)
            continue
        for sl in _chunks(c.shape, limit):
            vals = np.union1d(vals, np.unique(c[sl]))
    return vals


def _value_index(values: Array, arr: Array, limit: int) -> Array | None:
    """Indices of ``arr`` in ``values`` as a broadcast view when the compacted array is small, else None
    (then they are found per chunk)."""
    c = _compact(arr)
    if c.size > limit:
        return None
    return np.broadcast_to(np.searchsorted(values, c), arr.shape)


def mean_phi_phi_general(expr: sp.Expr | str, K_aa, K_bb, K_ab, out_phi: Array, out_dphi: Array | None = None,
                         byte_budget: int = 64 * 2**20, rtol: float = 1e-10, data: _DiagData | None = None
                         ) -> tuple[Array, Array | None]:
    """E[phi(u) phi(v)] (into ``out_phi``) and E[phi'(u) phi'(v)] (into ``out_dphi`` if given) for
    (u, v) ~ N(0, [[K_aa, K_ab], [K_ab, K_bb]]), elementwise over arrays of one (broadcast) shape.

    ``data``: the diagonal data (`general_data`) of a set of values containing every value of K_aa and K_bb
    (then ``rtol`` is the data's); by default it is built for the distinct values of this call.
    Memory: chunks of the flattened shape whose temporaries stay below ``byte_budget`` bytes, plus the
    Hermite coefficients of the distinct diagonal values (n_diag x K).  See the module docstring for the
    method and its cost."""
    act = activation(expr)
    K_aa, K_bb, K_ab = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (K_aa, K_bb, K_ab)))
    shape = K_ab.shape
    for name, o in (("out_phi", out_phi), ("out_dphi", out_dphi)):
        if o is not None and (o.shape != shape or o.dtype != np.float64):
            raise ParameterError(name, f"must be a float64 array of shape {shape}")
    byte_budget = max(int(byte_budget), 1 << 16)
    limit = max(256, byte_budget // _PER_ELEMENT)
    given = data is not None
    if data is None:
        values = _unique_values((K_aa, K_bb), limit)
        if values.size == 0:
            return out_phi, out_dphi
        if not (np.all(np.isfinite(values)) and values[0] > 0):
            raise ParameterError("K_aa", "diagonal variances must be finite and > 0")
        data = _general_data(act, values, float(rtol), cache=True)
    elif data.act.key != act.key:
        raise ParameterError("data", "was built for another activation")
    values = data.values
    want_g = out_dphi is not None
    index_a, index_b = _value_index(values, K_aa, limit), _value_index(values, K_bb, limit)
    if given:
        for idx, arr in ((index_a, K_aa), (index_b, K_bb)):
            if idx is not None:
                _check_index(values, _compact(idx), _compact(arr))
    for sl in _chunks(shape, limit):
        ia = np.searchsorted(values, K_aa[sl].reshape(-1)) if index_a is None else index_a[sl].reshape(-1)
        ib = np.searchsorted(values, K_bb[sl].reshape(-1)) if index_b is None else index_b[sl].reshape(-1)
        if given:
            for idx, arr, pre in ((ia, K_aa, index_a), (ib, K_bb, index_b)):
                if pre is None:
                    _check_index(values, idx, arr[sl].reshape(-1))
        f, g = _series_chunk(act, data, ia, ib, K_ab[sl], series_tolerance(data), want_g, byte_budget)
        out_phi[sl] = f.reshape(out_phi[sl].shape)
        if want_g:
            assert out_dphi is not None
            out_dphi[sl] = g.reshape(out_dphi[sl].shape)
    return out_phi, out_dphi


#: bytes of chunk temporaries per element (inputs, rho, indices, sorting, Horner)
_PER_ELEMENT = 8 * 24
#: elements per Horner pass of the series (its ~8 work arrays stay in L2); results do not depend on it
SERIES_BLOCK = 8192
#: temporaries of one chunk of rows in `mean_phi_phi_strip`; results do not depend on it
STRIP_BYTE_BUDGET = 16 * 2**20


def _check_index(values: Array, idx: Array, arr: Array) -> None:
    if idx.size and not np.array_equal(values[np.minimum(idx, values.size - 1)], arr):
        raise ParameterError("data", "does not hold every diagonal value of K_aa and K_bb")


def mean_phi_phi_strip(data: _DiagData, ia: Array, ib: Array, rho: Array, out_phi: Array,
                       out_dphi: Array | None = None, byte_budget: int | None = None) -> tuple[Array, Array | None]:
    """The general path on an (h, n) block of correlations ``rho`` whose rows have the diagonal values
    ``data.values[ia]`` (ia of length h) and columns ``data.values[ib]`` (length n): what the kernel engine's
    strips call, with the data of the layer built once (`general_data`).  ``rho`` is clipped into [-1, 1];
    the result of an element depends only on (its values, its rho) and ``data``; ``byte_budget`` (default
    ``STRIP_BYTE_BUDGET``) bounds the temporaries of one chunk of rows."""
    byte_budget = STRIP_BYTE_BUDGET if byte_budget is None else byte_budget
    rho = np.asarray(rho, dtype=float)
    h, n = rho.shape
    ia, ib = np.asarray(ia, dtype=np.intp), np.asarray(ib, dtype=np.intp)
    want_g = out_dphi is not None
    if data.coefT is not None and _use_compiled():
        return _strip_compiled(data, ia, ib, rho, out_phi, out_dphi, byte_budget)
    limit = max(256, max(int(byte_budget), 1 << 16) // _PER_ELEMENT)
    rows = max(1, limit // max(n, 1))
    for r0 in range(0, h, rows):
        r1 = min(h, r0 + rows)
        ja, jb = np.repeat(ia[r0:r1], n), np.tile(ib, r1 - r0)
        f, g = _eval_rho(data, ja, jb, np.array(rho[r0:r1], dtype=float).reshape(-1), want_g, byte_budget)
        out_phi[r0:r1] = f.reshape(r1 - r0, n)
        if want_g:
            assert out_dphi is not None
            out_dphi[r0:r1] = g.reshape(r1 - r0, n)
    return out_phi, out_dphi


#: "auto": the compiled series (`mehler_compiled`) when Numba imports, else NumPy; "numpy": always NumPy (the
#: reference); "compiled": the compiled series, an error without Numba.  Both give the same bits per element.
SERIES_BACKEND = "auto"


def series_tolerance(data: _DiagData) -> float:
    """The absolute tail tolerance of the general path's series for relative tolerance ``data.rtol``."""
    return _series_tol(data.rtol)


def _series_tol(rtol: float) -> float:
    """The series' share of a relative tolerance ``rtol`` (the rest is left to the tables' fit and quadrature)."""
    return rtol / 50


def _use_compiled() -> bool:
    from resprop.numeric.engine import mehler_compiled

    if SERIES_BACKEND == "numpy":
        return False
    if SERIES_BACKEND == "compiled" and not mehler_compiled.available():
        raise ParameterError("backend", "'compiled' needs Numba (pip install numba); use 'auto' or 'numpy'")
    return mehler_compiled.available()


def _strip_compiled(data: _DiagData, ia: Array, ib: Array, rho: Array, out_phi: Array, out_dphi: Array | None,
                    byte_budget: int) -> tuple[Array, Array | None]:
    """`mean_phi_phi_strip` through the compiled series; the elements no ladder level certifies go to the pair
    quadrature as in `_series_rho`."""
    from resprop.numeric.engine import mehler_compiled

    assert data.coefT is not None and data.logtail_f is not None and data.logtail_g is not None
    want_g = out_dphi is not None
    sa = np.sqrt(data.values)
    if not (rho.flags.c_contiguous and out_phi.flags.c_contiguous
            and (out_dphi is None or out_dphi.flags.c_contiguous)):
        f, g = np.empty(rho.shape), np.empty(rho.shape)
        _strip_compiled(data, ia, ib, np.ascontiguousarray(rho), f, g if want_g else None, byte_budget)
        out_phi[...] = f
        if out_dphi is not None:
            out_dphi[...] = g
        return out_phi, out_dphi
    g_out = out_dphi if out_dphi is not None else np.empty((1, 1))
    level = mehler_compiled.series_strip(data.coefT, data.logtail_f, data.logtail_g, np.asarray(data.levels),
                                         series_tolerance(data), ia, ib, rho, sa, want_g, out_phi, g_out)
    nl = len(data.levels)
    bad = np.nonzero(level >= nl)
    if bad[0].size:
        nan = level[bad] == nl + 1
        out_phi[bad[0][nan], bad[1][nan]] = np.nan
        if out_dphi is not None:
            out_dphi[bad[0][nan], bad[1][nan]] = np.nan
        fb = (bad[0][~nan], bad[1][~nan])
        if fb[0].size:
            r = np.clip(rho[fb], -1.0, 1.0)
            fq, gq, _, _ = _pair_quadrature(data.act, sa[ia[fb[0]]], sa[ib[fb[1]]], r, byte_budget)
            out_phi[fb] = fq
            if out_dphi is not None:
                out_dphi[fb] = gq
    return out_phi, out_dphi


def _series_chunk(act: Activation, data: _DiagData, ia: Array, ib: Array, kab: Array, tol: float, want_g: bool,
                  byte_budget: int) -> tuple[Array, Array]:
    """f and g at one chunk: ia, ib index the diagonal values of the elements, kab their covariances."""
    sa = np.sqrt(data.values)
    rho = np.asarray(kab, dtype=float).reshape(-1) / sa[ia]
    rho /= sa[ib]
    return _eval_rho(data, ia, ib, rho, want_g, byte_budget)


def _eval_rho(data: _DiagData, ia: Array, ib: Array, rho: Array, want_g: bool, byte_budget: int
              ) -> tuple[Array, Array]:
    """f and g at elements (values[ia], values[ib], rho) (1-D; rho is clipped in place into [-1, 1])."""
    np.clip(rho, -1.0, 1.0, out=rho)
    if data.tables is not None:
        n = data.values.size
        code = ia * n + ib
        f = np.empty(rho.size)
        g = np.empty(rho.size)
        for c in np.unique(code).tolist():
            mask = code == c
            rf, rg = data.tables[(c // n, c % n)].both(rho[mask])
            f[mask], g[mask] = rf, rg
        return f, g
    return _series_rho(data, ia, ib, rho, want_g, byte_budget)


def _series_rho(data: _DiagData, ia: Array, ib: Array, rho: Array, want_g: bool, byte_budget: int
                ) -> tuple[Array, Array]:
    """The certified Mehler series per element (see the module docstring), the pair quadrature beyond it."""
    assert data.coefT is not None and data.logtail_f is not None and data.logtail_g is not None
    tol = series_tolerance(data)
    sa = np.sqrt(data.values)
    n = rho.size
    # smallest certified ladder level per element: (K + 1) log|rho| + logtail_a + logtail_b <= log tol
    with np.errstate(divide="ignore"):
        lr = np.log(np.abs(rho))
    level = np.full(n, len(data.levels), dtype=np.int16)
    ltol = math.log(tol)
    # the smallest certified level, from the bottom up on the elements not yet certified (most stop at 16 terms)
    todo = np.arange(n)
    for j, K in enumerate(data.levels):
        la, lb, lt = ia[todo], ib[todo], lr[todo]
        ok = (K + 1) * lt + data.logtail_f[j][la] + data.logtail_f[j][lb] <= ltol
        # g's criterion applies even when g is not wanted, so that f does not depend on out_dphi
        ok &= K * lt + data.logtail_g[j][la] + data.logtail_g[j][lb] <= ltol
        level[todo[ok]] = j
        todo = todo[~ok]
        if not todo.size:
            break
    f = np.empty(n)
    g = np.empty(n)
    finite = np.isfinite(rho)
    level[~finite] = len(data.levels) + 1  # NaN covariances give NaN
    f[~finite] = np.nan
    g[~finite] = np.nan
    fallback = np.nonzero(level == len(data.levels))[0]
    series = np.nonzero(level < len(data.levels))[0]
    if series.size:
        order = series[np.argsort(-level[series], kind="stable")]
        kk = np.asarray(data.levels)[level[order]]
        coefT = data.coefT
        for lo in range(0, order.size, SERIES_BLOCK):
            sel = order[lo:lo + SERIES_BLOCK]
            p, q = _horner(coefT, kk[lo:lo + SERIES_BLOCK], ia[sel], ib[sel], rho[sel], want_g)
            f[sel] = p
            if want_g:
                g[sel] = q / (sa[ia[sel]] * sa[ib[sel]])
    if fallback.size:
        fq, gq, _, _ = _pair_quadrature(data.act, sa[ia[fallback]], sa[ib[fallback]], rho[fallback], byte_budget)
        f[fallback], g[fallback] = fq, gq
    return f, g


def _horner(coefT: Array, kk: Array, ja: Array, jb: Array, r: Array, want_g: bool) -> tuple[Array, Array]:
    """p = sum_{k <= K_e} coefT[k, ja] coefT[k, jb] r^k and q = dp/dr per element, K_e = kk (non-increasing):
    Horner on the prefix of elements still active at each k."""
    m0 = r.size
    p = np.zeros(m0)
    q = np.zeros(m0)
    c = np.empty(m0)
    tmp = np.empty(m0)
    k_top = int(kk[0])
    counts = np.searchsorted(-kk, -np.arange(k_top + 1), side="right")  # elements with K_e >= k
    for k in range(k_top, -1, -1):
        m = int(counts[k])
        rk, pk, qk, ck, tk = r[:m], p[:m], q[:m], c[:m], tmp[:m]
        row = coefT[k]
        np.take(row, ja[:m], out=ck)
        np.take(row, jb[:m], out=tk)
        np.multiply(ck, tk, out=ck)
        if want_g:
            np.multiply(qk, rk, out=qk)
            np.add(qk, pk, out=qk)
        np.multiply(pk, rk, out=pk)
        np.add(pk, ck, out=pk)
    return p, q
