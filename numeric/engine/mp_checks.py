"""High-precision (mpmath) routes for the field-theory response, independent of the float64 kernels.

Two routes, both at ``dps`` digits:

* ``quadrature``: every Gaussian expectation is an mpmath quadrature of the
  activation and its SymPy derivatives (lambdified to mpmath); no closed form
  is used.  Diagonal element only (1-D integrals).
* ``closed``: the derived closed forms of :mod:`resprop.derive.gaussian` evaluated in
  mpmath (fast; used for the off-diagonal element and to maximise over rho).
"""
from __future__ import annotations

from functools import cache

import mpmath as mp
import numpy as np
import sympy as sp

from resprop.derive import activations, gaussian
from resprop.numeric.engine import validation as V

#: depth bounds of the mpmath iterations (a layer costs ~0.1 ms on the closed route, ~10-100 ms with quadratures)
MAX_DEPTH_CLOSED = 10**5
MAX_DEPTH_QUADRATURE = 10**4
MAX_DPS = 1000


def _num(name: str, value, check=V.real) -> mp.mpf:
    """A validated real scalar (no NaN/inf, ``check``'s range) as an mpf, keeping an mpf's own precision."""
    V.scalar(name, value, check)
    if isinstance(value, mp.mpf):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        return mp.mpf(float(value))
    return mp.mpf(value)


def _theta(theta) -> mp.mpf:
    t = _num("theta", theta, V.nonnegative)
    if t > mp.pi:
        raise V.ParameterError("theta", f"must lie in [0, pi], got {theta}")
    return t


def _dps(dps) -> int:
    return V.integer("dps", dps, 1, MAX_DPS)


@cache
def _activation_mp(name: str):
    phi, dphi, ddphi = activations.derivatives(activations.activation_expr(name))
    return tuple(sp.lambdify(activations.x, e, modules="mpmath") for e in (phi, dphi, ddphi))


def gaussian_mean_mp(f, K) -> mp.mpf:
    """E[f(u)], u ~ N(0, K), by mpmath quadrature on (-inf, 0, inf)."""
    s = mp.sqrt(K)
    return mp.quad(lambda z: f(s * z) * mp.exp(-z * z / 2), [-mp.inf, 0, mp.inf]) / mp.sqrt(2 * mp.pi)


def gaussian_mean2_mp(f, g, K_aa, K_bb, K_ab) -> mp.mpf:
    """E[f(u) g(v)] for a centred bivariate Gaussian, by nested mpmath quadrature."""
    sa = mp.sqrt(K_aa)
    c = K_ab / sa
    s = mp.sqrt(K_bb - c * c)
    # split the inner integral where v = 0 so kinks at the origin (ReLU) sit on an endpoint
    inner = lambda z1: f(sa * z1) * mp.quad(lambda z2: g(c * z1 + s * z2) * mp.exp(-z2 * z2 / 2),  # noqa: E731
                                             [-mp.inf, -c * z1 / s, mp.inf])
    return mp.quad(lambda z1: inner(z1) * mp.exp(-z1 * z1 / 2), [-mp.inf, 0, mp.inf]) / (2 * mp.pi)


@cache
def _closed_mp(name: str):
    if name != "erf":
        raise ValueError(f"activation: the closed-form mpmath route exists for erf only, got {name!r}")
    args = (gaussian.K_aa, gaussian.K_bb, gaussian.K_ab)
    return (sp.lambdify(args, gaussian.erf_mean_phi_phi(), "mpmath"),
            sp.lambdify(args, gaussian.erf_mean_dphi_dphi(), "mpmath"),
            sp.lambdify((gaussian.K,), gaussian.erf_mean_phi_sq(), "mpmath"),
            sp.lambdify((gaussian.K,), gaussian.erf_price_diag(), "mpmath"))
