"""Gaussian toolbox: Price's theorem (symbolic and numeric), closed forms vs textbook forms vs quadrature."""
import numpy as np
import pytest
import sympy as sp
from conftest import bivariate_mean_quad, univariate_mean_quad
from scipy.special import erf, ndtr

from resprop.derive import gaussian as G
from resprop.numeric.engine.expectations import kernels


@pytest.mark.parametrize("degree", [2, 4, 6])
def test_price_theorem_polynomials(degree):
    """General bivariate polynomial of the given degree with symbolic coefficients: residuals vanish."""
    res = G.price_theorem_residuals(degree)
    assert all(v == 0 for v in res.values()), res


def test_price_without_half_is_wrong():
    """Eq. 38 as printed (no 1/2) fails already for f = x^4: d<x^4>/dK = 6K but <(x^4)''> = 12K."""
    x, K = sp.symbols("x K", positive=True)
    mean = lambda f: G.polynomial_expectation(f, (x, sp.Symbol("y")), K, 1, 0)  # noqa: E731
    assert sp.diff(mean(x**4), K) == 6 * K
    assert mean(sp.diff(x**4, x, 2)) == 12 * K


NUMPY_ACTS = {
    "erf": (lambda h: erf(h), lambda h: 2 / np.sqrt(np.pi) * np.exp(-h * h),
            lambda h: -4 * h / np.sqrt(np.pi) * np.exp(-h * h)),
    "tanh": (np.tanh, lambda h: 1 / np.cosh(h) ** 2, lambda h: -2 * np.tanh(h) / np.cosh(h) ** 2),
    "gelu": (lambda h: h * ndtr(h), lambda h: ndtr(h) + h * np.exp(-h * h / 2) / np.sqrt(2 * np.pi),
             lambda h: (2 - h * h) * np.exp(-h * h / 2) / np.sqrt(2 * np.pi)),
    "relu": (lambda h: max(h, 0.0), lambda h: float(h > 0), lambda h: 0.0),
    "linear": (lambda h: h, lambda h: 1.0, lambda h: 0.0),
}


@pytest.mark.parametrize("name", ["erf", "tanh", "gelu", "relu"])
def test_price_numeric(name):
    """d<phi(u) phi(v)>/dK_ab = <phi'(u) phi'(v)> and d<phi^2>/dK = 1/2 <(phi^2)''> = <phi'^2 + phi phi''>,
    by finite differences of adaptive quadratures (independent of closed forms and Gauss-Hermite kernels).
    phi'' of ReLU is a delta at 0 multiplied by phi(0) = 0, so it drops out."""
    phi, dphi, ddphi = NUMPY_ACTS[name]
    Ka, Kb, Kab, h = 0.7, 0.4, 0.2, 1e-4
    m = lambda c: bivariate_mean_quad(phi, phi, Ka, Kb, c)  # noqa: E731
    lhs = (m(Kab + h) - m(Kab - h)) / (2 * h)
    rhs = bivariate_mean_quad(dphi, dphi, Ka, Kb, Kab)
    assert abs(lhs - rhs) < 1e-7 * abs(rhs)
    s = lambda K: univariate_mean_quad(lambda u: phi(u) ** 2, K)  # noqa: E731
    lhs_d = (s(Ka + h) - s(Ka - h)) / (2 * h)
    price = univariate_mean_quad(lambda u: dphi(u) ** 2 + phi(u) * ddphi(u), Ka)
    assert abs(lhs_d - price) < 1e-7 * abs(price)


def test_erf_closed_form_is_williams():
    """Derived <erf erf> equals Williams (1998): (2/pi) asin(2 K_ab / sqrt((1+2K_aa)(1+2K_bb)))."""
    w = 2 / sp.pi * sp.asin(2 * G.K_ab / sp.sqrt((1 + 2 * G.K_aa) * (1 + 2 * G.K_bb)))
    pts = [(0.3, 0.7, 0.1), (2.0, 0.5, -0.9), (0.05, 0.05, 0.03)]
    for a, b, c in pts:
        sub = {G.K_aa: a, G.K_bb: b, G.K_ab: c}
        assert abs(sp.N((G.erf_mean_phi_phi() - w).subs(sub), 30)) < 1e-28


