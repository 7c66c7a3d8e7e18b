"""Li-Nica-Roy J2-bar(theta) at high precision: the derived closed form vs 2-D mpmath quadrature."""
from __future__ import annotations

from functools import cache

import mpmath as mp
import sympy as sp

from resprop.numeric.engine.mp_checks import (
    _dps,
    _theta,
)


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


@cache
def _j2bar_closed_mp():
    from resprop.derive.theories import lognormal as log_gaussian
    return sp.lambdify(log_gaussian.theta, log_gaussian.j2bar_closed_form(), "mpmath")


def j2bar_closed_mp(theta, dps: int = 30) -> mp.mpf:
    """The derived closed form of J2-bar evaluated in mpmath."""
    dps = _dps(dps)
    with mp.workdps(dps + 10):
        return +_j2bar_closed_mp()(_theta(theta))


# --------------------------------------------------------------------------- PDLT: nu(gamma) by iteration
