"""High-precision (mpmath) routes for the field-theory response, independent of the float64 kernels.

Two routes, both at ``dps`` digits:

* ``quadrature``: every Gaussian expectation is an mpmath quadrature of the
  activation and its SymPy derivatives (lambdified to mpmath); no closed form
  is used.  Diagonal element only (1-D integrals).
* ``closed``: the derived closed forms of :mod:`resprop.derive.gaussian` evaluated in
  mpmath (fast; used for the off-diagonal element and to maximise over rho).
"""
from __future__ import annotations

from functools import lru_cache

import mpmath as mp
import sympy as sp

import numpy as np

from resprop.derive import activations

from resprop.derive import gaussian
from resprop.numeric.engine import validation as V#: depth bounds of the mpmath iterations (a layer costs ~0.1 ms on the closed route, ~10-100 ms with quadratures)
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


@lru_cache(maxsize=None)
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


@lru_cache(maxsize=None)
def _closed_mp(name: str):
    if name != "erf":
        raise ValueError(f"activation: the closed-form mpmath route exists for erf only, got {name!r}")
    args = (gaussian.K_aa, gaussian.K_bb, gaussian.K_ab)
    return (sp.lambdify(args, gaussian.erf_mean_phi_phi(), "mpmath"),
            sp.lambdify(args, gaussian.erf_mean_dphi_dphi(), "mpmath"),
            sp.lambdify((gaussian.K,), gaussian.erf_mean_phi_sq(), "mpmath"),
            sp.lambdify((gaussian.K,), gaussian.erf_price_diag(), "mpmath"))


def chi_out_mp(input_kernel, depth: int, rho, sigma_w2, sigma_b2, sigma_w2_out=None, input_kernel_offdiag=None,
               activation: str = "erf", dps: int = 30, route: str = "quadrature") -> mp.mpf:
    """chi_out (48) at dps digits; diagonal element K^(0) = input_kernel, or the off-diagonal one when
    input_kernel_offdiag is given."""
    dps = _dps(dps)
    route = V.choice("route", route, ("quadrature", "closed"))
    depth = V.integer("depth", depth, 1, MAX_DEPTH_CLOSED if route == "closed" else MAX_DEPTH_QUADRATURE)
    k0 = _num("input_kernel", input_kernel, V.positive)
    k0_offdiag = input_kernel_offdiag
    if k0_offdiag is not None:
        k0_offdiag = _num("input_kernel_offdiag", k0_offdiag)
        if abs(k0_offdiag) > k0:
            raise V.ParameterError("input_kernel_offdiag", f"must satisfy |input_kernel_offdiag| <= input_kernel, "
                                                           f"got {k0_offdiag} with input_kernel {k0}")
    with mp.workdps(dps + 10):
        rho, sw, sb = _num("rho", rho, V.nonnegative), _num("sigma_w2", sigma_w2, V.positive), \
            _num("sigma_b2", sigma_b2, V.nonnegative)
        swo = sw if sigma_w2_out is None else _num("sigma_w2_out", sigma_w2_out, V.positive)
        if route == "quadrature":
            if k0_offdiag is not None:
                raise ValueError("route: the quadrature route is diagonal-only; use route='closed'")
            phi, dphi, ddphi = _activation_mp(activation)
            m2 = lambda K: gaussian_mean_mp(lambda h: phi(h) ** 2, K)  # noqa: E731
            g = lambda K: gaussian_mean_mp(lambda h: dphi(h) ** 2 + phi(h) * ddphi(h), K)  # noqa: E731
        elif route == "closed":
            pp, dd, m2, g = _closed_mp(activation)
        else:
            raise ValueError(f"route: must be 'quadrature' or 'closed', got {route!r}")
        Kd = mp.mpf(k0)
        Ko = None if k0_offdiag is None else mp.mpf(k0_offdiag)
        chi = mp.mpf(1)
        for _ in range(int(depth)):
            if Ko is None:
                eta = rho**2 * sw * g(Kd) * chi
                Kd = Kd + rho**2 * (sw * m2(Kd) + sb)
            else:
                eta = rho**2 * sw * dd(Kd, Kd, Ko) * chi
                Ko = Ko + rho**2 * (sw * pp(Kd, Kd, Ko) + sb)
                Kd = Kd + rho**2 * (sw * m2(Kd) + sb)
            chi = chi + eta
        factor = g(Kd) if Ko is None else dd(Kd, Kd, Ko)
        return +(swo * factor * chi)


