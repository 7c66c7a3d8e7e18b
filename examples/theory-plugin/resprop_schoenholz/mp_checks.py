"""Independent references: the paper's integrals by mpmath quadrature at 30 digits, and a 2-D Gauss--Hermite
product rule for the correlation map.

Nothing here calls resprop's expectation engine, the generated kernels or the driver: the activation is
lambdified from its SymPy expression (mpmath for the 1-D integrals, NumPy for the 2-D rule), the Gaussian integrals
are ``mpmath.quad`` over the real line, and the fixed points are bracketed here and solved by ``mpmath.findroot``
(Anderson's bracketing method) or bisection.  The claims compare these numbers with the driver's.
"""
from __future__ import annotations

from functools import cache

import mpmath as mp
import numpy as np
import sympy as sp

__all__ = ["DPS", "expect", "length_fixed_point", "chi_1", "chi_q", "critical_point", "gauss_hermite_correlation"]

#: working precision of the mpmath references (decimal digits)
DPS = 30


@cache
def _functions(activation: str):
    """phi, phi', phi'' of ``activation`` (a name understood by resprop, or a SymPy expression in x) as mpmath
    functions, from the SymPy expression and its derivatives."""
    from resprop.numeric.engine.activation_check import parse

    expr = parse(activation)
    (x,) = expr.free_symbols
    derivs = [expr, sp.diff(expr, x), sp.diff(expr, x, 2)]
    return tuple(sp.lambdify(x, d, modules="mpmath") for d in derivs)


def expect(f, q) -> mp.mpf:
    """<f(z)> for z ~ N(0, q): the integral of f(sqrt(q) t) exp(-t^2/2) / sqrt(2 pi) over the real line."""
    s = mp.sqrt(q)
    return mp.quad(lambda t: f(s * t) * mp.exp(-t * t / 2), [-mp.inf, -6, -2, 0, 2, 6, mp.inf]) / mp.sqrt(2 * mp.pi)


def _bracketed_root(f, lo, hi, grid):
    """A root of ``f`` by Anderson's bracketing method on the first sign change of ``f`` along ``grid``."""
    prev, f_prev = grid[0], f(grid[0])
    for x in grid[1:]:
        fx = f(x)
        if f_prev * fx <= 0:
            return mp.findroot(f, (prev, x), solver="anderson", tol=mp.mpf(10) ** (-2 * DPS // 3))
        prev, f_prev = x, fx
    raise ArithmeticError(f"no sign change on [{lo}, {hi}]")


def length_fixed_point(activation: str, sigma_w2: float, sigma_b2: float) -> mp.mpf:
    """q* with q* = sigma_w^2 <phi^2>_{q*} + sigma_b^2 (the first crossing of the diagonal from above)."""
    with mp.workdps(DPS):
        phi, _, _ = _functions(activation)
        sw, sb = mp.mpf(sigma_w2), mp.mpf(sigma_b2)
        grid = [mp.mpf(2) ** k for k in range(-20, 21)]
        return +_bracketed_root(lambda q: sw * expect(lambda u: phi(u) ** 2, q) + sb - q, grid[0], grid[-1], grid)


def chi_1(activation: str, sigma_w2: float, q_star) -> mp.mpf:
    """sigma_w^2 <phi'(z)^2>_{q*}."""
    with mp.workdps(DPS):
        _, dphi, _ = _functions(activation)
        return +(mp.mpf(sigma_w2) * expect(lambda u: dphi(u) ** 2, q_star))


def chi_q(activation: str, sigma_w2: float, q_star) -> mp.mpf:
    """sigma_w^2 (<phi'^2> + <phi'' phi>)_{q*}: the paper's xi_q rate, xi_q = -1/log chi_q."""
    with mp.workdps(DPS):
        phi, dphi, ddphi = _functions(activation)
        return +(mp.mpf(sigma_w2) * expect(lambda u: dphi(u) ** 2 + ddphi(u) * phi(u), q_star))


def critical_point(activation: str, sigma_b2: float) -> tuple[mp.mpf, mp.mpf]:
    """(sigma_w^2, q*) on the order-to-chaos line at ``sigma_b2``: chi_1 = 1 means sigma_w^2 = 1/<phi'^2>_{q*}, and
    then q* = <phi^2>_{q*}/<phi'^2>_{q*} + sigma_b^2 is solved for q*."""
    with mp.workdps(DPS):
        phi, dphi, _ = _functions(activation)
        sb = mp.mpf(sigma_b2)

        def gap(q):
            return q - expect(lambda u: phi(u) ** 2, q) / expect(lambda u: dphi(u) ** 2, q) - sb

        grid = [mp.mpf(2) ** (k / 2) for k in range(-40, 21)]
        q = _bracketed_root(gap, grid[0], grid[-1], grid)
        return +(1 / expect(lambda u: dphi(u) ** 2, q)), +q


def gauss_hermite_correlation(activation: str, sigma_w2: float, sigma_b2: float, q_star: float,
                              nodes: int = 160) -> dict:
    """c* and chi_c from a ``nodes`` x ``nodes`` Gauss--Hermite product rule (numpy.polynomial.hermite_e) for
    <phi(u_a) phi(u_b)> and <phi'(u_a) phi'(u_b)> with u_a = sqrt(q*) z_1, u_b = sqrt(q*) (c z_1 + sqrt(1 - c^2) z_2);
    c* is the root in [0, 1 - 1e-6) of the correlation map minus c, by bisection (60 halvings), or 1 when chi_1 <= 1."""
    from resprop.numeric.engine.activation_check import parse

    expr = parse(activation)
    (x,) = expr.free_symbols
    phi = sp.lambdify(x, expr, modules=["scipy", "numpy"])
    dphi = sp.lambdify(x, sp.diff(expr, x), modules=["scipy", "numpy"])
    t, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    z1, z2 = np.meshgrid(t, t, indexing="ij")
    ww = np.outer(w, w)
    s = np.sqrt(q_star)

    def pair(f, c):
        ua, ub = s * z1, s * (c * z1 + np.sqrt(max(1.0 - c * c, 0.0)) * z2)
        return float(np.sum(ww * f(ua) * f(ub)))

    def gap(c):
        return (sigma_w2 * pair(phi, c) + sigma_b2) / q_star - c

    chi1 = sigma_w2 * pair(dphi, 1.0)
    if chi1 <= 1.0:
        c = 1.0
    else:
        lo, hi = 0.0, 1.0 - 1e-6
        if gap(hi) >= 0:
            raise ArithmeticError("the Gauss-Hermite correlation map does not fall below the diagonal near c = 1")
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if gap(mid) >= 0 else (lo, mid)
        c = 0.5 * (lo + hi)
    return {"c_star": c, "chi_c": sigma_w2 * pair(dphi, c), "chi_1": chi1, "nodes": nodes}
