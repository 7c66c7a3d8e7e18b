"""The fluctuation engine's pair projections by certified Mehler sums (`fluctuation_mehler`, issue 27 item 2).

References, each from a route that shares no code with the Mehler sums:

* SymPy: exact Gaussian moments of a polynomial activation (the rotation formula and the tables together);
* mpmath: the tables' 1-D integrals at 25 digits;
* the 2-D rule of `fluctuation_quadrature._pair_projection` at a high order (100 x 160 nodes);
* the engine with the 2-D rule (``PAIR_EXPANSION`` off) for variance, mean shift and covariance.
"""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import sympy as sp

import resprop
from resprop.numeric.engine import dual_tables
from resprop.numeric.engine import fluctuation_mehler as fm
from resprop.numeric.engine import fluctuation_quadrature as fq
from resprop.numeric.engine import fluctuations as fl_mod
from resprop.numeric.engine.activation_check import check_activation
from resprop.numeric.engine.fluctuation_mc import activation_function


def _expansion(name: str) -> fm.PairExpansion:
    return fm.PairExpansion(dual_tables.activation(check_activation(name).expr))


def _factors(d0: float, d1: float, r) -> np.ndarray:
    """Lower-triangular factors of [[d0, r sqrt(d0 d1)], [., d1]] for each correlation r."""
    r = np.atleast_1d(np.asarray(r, dtype=float))
    A = np.zeros((r.size, 2, 2))
    A[:, 0, 0] = math.sqrt(d0)
    A[:, 1, 0] = r * math.sqrt(d1)
    A[:, 1, 1] = np.sqrt(1 - r * r) * math.sqrt(d1)
    return A


def test_pair_projection_is_exact_for_a_polynomial_activation():
    """phi = x^3 / 3 - x / 2 + 1/4: every projection E[phi(zeta_0) phi(zeta_1) h_i(u0) h_j(u1)] and fourth moment
    E[phi_0^(4-q) phi_1^q] exactly in SymPy (Gaussian moments of a polynomial), for a factor with rational
    entries; the Mehler sums (rotation formula, per-input tables, certified truncation) agree to round-off."""
    x, u0, u1 = sp.symbols("x u0 u1")
    phi = x**3 / 3 - x / 2 + sp.Rational(1, 4)
    a00, a10, a11 = sp.Rational(9, 10), sp.Rational(-3, 5), sp.Rational(6, 5)
    z0, z1 = a00 * u0, a10 * u0 + a11 * u1
    D = 8

    def h(k, u):  # orthonormal probabilists' Hermite
        return sp.hermite_prob(k, u) / sp.sqrt(sp.factorial(k))

    def gauss(expr):
        poly = sp.Poly(sp.expand(expr), u0, u1)
        total = sp.Integer(0)
        for (p0, p1), c in poly.terms():
            if p0 % 2 or p1 % 2:
                continue
            total += c * sp.factorial2(p0 - 1) * sp.factorial2(p1 - 1)
        return total

    f0, f1 = phi.subs(x, z0), phi.subs(x, z1)
    hb = fq.basis(2, D)
    ex = _expansion(str(phi))
    A = np.array([[[float(a00), 0.0], [float(a10), float(a11)]]])
    fhat, EFF = ex.pair_projection(A, activation_function(str(phi)), hb, 40, 64)
    assert ex.used == 1 and ex.fallback == 0
    worst = 0.0
    for n, (i, j) in enumerate(hb.alphas.tolist()):
        hij = h(i, u0) * h(j, u1)
        for c, d, ref in ((0, 0, f0 * f0), (0, 1, f0 * f1), (1, 1, f1 * f1)):
            exact = float(gauss(ref * hij))
            worst = max(worst, abs(fhat[0, c, d, n] - exact))
            assert fhat[0, d, c, n] == fhat[0, c, d, n]
    scale = float(gauss(f1 * f1))
    assert worst < 1e-13 * scale
    for q in range(5):
        exact = float(gauss(f0 ** (4 - q) * f1**q))
        c = [0] * (4 - q) + [1] * q
        assert EFF[0, c[0], c[1], c[2], c[3]] == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("activation", ["erf", "tanh"])