def rho_star_mp(input_kernel, depth: int, sigma_w2, sigma_b2, start: float, sigma_w2_out=None,
                input_kernel_offdiag=None, dps: int = 30) -> mp.mpf:
    """argmax_rho chi_out at dps digits: bisection on the central-difference slope (closed-form erf route).

    ``start`` must lie within 0.1% of the maximiser (a ParameterError naming it otherwise: there is no interior
    maximum there to refine)."""
    dps = _dps(dps)
    start = _num("start", start, V.positive)
    with mp.workdps(dps + 15):
        f = lambda r: chi_out_mp(input_kernel, depth, r, sigma_w2, sigma_b2, sigma_w2_out, input_kernel_offdiag,  # noqa: E501,E731
                                 dps=dps + 15, route="closed")
        lo, hi = mp.mpf(start) * (1 - mp.mpf("1e-3")), mp.mpf(start) * (1 + mp.mpf("1e-3"))
        h = mp.mpf(10) ** (-(dps + 15) // 2)
        slope = lambda r: (f(r * (1 + h)) - f(r * (1 - h))) / (2 * h * r)  # noqa: E731  O(h^2) = 1e-(dps+15)
        if not (slope(lo) > 0 > slope(hi)):
            raise V.ParameterError("start", "the maximum of chi_out is not within 0.1% of the start value (no "
                                            "interior maximum of chi_out there)")
        # bisection on the sign of the slope: robust where the maximum is flat
        while hi - lo > mp.mpf(10) ** (-dps - 2) * hi:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if slope(mid) > 0 else (lo, mid)
        return (lo + hi) / 2


# --------------------------------------------------------------------------- Li, Nica & Roy: J2-bar
def j2bar_quadrature_mp(theta, dps: int = 30) -> mp.mpf:
    """J2-bar(theta) = 2 E[relu(Z)^2 relu(cos t Z + sin t W)^2] (eq. 23) by 2-D mpmath quadrature.

    In polar coordinates Z = r cos(psi), W = r sin(psi) the integrand is r^5 e^{-r^2/2} cos^2(psi)
    cos^2(psi - t) / (2 pi) on the rectangle r > 0, psi in (t - pi/2, pi/2) where both ReLUs are open;
    mpmath integrates it as a 2-D tanh-sinh quadrature (no closed form is used).
    """
    dps = _dps(dps)
    with mp.workdps(dps + 10):
        t = _theta(theta)
        value = 2 * mp.quad(lambda r, psi: r**5 * mp.exp(-r * r / 2) * mp.cos(psi) ** 2 * mp.cos(psi - t) ** 2,
                            [0, mp.inf], [t - mp.pi / 2, mp.pi / 2]) / (2 * mp.pi)
        return +value


@lru_cache(maxsize=None)
def _j2bar_closed_mp():
    from resprop.derive.theories import lognormal as log_gaussian
    return sp.lambdify(log_gaussian.theta, log_gaussian.j2bar_closed_form(), "mpmath")


def j2bar_closed_mp(theta, dps: int = 30) -> mp.mpf:
    """The derived closed form of J2-bar evaluated in mpmath."""
    dps = _dps(dps)
    with mp.workdps(dps + 10):
        return +_j2bar_closed_mp()(_theta(theta))


# --------------------------------------------------------------------------- PDLT: nu(gamma) by iteration
def _sigma_mp(activation: str):
    from resprop.numeric.theories.pdlt.residual_mlp import activation_class

    ac = activation_class(activation)
    if ac.kind == "k0":
        return ac, (mp.tanh if ac.name == "tanh" else mp.erf)
    ap, am = mp.mpf(ac.a_plus), mp.mpf(ac.a_minus)
    return ac, (lambda z: ap * z if z > 0 else am * z)


def vertex_trajectory_mp(activation: str, gamma, depth: int, input_kernel=1, dps: int = 30) -> list[tuple[mp.mpf, mp.mpf]]:
    """(K^(l), V^(l)) for l = 1..depth at criticality, every Gaussian integral an mpmath quadrature.

    The recursions are B.12 and B.26 written out here in mpmath (not the float64 generated kernels):
    K' = C_W <s^2> + gamma^2 K, V' = C_W^2 (<s^4> - <s^2>^2) + chi^2 V + 4 gamma^2 (chi - gamma^2) K^2,
    chi = gamma^2 + C_W (<s^2 z^2> - K <s^2>)/(2 K^2), C_W = (1 - gamma^2)/A_2 or (1 - gamma^2)/sigma_1^2.
    """
    ac, s = _sigma_mp(activation)
    dps = _dps(dps)
    depth = V.integer("depth", depth, 1, MAX_DEPTH_QUADRATURE)
    gamma = _num("gamma", gamma, V.nonnegative)
    if gamma >= 1:
        raise V.ParameterError("gamma", f"must lie in [0, 1) (criticality needs gamma^2 < 1), got {gamma}")
    K1 = _num("input_kernel", input_kernel, V.positive)
    with mp.workdps(dps + 10):
        g2 = mp.mpf(gamma) ** 2
        if ac.kind == "k0":
            s1 = mp.mpf(1) if ac.name == "tanh" else 2 / mp.sqrt(mp.pi)
            cw = (1 - g2) / s1**2
        else:
            cw = (1 - g2) / ((mp.mpf(ac.a_plus) ** 2 + mp.mpf(ac.a_minus) ** 2) / 2)
        K, Vl = mp.mpf(K1), mp.mpf(0)
        out = [(K, Vl)]
        for _ in range(depth - 1):
            m2 = gaussian_mean_mp(lambda z: s(z) ** 2, K)
            m2z = gaussian_mean_mp(lambda z: s(z) ** 2 * z * z, K)
            m4 = gaussian_mean_mp(lambda z: s(z) ** 4, K)
            chi = g2 + cw * (m2z - K * m2) / (2 * K * K)
            Vl = cw**2 * (m4 - m2 * m2) + chi**2 * Vl + 4 * g2 * (chi - g2) * K * K
            K = cw * m2 + g2 * K
            out.append((K, Vl))
    return out


def nu_from_iteration_mp(activation: str, gamma, depth: int = 400, dps: int = 30) -> dict:
    """The deep slope of V^(l)/K^(l)^2 from ``vertex_trajectory_mp``.

    Scale-invariant activations: the per-layer increment (constant at criticality).  K* = 0 class: the
    increments s_l = V_{l+1}/K_{l+1}^2 - V_l/K_l^2 approach nu with corrections a/l + b ln(l)/l; they are
    fitted on the last half of the layers and extrapolated to l -> oo.
    """
    depth = V.integer("depth", depth, 3, MAX_DEPTH_QUADRATURE)  # the fit needs a few increments
    traj = vertex_trajectory_mp(activation, gamma, depth, dps=dps)
    with mp.workdps(dps + 10):
        ratio = [Vl / (K * K) for K, Vl in traj]
        inc = [ratio[i + 1] - ratio[i] for i in range(len(ratio) - 1)]
        ac, _ = _sigma_mp(activation)
        if ac.kind == "scale_invariant":
            return {"nu": +inc[-1], "last_increment": +inc[-1], "depth": depth}
        ls = list(range(len(inc) // 2, len(inc)))
        A = mp.matrix([[1, mp.mpf(1) / (l + 1), mp.log(l + 1) / (l + 1)] for l in ls])
        b = mp.matrix([inc[l] for l in ls])
        coef = mp.lu_solve(A.T * A, A.T * b)
        return {"nu": +coef[0], "last_increment": +inc[-1], "depth": depth}
