"""Polynomial approximations of the transcendental functions the compiled kernels need, derived and error-bounded
at derive time.

The compiled backend (`resprop.derive.compiled`) evaluates arcsine and arccosine with one polynomial and no
division, so that the compiler can vectorise the loop over elements (a libm call per element cannot be
vectorised and costs 10-20 ns).  The reduction is the classical one (Cody & Waite; fdlibm's ``e_asin.c``):

    asin(x) = x + x z P(z),                     z = x^2,            |x| <= 1/2
    asin(x) = pi/2 - 2 (s + s z P(z)),          z = (1 - |x|)/2, s = sqrt(z),  |x| > 1/2

with the same P on z in [0, 1/4], where  asin(sqrt z) / sqrt z = 1 + z P(z).  (1 - |x| is exact for |x| >= 1/2,
Sterbenz, and so is the halving, so the reduced argument carries no rounding.)  P is the polynomial interpolant of
degree ``DEGREE`` at Chebyshev nodes of [0, 1/4], computed in 60-digit mpmath and rounded to float64;
arccosine reuses it: acos(x) = 2 r for x > 1/2, pi - 2 r for x < -1/2 and pi/2 - asin(x) otherwise (r the
reduced arcsine), which keeps its relative accuracy near x = 1 where pi/2 - asin(x) would cancel.

:func:`max_ulp_error` measures the float64 evaluation against mpmath on a fixed set of points (uniform, near
+-1, near +-1/2, tiny); `resprop derive` records the bound in the generated module, and tests/test_compiled_kernels.py
checks the compiled functions against mpmath at other, random points (<= 4 ulp).
"""
from __future__ import annotations

import math
from functools import cache

#: degree of P; the interpolation error at degree 12 is ~1e-18 relative to asin on [0, 1/2]; measured total
#: error of the float64 evaluation: < 2 ulp (see max_ulp_error)
DEGREE = 12
#: pi/2 and pi as a sum of two doubles (fdlibm's pio2_hi, pio2_lo)
PIO2_HI = 1.5707963267948966
PIO2_LO = 6.123233995736766e-17
PI_HI = 3.141592653589793
PI_LO = 1.2246467991473532e-16


def _reduced(z):
    """(asin(sqrt z)/sqrt z - 1)/z in mpmath (its limit 1/6 at z = 0)."""
    import mpmath as mp

    z = mp.mpf(z)
    if z == 0:
        return mp.mpf(1) / 6
    s = mp.sqrt(z)
    return (mp.asin(s) / s - 1) / z


@cache
def asin_coefficients(degree: int = DEGREE) -> tuple[float, ...]:
    """Monomial coefficients c_0..c_degree of P (P(z) = sum c_k z^k): the interpolant at the degree + 1 Chebyshev
    nodes of [0, 1/4], solved in 60-digit arithmetic and rounded to float64."""
    import mpmath as mp

    with mp.workdps(60):
        a, b = mp.mpf(0), mp.mpf(1) / 4
        n = degree + 1
        nodes = [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
        V = mp.matrix(n, n)
        for i, x in enumerate(nodes):
            for j in range(n):
                V[i, j] = x**j
        c = mp.lu_solve(V, mp.matrix([_reduced(x) for x in nodes]))
        return tuple(float(c[j]) for j in range(n))


def _reduced_asin(a: float, coeffs) -> tuple[float, bool]:
    """r and whether |x| > 1/2 (then asin|x| = pi/2 - 2r, else asin|x| = r), evaluated as the compiled code does."""
    big = a > 0.5
    z = (1.0 - a) * 0.5 if big else a * a
    s = math.sqrt(z) if big else a
    p = 0.0
    for c in reversed(coeffs):
        p = p * z + c
    return s + s * (z * p), big


def asin_float(x: float, coeffs=None) -> float:
    """The float64 evaluation the compiled kernels use (reference implementation, for the error bound)."""
    coeffs = asin_coefficients() if coeffs is None else coeffs
    r, big = _reduced_asin(abs(x), coeffs)
    res = (PIO2_HI - 2.0 * r) + PIO2_LO if big else r
    return math.copysign(res, x)


def acos_float(x: float, coeffs=None) -> float:
    coeffs = asin_coefficients() if coeffs is None else coeffs
    r, big = _reduced_asin(abs(x), coeffs)
    if big:
        return 2.0 * r if x > 0 else (PI_HI - 2.0 * r) + PI_LO
    return (PIO2_HI - math.copysign(r, x)) + PIO2_LO


def test_points(n: int = 4000, seed: int = 0) -> list[float]:
    """The points of the derive-time bound: uniform on [-1, 1], clustered at +-1 and +-1/2, tiny, and the ends."""
    import numpy as np

    rng = np.random.default_rng(seed)
    u = rng.uniform(-1, 1, n)
    near_one = 1 - np.exp(rng.uniform(np.log(1e-16), np.log(0.5), n // 4))
    near_half = 0.5 + rng.uniform(-1e-3, 1e-3, n // 8)
    tiny = np.exp(rng.uniform(np.log(1e-300), np.log(1e-3), n // 8))
    special = [0.0, 1.0, 0.5, math.nextafter(0.5, 1), math.nextafter(0.5, 0), math.nextafter(1.0, 0), 5e-324]
    pts = np.concatenate([u, near_one, near_half, tiny, special])
    return [float(v) for v in np.concatenate([pts, -pts])]


def ulp_error(got: float, ref) -> float:
    """|got - ref| in units of the last place of ref (a float64 ulp; mpmath reference)."""
    import mpmath as mp
    import numpy as np

    ulp = float(np.spacing(abs(float(ref)))) if float(ref) != 0 else 5e-324
    return float(abs(mp.mpf(got) - ref) / mp.mpf(ulp))


@cache
def max_ulp_error() -> dict[str, float]:
    """The largest error in ulp of the float64 arcsine and arccosine over `test_points` (mpmath, 30 digits)."""
    import mpmath as mp

    out = {}
    with mp.workdps(30):
        for name, fn, ref in (("asin", asin_float, mp.asin), ("acos", acos_float, mp.acos)):
            out[name] = max(ulp_error(fn(x), ref(mp.mpf(x))) for x in test_points())
    return out
