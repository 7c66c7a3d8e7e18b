"""The finite-width recursion's derived terms (derive/fluctuations.py -> generated/fluctuation_step.py), each against
an independent route: mpmath quadrature, an exact Gauss-Hermite rule, closed-form Gaussian averages, and plain
matrix algebra on the flattened index pairs."""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from resprop.derive import fluctuations as F
from resprop.generated import fluctuation_step as step


def _gaussian_mean(f, K: float) -> mp.mpf:
    """E[f(z)], z ~ N(0, K), by mpmath quadrature (30 digits)."""
    s = mp.sqrt(K)
    return mp.quad(lambda x: f(s * x) * mp.exp(-x * x / 2), [-mp.inf, 0, mp.inf]) / mp.sqrt(2 * mp.pi)


def test_heat_coefficient_against_a_numerical_derivative():
    """d E_K[tanh(z)^2] / dK (mpmath's numerical derivative) = HEAT E[(tanh^2)''(z)]."""
    mp.mp.dps = 30
    f = lambda x: mp.tanh(x) ** 2  # noqa: E731
    f2 = lambda x: mp.diff(f, x, 2)  # noqa: E731
    for K in (0.3, 1.7):
        lhs = mp.diff(lambda k: _gaussian_mean(f, k), K)
        rhs = _gaussian_mean(f2, K)
        assert abs(lhs / rhs - step.HEAT) < 1e-12
    assert float(F.heat_coefficient()) == step.HEAT


def test_mean_shift_coefficients_against_the_exact_average_over_a_gaussian_delta():
    """f = cos: E_(K+delta)[cos z] = exp(-(K + delta)/2); for delta ~ N(mu, s^2) its average is exp(-K/2 - mu/2 +
    s^2/8) exactly.  The expansion G + a mu d2G + b E[delta^2] d4G (d2G = -G, d4G = G) must match it to third order
    in (mu, s): the error shrinks 8x when mu and s halve."""
    K = 0.9
    G = math.exp(-K / 2)
    errors = []
    for scale in (1e-2, 5e-3):
        mu, s = 0.7 * scale, 1.3 * scale
        exact = math.exp(-K / 2 - mu / 2 + s * s / 8)
        second_moment = s * s + mu * mu
        approx = G + step.MEAN_SHIFT_FIRST * mu * (-G) + step.MEAN_SHIFT_SECOND * second_moment * G
        errors.append(abs(approx - exact))
    assert 6.0 < errors[0] / errors[1] < 10.0  # third order: the first two orders are right
    assert (step.MEAN_SHIFT_FIRST, step.MEAN_SHIFT_SECOND) == (0.5, 0.125)


def test_wick_against_an_exact_gauss_hermite_fourth_moment():
    """Cov[z_c z_d, z_e z_f] from E[z_c z_d z_e z_f] on the tensor Gauss-Hermite rule with 3 nodes per whitened
    coordinate (exact for degree 4), minus K_cd K_ef."""
    rng = np.random.default_rng(3)
    for p in (1, 2, 3):
        A = rng.standard_normal((p, p)) + 2 * np.eye(p)
        K = A @ A.T
        x, wt = np.polynomial.hermite_e.hermegauss(3)
        wt = wt / wt.sum()
        grids = np.meshgrid(*([x] * p), indexing="ij")
        u = np.stack([g.ravel() for g in grids], axis=-1)
        weights = np.prod(np.meshgrid(*([wt] * p), indexing="ij"), axis=0).ravel()
        z = u @ A.T
        fourth = np.einsum("n,nc,nd,ne,nf->cdef", weights, z, z, z, z)
        ref = fourth - np.einsum("cd,ef->cdef", K, K)
        got = step.wick(K[None])[0]
        assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()


@pytest.mark.parametrize("k", range(6))
def test_raising_factor_by_quadrature(k):
    """E[tanh'(z) h_k(z)] = r(k) E[tanh(z) h_(k+1)(z)], z ~ N(0, 1), h_k = He_k / sqrt(k!) (mpmath)."""
    mp.mp.dps = 30

    def h(n, x):
        return mp.hermite(n, x / mp.sqrt(2)) * mp.mpf(2) ** (-mp.mpf(n) / 2) / mp.sqrt(mp.factorial(n))

    lhs = _gaussian_mean(lambda x: (1 - mp.tanh(x) ** 2) * h(k, x), 1)
    rhs = _gaussian_mean(lambda x: mp.tanh(x) * h(k + 1, x), 1)
    if abs(rhs) < 1e-25:  # odd/even parity: both vanish
        assert abs(lhs) < 1e-25
    else:
        assert abs(lhs / rhs - step.raising(k)) < 1e-15 * step.raising(k)  # float64 sqrt(k + 1)


def test_hermite_shift_factor_is_the_factorial_ratio():
    for alpha, beta in (((0, 0), (2, 0)), ((1, 0), (1, 1)), ((3, 2, 1), (0, 2, 1)), ((0, 0, 0, 0), (1, 1, 1, 1))):
        ref = math.sqrt(math.prod(math.factorial(a + b) / math.factorial(a) for a, b in zip(alpha, beta)))
        assert abs(step.hermite_shift_factor(alpha, beta) - ref) <= 1e-15 * ref


def test_covariance_update_against_flattened_matrix_algebra():
    """C' = chi C chi^T + w (chi X + (chi X)^T) + w^2 Cov(T, T) with chi = g 1 + HEAT w J2 as a p^2 x p^2 matrix on
    the flattened index pairs (plain matrix products, not the generated einsum terms)."""
    rng = np.random.default_rng(5)
    p, g, w = 2, 0.81, 0.37
    n = p * p
    J2 = rng.standard_normal((1, p, p, p, p))
    C, X, T = (rng.standard_normal((1, p, p, p, p)) for _ in range(3))
    C, T = (a + a.transpose(0, 3, 4, 1, 2) for a in (C, T))  # covariances: symmetric under swapping the pairs
    chi = g * np.eye(n) + 0.5 * w * J2[0].reshape(n, n)
    Cm, Xm, Tm = (a[0].reshape(n, n) for a in (C, X, T))
    ref = chi @ Cm @ chi.T + w * (chi @ Xm + (chi @ Xm).T) + w * w * Tm
    got = step.covariance_update(J2, g, w, C, X, T)[0].reshape(n, n)
    assert np.abs(got - ref).max() <= 1e-13 * np.abs(ref).max()


def test_the_derivation_is_what_the_generated_module_holds():
    """The derived terms as the template printed them (resprop derive --check covers the file as a whole)."""
    terms = F.wick_terms()
    assert {t.subscripts for t in terms} == {"bce,bdf->bcdef", "bcf,bde->bcdef"}
    assert dict((name, c) for c, name in F.covariance_terms()) == {"chiCchi": "1", "chiX": "w", "chiX_T": "w",
                                                                  "covTT": "w * w"}
