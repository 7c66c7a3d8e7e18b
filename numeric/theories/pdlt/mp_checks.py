"""PDLT App. B at high precision: kernel and four-point-vertex recursions iterated in mpmath, nu(gamma) from the
iteration."""

from __future__ import annotations

from dataclasses import dataclass

import mpmath as mp

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.mp_checks import (
    MAX_DEPTH_QUADRATURE,
    _dps,
    _num,
    gaussian_mean_mp,
)
from resprop.numeric.engine.results import ResultRecord


@dataclass(frozen=True)
class NuFromIteration(ResultRecord):
    """:func:`nu_from_iteration_mp`: the extrapolated slope ``nu`` and the last per-layer increment of
    V/K^2 (mpmath numbers at the working precision) and the iterated ``depth``."""

    nu: mp.mpf
    last_increment: mp.mpf
    depth: int


def _sigma_mp(activation: str):
    from resprop.numeric.theories.pdlt.residual_mlp import activation_class

    ac = activation_class(activation)
    if ac.kind == "k0":
        return ac, (mp.tanh if ac.name == "tanh" else mp.erf)
    ap, am = mp.mpf(ac.a_plus), mp.mpf(ac.a_minus)
    return ac, (lambda z: ap * z if z > 0 else am * z)


def vertex_trajectory_mp(
    activation: str, gamma, depth: int, input_kernel=1, dps: int = 30
) -> list[tuple[mp.mpf, mp.mpf]]:
    """(K^(l), V^(l)) for the layers l = 0..depth at criticality (depth + 1 pairs), every Gaussian integral an
    mpmath quadrature.  ``depth`` is the number of residual layers after the input (docs/api-renames.md, "Depth: one
    convention"); layer 0 is the input K = input_kernel, V = 0 (PDLT's layer 1, so PDLT's L is depth + 1).

    The recursions are B.12 and B.26 written out here in mpmath (not the float64 generated kernels):
    K' = C_W <s^2> + gamma^2 K, V' = C_W^2 (<s^4> - <s^2>^2) + chi^2 V + 4 gamma^2 (chi - gamma^2) K^2,
    chi = gamma^2 + C_W (<s^2 z^2> - K <s^2>)/(2 K^2), C_W = (1 - gamma^2)/A_2 or (1 - gamma^2)/sigma_1^2.
    """
    ac, s = _sigma_mp(activation)
    dps = _dps(dps)
    depth = V.integer("depth", depth, 0, MAX_DEPTH_QUADRATURE)
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
        for _ in range(depth):
            m2 = gaussian_mean_mp(lambda z: s(z) ** 2, K)
            m2z = gaussian_mean_mp(lambda z: s(z) ** 2 * z * z, K)
            m4 = gaussian_mean_mp(lambda z: s(z) ** 4, K)
            chi = g2 + cw * (m2z - K * m2) / (2 * K * K)
            Vl = cw**2 * (m4 - m2 * m2) + chi**2 * Vl + 4 * g2 * (chi - g2) * K * K
            K = cw * m2 + g2 * K
            out.append((K, Vl))
    return out


def nu_from_iteration_mp(activation: str, gamma, depth: int = 399, dps: int = 30) -> NuFromIteration:
    """The deep slope of V^(l)/K^(l)^2 from ``vertex_trajectory_mp`` over ``depth`` residual layers (depth >= 2:
    the fit needs a few increments).

    Scale-invariant activations: the per-layer increment (constant at criticality).  K* = 0 class: the
    increments s_l = V_{l+1}/K_{l+1}^2 - V_l/K_l^2 approach nu with corrections a/l + b ln(l)/l; they are
    fitted on the last half of the layers and extrapolated to l -> oo.
    """
    depth = V.integer("depth", depth, 2, MAX_DEPTH_QUADRATURE)  # the fit needs a few increments
    traj = vertex_trajectory_mp(activation, gamma, depth, dps=dps)
    with mp.workdps(dps + 10):
        ratio = [Vl / (K * K) for K, Vl in traj]
        inc = [ratio[i + 1] - ratio[i] for i in range(len(ratio) - 1)]
        ac, _ = _sigma_mp(activation)
        if ac.kind == "scale_invariant":
            return NuFromIteration(nu=+inc[-1], last_increment=+inc[-1], depth=depth)
        ls = list(range(len(inc) // 2, len(inc)))
        A = mp.matrix([[1, mp.mpf(1) / (l + 1), mp.log(l + 1) / (l + 1)] for l in ls])
        b = mp.matrix([inc[l] for l in ls])
        coef = mp.lu_solve(A.T * A, A.T * b)
        return NuFromIteration(nu=+coef[0], last_increment=+inc[-1], depth=depth)