@pytest.mark.parametrize("n", [0, 1, 2])
def test_relu_derived_equals_cho_saul(n):
    k = G.relu_arccos_normalised()[n]
    diff = sp.simplify((k - G.cho_saul_arccos(n)).rewrite(sp.asin))
    assert diff == 0 or all(abs(sp.N(diff.subs(G._r, r), 30)) < 1e-28 for r in (-0.95, -0.3, 0.0, 0.4, 0.99))


def _random_pairs(rng, n=6):
    Ka = 0.05 + 2 * rng.random(n)
    Kb = 0.05 + 2 * rng.random(n)
    c = (2 * rng.random(n) - 1) * 0.95 * np.sqrt(Ka * Kb)
    return Ka, Kb, c


@pytest.mark.parametrize("name", ["erf", "relu", "tanh", "gelu", "linear"])
def test_kernels_against_quadrature(name):
    """Every expectation of every route (closed form or generated Gauss-Hermite) vs adaptive 2-D quadrature."""
    rng = np.random.default_rng(3)
    kern = kernels(name)
    phi, dphi, _ = NUMPY_ACTS[name]
    sq = lambda h: phi(h) ** 2  # noqa: E731
    # closed forms are exact to round-off; Gauss-Hermite (tanh, gelu: poles near the real axis) converges
    # algebraically, ~1e-10 at these variances with the generated orders (documented in README)
    tol = 1e-11 if kern.closed_form else 1e-9
    for Ka, Kb, c in zip(*_random_pairs(rng, 3)):
        for fn, (f, g) in ((kern.mean_phi_phi, (phi, phi)), (kern.mean_dphi_dphi, (dphi, dphi)),
                           (kern.mean_phi_sq_phi_sq, (sq, sq))):
            ref = bivariate_mean_quad(f, g, Ka, Kb, c)
            assert abs(float(fn(Ka, Kb, c)) - ref) <= tol * max(1.0, abs(ref)), (fn, Ka, Kb, c, ref)
        ref = univariate_mean_quad(lambda u: dphi(u) ** 2 + phi(u) * NUMPY_ACTS[name][2](u), Ka)
        assert abs(float(kern.price_diag(Ka)) - ref) <= 1e-12 * max(1.0, abs(ref))  # 1-D: composite Gauss-Legendre


def test_custom_sympy_activation_goes_through_generated_kernels():
    """A user-given SymPy activation (sin) gets rendered GH kernels; <sin u sin v> = e^{-(Ka+Kb)/2} sinh(Kab)."""
    x = sp.Symbol("x")
    kern = kernels(sp.sin(x))
    Ka, Kb, c = 0.8, 0.5, 0.3
    exact = np.exp(-(Ka + Kb) / 2) * np.sinh(c)
    assert abs(kern.mean_phi_phi(Ka, Kb, c) - exact) < 1e-13
    # <cos u cos v> = e^{-(Ka+Kb)/2} cosh(Kab); price_diag = d<sin^2>/dK = d[(1 - e^{-2K})/2]/dK = e^{-2K}
    assert abs(kern.mean_dphi_dphi(Ka, Kb, c) - np.exp(-(Ka + Kb) / 2) * np.cosh(c)) < 1e-13
    assert abs(kern.price_diag(Ka) - np.exp(-2 * Ka)) < 1e-13
    assert kern.name.startswith("custom_")


def test_mpmath_route_against_closed_forms_25_digits():
    """The mpmath quadrature route and the derived closed forms agree to >= 25 digits (erf, 1-D) and to
    >= 18 digits for the nested 2-D quadrature (run at 20 digits to keep the suite fast)."""
    import mpmath as mp

    from resprop.numeric.engine.mp_checks import gaussian_mean2_mp, gaussian_mean_mp

    with mp.workdps(30):
        Ka, Kb, c = mp.mpf("0.7"), mp.mpf("0.4"), mp.mpf("0.2")
        sub = {G.K_aa: Ka, G.K_bb: Kb, G.K_ab: c}
        dphi = lambda h: 2 / mp.sqrt(mp.pi) * mp.exp(-h * h)  # noqa: E731
        with mp.workdps(20):
            ref = gaussian_mean2_mp(dphi, dphi, Ka, Kb, c)
        assert abs(ref - sp.N(G.erf_mean_dphi_dphi().subs(sub), 30)) < mp.mpf(10) ** -18
        ref1 = gaussian_mean_mp(lambda h: mp.erf(h) ** 2, Ka)
        assert abs(ref1 - sp.N(G.erf_mean_phi_sq().subs(G.K, Ka), 30)) < mp.mpf(10) ** -25