def test_tables_against_mpmath(activation):
    """b_k = E[phi(sqrt(d) x) h_k(x)], P_mi = E[phi h_m h_i] and E[phi^4] of one variance against mpmath's
    quadrature at 25 digits."""
    d, D = 2.3, 66
    tab = fm._tables(_expansion(activation).act, d, D)
    f = {"erf": mp.erf, "tanh": mp.tanh}[activation]
    mp.mp.dps = 30

    def h(k, x):
        return mp.hermite(k, x / mp.sqrt(2)) * mp.power(2, -mp.mpf(k) / 2) / mp.sqrt(mp.factorial(k))

    def expect(g):
        # h_40 h_33 e^(-x^2/2) reaches past 2 sqrt(40) ~ 12.6 (cut at 14 it is 1e-6 short); panels of width 1/2
        return mp.quad(lambda x: g(x) * mp.exp(-x * x / 2), mp.linspace(-24, 24, 97)) / mp.sqrt(2 * mp.pi)

    root = mp.sqrt(d)
    for k in (1, 3, 15, 41):
        ref = expect(lambda x, k=k: f(root * x) * h(k, x))
        assert abs(tab.b[k] - float(ref)) < 1e-15
    for m, i in ((3, 1), (20, 7), (40, 33)):
        ref = expect(lambda x, m=m, i=i: f(root * x) * h(m, x) * h(i, x))
        assert abs(tab.P[m, i] - float(ref)) < 1e-14
    assert tab.moments[4] == pytest.approx(float(expect(lambda x: f(root * x) ** 4)), rel=1e-14)
    mp.mp.dps = 15


@pytest.mark.parametrize("activation", ["erf", "tanh", "gelu", "sin(x) + x**2/10"])
@pytest.mark.parametrize("variances", [(0.8, 2.3), (4.0, 0.3)])
def test_pair_projection_agrees_with_a_high_order_two_dimensional_rule(activation, variances):
    """Every projection and fourth moment of 10 pairs with correlations -0.9 .. 0.95 against the 2-D rule at
    100 x 160 nodes; all certified (no pair left to the rule) at these correlations."""
    r = np.array([-0.9, -0.6, -0.2, 0.0, 0.1, 0.4, 0.7, 0.85, 0.9, 0.95])
    A = _factors(*variances, r)
    hb = fq.basis(2, 66)
    phi = activation_function(activation)
    ex = _expansion(activation)
    fhat, EFF = ex.pair_projection(A, phi, hb, 40, 64)
    ref, ref_EFF = fq._pair_projection(A, phi, hb, 100, 160)
    assert ex.fallback == 0
    scale = np.abs(ref).max(axis=(1, 2, 3))
    assert np.all(np.abs(fhat - ref).max(axis=(1, 2, 3)) < 1e-12 * scale)
    assert np.all(np.abs(EFF - ref_EFF).max(axis=(1, 2, 3, 4)) < 1e-12 * np.abs(ref_EFF).max(axis=(1, 2, 3, 4)))


def test_uncertified_pairs_go_to_the_rule_and_batching_changes_nothing():
    """tanh at variance 20 and r = 0.9999: no level of LADDER certifies the m-sum, so the pair takes the 2-D rule
    (the same numbers as the rule alone); the other pairs' results do not depend on the batch they are in (each
    pair's truncation is its own)."""
    r = np.array([0.3, 0.9999, -0.5, 0.8])
    A = _factors(20.0, 20.0, r)
    hb = fq.basis(2, 26)
    phi = activation_function("tanh")
    ex = _expansion("tanh")
    fhat, EFF = ex.pair_projection(A, phi, hb, 40, 64)
    assert ex.fallback == 1 and ex.used == 3
    alone, alone_EFF = fq._pair_projection(A[1:2], phi, hb, 40, 64)
    assert np.array_equal(fhat[1], alone[0]) and np.array_equal(EFF[1], alone_EFF[0])
    for b in (0, 2, 3):
        one, one_EFF = ex.pair_projection(A[b:b + 1], phi, hb, 40, 64)
        np.testing.assert_allclose(one[0], fhat[b], rtol=0, atol=1e-15 * np.abs(fhat[b]).max())
        np.testing.assert_allclose(one_EFF[0], EFF[b], rtol=1e-15)


