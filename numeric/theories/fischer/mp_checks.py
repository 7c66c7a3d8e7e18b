"""Fischer et al. at 30+ digits (mpmath): chi_out and rho* by the closed-form and quadrature routes, independent of
the float64 kernels."""

from __future__ import annotations

import mpmath as mp

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.mp_checks import (
    MAX_DEPTH_CLOSED,
    MAX_DEPTH_QUADRATURE,
    _activation_mp,
    _closed_mp,
    _dps,
    _num,
    gaussian_mean_mp,
)


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
