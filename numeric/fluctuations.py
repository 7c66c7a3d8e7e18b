"""O(1/N) kernel fluctuations G_CC = G_{CC~} S_{C~C~} G_{C~C} (Fischer et al. C18-C20), single input.

The propagator column G_{CC~}^{.m} obeys the same forward recursion as the
response (43, C13) with a source delta_{lm}/N; S_{C~C~} holds the fourth
cumulants <phi^2(h^(k-1)), phi^2(h^(n-1))>^c (35, C4), where h^(a), h^(b) are
jointly Gaussian with covariance K^(min(a, b)) because the residuals f^(l)
are independent (B8).  Var K^(l) sums the whole covariance block: the
residual kernels of different layers are correlated, which (C20) omits.
"""
from __future__ import annotations

import numpy as np

import generated.fischer as gen

from . import validation as V
from .expectations import kernels
from .field_theory import response


def kernel_fluctuations(k0, depth: int, width: int, rho, sigma_w2, sigma_b2, sigma_w2_out=None, sigma_b2_out=None,
                        activation="erf") -> dict[str, np.ndarray]:
    """Covariance of the residual kernels C^(0..L+1) at width N.

    Returns ``cov_C`` ((L+2) x (L+2), G_CC), ``var_C`` (its diagonal),
    ``var_K`` (Var K^(l) = sum_{k, m <= l} G_CC^{km}, l = 0..L), ``var_K_diagonal_sum``
    (the C20 form sum_k G_CC^{kk}) and ``G12`` (the propagator block).
    """
    L = V.integer("depth", depth, 1)
    N = V.integer("width", width, 1)
    kern = kernels(activation)
    r = response(k0, L, rho, sigma_w2, sigma_b2, sigma_w2_out=sigma_w2_out, sigma_b2_out=sigma_b2_out,
                 activation=activation)
    K = r["K"]  # K^(0..L)
    swo = sigma_w2 if sigma_w2_out is None else sigma_w2_out
    w = np.array([0.0] + [rho**2 * sigma_w2] * L + [swo])  # weight of <phi^2> in C^(l); C^(0) is fixed by data
    g = np.concatenate([[0.0], kern.price_diag(K)])  # g_l = <phi'^2 + phi phi''> at K^(l-1), l = 1..L+1
    n = L + 2
    G12 = np.zeros((n, n))
    for l in range(n):
        G12[l] = (np.arange(n) == l) / N
        if l > 0:
            G12[l] += w[l] * g[l] * G12[:l].sum(axis=0)
    Ka = K[:, None] * np.ones(L + 1)[None, :]
    Kb = Ka.T
    Kmin = np.minimum(Ka, Kb)
    kappa = gen.fourth_cumulant(kern.mean_phi_sq_phi_sq(Ka, Kb, Kmin), kern.mean_phi_sq(Ka), kern.mean_phi_sq(Kb))
    B = np.zeros((n, n))
    B[1:, 1:] = N * np.outer(w[1:], w[1:]) * kappa
    cov = G12 @ B @ G12.T
    cum = np.cumsum(np.cumsum(cov[: L + 1, : L + 1], axis=0), axis=1)
    return {"cov_C": cov, "var_C": np.diag(cov).copy(), "var_K": np.diag(cum).copy(),
            "var_K_diagonal_sum": np.cumsum(np.diag(cov)[: L + 1]), "G12": G12, "K": K}