def test_truncation_bound_can_fail():
    """The certified level rises with the correlation and with the variance (tanh's coefficients decay more
    slowly at larger variance) and with a tighter tolerance."""
    ex = _expansion("tanh")
    D = 66
    r = np.array([0.2, 0.6, 0.9])
    levels = {}
    for d in (0.5, 8.0):
        tabs = [fm._tables(ex.act, d, D)]
        zero = np.zeros(r.size, dtype=np.int64)
        levels[d] = fm.PairExpansion._levels(tabs, zero, zero, r, np.sqrt(1 - r * r), D)
    assert np.all(np.diff(levels[0.5]) >= 0) and np.all(levels[8.0] >= levels[0.5])
    assert levels[8.0][-1] > levels[0.5][-1]
    old = fm.TOL
    try:
        fm.TOL = 1e-17
        tabs = [fm._tables(ex.act, 0.5, D)]
        zero = np.zeros(r.size, dtype=np.int64)
        tight = fm.PairExpansion._levels(tabs, zero, zero, r, np.sqrt(1 - r * r), D)
        assert np.all(tight >= levels[0.5]) and np.any(tight > levels[0.5])
    finally:
        fm.TOL = old


def test_piecewise_and_untabulated_activations_keep_the_rule():
    assert fl_mod._expansion("relu") is None
    assert fl_mod._expansion("abs(x)") is None
    assert fl_mod._expansion("Max(x, 0) + x/10") is None
    assert isinstance(fl_mod._expansion("tanh"), fm.PairExpansion)


@pytest.mark.parametrize("activation", ["tanh", "gelu"])
def test_engine_results_do_not_depend_on_the_pair_route(monkeypatch, activation):
    """resprop.fluctuations on 8 inputs of equal norm (28 pairs >= PAIRS_PER_TABLE per class: the direct route
    takes the Mehler sums) and a three-input covariance, with the Mehler sums and with the 2-D rule: the same
    variance, mean shift and covariance to 1e-9 (the rule's own error in its high-degree projections is larger
    than the sums', but reaches the results only through small channels)."""
    X = np.random.default_rng(3).standard_normal((8, 5))
    X /= np.linalg.norm(X, axis=1, keepdims=True) / 1.3
    args = (X, activation, 3, 128, 1.4, 0.1)
    kw = dict(gamma=1.0, branch_scale=0.7, channels=24)
    on = resprop.fluctuations(*args, **kw)
    assert on._network.expansion is not None and on._network.expansion.used > 0
    cov_on = on.covariance([(0, 1, 0, 2), (1, 1, 2, 3)])
    monkeypatch.setattr(fl_mod, "PAIR_EXPANSION", False)
    off = resprop.fluctuations(*args, **kw)
    assert off._network.expansion is None
    cov_off = off.covariance([(0, 1, 0, 2), (1, 1, 2, 3)])
    for name in ("variance", "mean_shift", "law_variance"):
        a, b = getattr(on, name), getattr(off, name)
        assert np.abs(a - b).max() < 1e-9 * np.abs(b).max(), name
    assert np.abs(cov_on - cov_off).max() < 1e-9 * np.abs(cov_off).max()


def test_channels_carried_degree_by_degree_equal_the_blocks_of_gamma():
    """`carry_pair_channels` (each block of Gamma(M) built and applied in a small buffer) against the blocks of
    `second_quantization` applied by matrix products, for contractions and non-contractions M."""
    rng = np.random.default_rng(0)
    B, N = 6, 30
    M = rng.uniform(-0.9, 0.9, (B, 2, 2))
    M[0] = [[1.3, 0.0], [0.4, 0.7]]
    hb = fq.basis(2, N)
    blocks = fq.second_quantization(M, hb, N)
    nch = hb.by_degree[N].stop - 1
    src = rng.standard_normal((B, 4, nch))
    ref = np.empty((B, nch, 4))
    for m, blk in enumerate(blocks, start=1):
        sl = slice(hb.by_degree[m].start - 1, hb.by_degree[m].stop - 1)
        ref[:, sl] = np.matmul(blk, src[:, :, sl].transpose(0, 2, 1))
    got = fq.carry_pair_channels(M, N, src)
    for b in range(B):
        assert np.abs(got[b] - ref[b]).max() <= 1e-13 * np.abs(ref[b]).max()


def test_generated_rotation_step_is_the_ratio_of_binomial_weights():
    """`fluctuation_step.rotation_step` (derived in SymPy from the rotation formula's generating function) against
    the ratio of sqrt(C(m + j + 1, m)) s^(j+1) to sqrt(C(m + j, m)) s^j with integer binomials."""
    from resprop.generated import fluctuation_step as step

    for m in range(0, 60, 7):
        for j in range(0, 70, 9):
            ref = math.sqrt(math.comb(m + j + 1, m) / math.comb(m + j, m)) * 0.6
            assert step.rotation_step(m, j, 0.6) == pytest.approx(ref, rel=1e-14)
