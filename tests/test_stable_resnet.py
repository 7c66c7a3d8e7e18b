"""Hayou et al. (2021) Stable ResNet: derivation checks, lemmas and propositions, the cross-check against the
foundation's NNGP recursion, deep unscaled networks without overflow, CLI and bad input."""
import json

import numpy as np
import pytest
import sympy as sp
from scipy import integrate

import resprop.numeric.theories.stable.generated.stable as gs
from resprop.derive.theories import stable as ds
from resprop.numeric.cli import main
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.fischer.field_theory import nngp
from resprop.numeric.theories.stable import stable_resnet as S


def _pair(angle=1.0, d=2):
    X = np.zeros((2, d))
    X[0, 0] = 1.0
    X[1, 0], X[1, 1] = np.cos(angle), np.sin(angle)
    return X


# --------------------------------------------------------------------------- symbolic
def test_f_is_twice_the_arccos_kernel_minus_c():
    assert sp.simplify(ds.f_from_arccos() - ds.f_paper()) == 0
    # independent route: 2 E[relu(u) relu(v)] - C by 2-D quadrature for unit variances
    for c in (-0.7, 0.1, 0.8):
        s = np.sqrt(1 - c**2)
        val = integrate.dblquad(lambda w, z: z * max(c * z + s * w, 0) * np.exp(-(z * z + w * w) / 2) / (2 * np.pi),
                                0, 12, -12, 12, epsabs=1e-12)[0]
        assert np.isclose(2 * val - c, gs.f_relu(c), atol=1e-8)


def test_eq5_from_expectation_and_lemma1_gap():
    ds.nngp_recursion_from_expectation()  # raises if eq. (5) does not follow
    assert sp.simplify(ds.lemma1_gap() + 2 * ds.sigma_b2 / ds.sigma_w2) == 0
    assert ds.f_paper().subs(ds.C, 1) == 0


def test_lemma1_printed_bound_fails_with_bias():
    """Finding: the exact unscaled Q_L(x, x) lies 2 sigma_b^2/sigma_w^2 *below* Lemma 1's bound when sigma_b > 0;
    the corrected statement Q_L >= (1 + sigma_w^2/2)^L Q_0 holds."""
    sw, sb, L = 1.5, 0.4, 30
    X = _pair()
    k = S.kernels(S.input_kernel_matrix(X, sw, sb), L, "unscaled", sw, sb)
    q0 = sb + sw / 2
    exact = np.exp(k["log_Q_diag"][0])
    assert np.isclose(exact, gs.unscaled_diagonal(q0, sw, sb, L), rtol=1e-12)
    printed = (1 + sw / 2) ** L * (sb * (1 + 2 / sw) + sw * 1.0 / 2)
    assert np.isclose(exact - printed, -2 * sb / sw, rtol=1e-6, atol=0)
    assert exact >= (1 + sw / 2) ** L * q0


def test_lemma4_rate_and_constant():
    """sigma_b = 0 unscaled: L^2 (1 - C_L) -> 9 pi^2 (1 + sw/2)^2 / (2 (sw/2)^2) (= 18 pi^2 at sw = 2)."""
    assert np.isclose(gs.lemma4_constant(2.0), 18 * np.pi**2)
    vals = [L**2 * (1 - S.two_input_kernels([L], "unscaled", angle=1.0)["correlation"][0]) for L in (2000, 16000)]
    target = gs.lemma4_constant(2.0)
    assert abs(vals[1] - target) < abs(vals[0] - target) < 0.1 * target
    assert abs(vals[1] / target - 1) < 0.01
    # with bias C_L -> 1 as well (no rate claimed)
    r = S.two_input_kernels([10, 1000], "unscaled", angle=2.0, sigma_b2=0.3)["correlation"]
    assert 1 - r[1] < 0.1 * (1 - r[0])


def test_lemma5_uniform_converges_to_ode_at_rate_one_over_L():
    X = np.array([[1.0, 0.0], [np.cos(1.0), np.sin(1.0)], [np.cos(2.5), np.sin(2.5)]])
    sw, sb = 2.0, 0.2
    Q0 = S.input_kernel_matrix(X, sw, sb)
    errs = []
    Ls = (20, 40, 80, 160)
    for L in Ls:
        k = S.kernels(Q0, L, "uniform", sw, sb, keep_layers=True)
        Q_layers = np.exp(k["log_Q_diag_layers"])[:, :, None] ** 0.5 * np.exp(k["log_Q_diag_layers"])[:, None, :] ** 0.5 \
            * k["correlation_layers"]
        q = S.ode_limit(Q0, np.arange(L + 1) / L, sw, sb)
        errs.append(np.max(np.abs(Q_layers - q)))
    slope = np.polyfit(np.log(Ls), np.log(errs), 1)[0]
    assert errs[-1] < errs[0] and abs(slope + 1) < 0.1  # Euler-type O(1/L) convergence (Lemma 5)
    # the diagonal of the ODE is the dsolve closed form: q_1 = (q0 + 2sb/sw) e^{sw/2} - 2sb/sw
    assert np.isclose(S.ode_limit(Q0, [1.0], sw, sb)[0, 0, 0], (Q0[0, 0] + 2 * sb / sw) * np.e - 2 * sb / sw)


def test_prop7_rate_against_euler_product():
    """lambda_k = 1/k: Q_inf + c = (Q_0 + c) prod(1 + a/k^2) = (Q_0 + c) sinh(pi sqrt a)/(pi sqrt a) (Euler),
    and Q_inf - Q_L = Theta(sum_{k>L} lambda_k^2) with the derived leading constant."""
    sw, sb = 2.0, 0.5
    a, c = sw / 2, 2 * sb / sw
    X = _pair(1.2)
    Q0 = S.input_kernel_matrix(X, sw, sb)
    q_inf = (Q0[0, 0] + c) * np.sinh(np.pi * np.sqrt(a)) / (np.pi * np.sqrt(a)) - c
    ratios, off = [], []
    for L in (100, 1000):
        k = S.kernels(Q0, L, "1/l", sw, sb)
        tail = np.pi**2 / 6 - np.sum(1.0 / np.arange(1, L + 1) ** 2)
        gap = q_inf - np.exp(k["log_Q_diag"][0])
        ratios.append(gap / gs.prop7_diagonal_gap(q_inf, sb, sw, tail))
        off.append(k)
    assert abs(ratios[1] - 1) < 2e-3 and abs(ratios[1] - 1) < abs(ratios[0] - 1)
    # off-diagonal: the gap between depths 100 and 1000 is also of the order of the tail (Theta)
    q100 = np.exp(off[0]["log_scale"]) * off[0]["Q_normalised"][0, 1]
    q1000 = np.exp(off[1]["log_scale"]) * off[1]["Q_normalised"][0, 1]
    tail_100 = np.sum(1.0 / np.arange(101, 1001) ** 2)
    assert 0.1 < (q1000 - q100) / tail_100 < 10


def test_definition1_stability_verdicts():
    assert S.scaling_is_stable("unscaled")["stable"] is False
    assert S.scaling_is_stable("uniform")["stable"] is True
    assert S.scaling_is_stable("decreasing")["stable"] is True
    assert S.scaling_is_stable("1/l")["stable"] is True
    assert S.scaling_is_stable("1/sqrt(l)")["stable"] is False  # decreasing but not square summable
    with pytest.raises(ParameterError, match="scaling"):
        S.lambda_squared("1/sqrt(l)", 10, require_stable=True)
    # Prop. 1's exponent sum_l lambda^2: L (unscaled), 1 (uniform), bounded (decreasing)
    assert np.isclose(S.lambda_squared("uniform", 37).sum(), 1.0)
    dec = [S.lambda_squared("decreasing", L).sum() for L in (100, 10000)]
    # partial sums plus the integral tail 1/log(L+1) estimate the same finite total at both depths
    totals = [dec[0] + 1 / np.log(101), dec[1] + 1 / np.log(10001)]
    assert abs(totals[1] - totals[0]) < 0.05 and totals[1] < 4


# --------------------------------------------------------------------------- numerics
def test_cross_check_with_foundation_nngp():
    """Hayou's recursion (5) is the foundation's K^(l) = K^(l-1) + rho^2 (sigma_w^2 <phi phi> + sigma_b^2) with ReLU."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 3))
    sw, sb = 1.7, 0.3
    Q0 = S.input_kernel_matrix(X, sw, sb)
    for scaling, L, rho in (("unscaled", 12, 1.0), ("uniform", 40, 40**-0.5)):
        hay = S.kernels(Q0, L, scaling, sw, sb)
        Q = np.exp(hay["log_scale"]) * hay["Q_normalised"]
        fnd = nngp(Q0, depth=L, rho=rho, sigma_w2=sw, sigma_b2=sb, activation="relu")["K"]
        assert np.allclose(Q, fnd, rtol=1e-11, atol=0)


def test_ntk_diagonal_closed_recursion():
    """Diagonal of (9): Theta_l = (1 + lam^2 sw/2) Theta + lam^2 (sb + sw Q/2), iterated by hand in floats."""
    sw, sb, L = 2.0, 0.1, 25
    Q0 = S.input_kernel_matrix(_pair(), sw, sb)
    k = S.kernels(Q0, L, "decreasing", sw, sb)
    lam2 = 1.0 / (np.arange(1, L + 1) * np.log(np.arange(2, L + 2)) ** 2)
    Q = T = Q0[0, 0]
    for l2 in lam2:
        Q, T = Q + l2 * (sb + sw * Q / 2), T + l2 * (sb + sw * Q / 2 + sw / 2 * T)
    assert np.isclose(np.exp(k["log_Q_diag"][0]), Q, rtol=1e-12)
    assert np.isclose(np.exp(k["log_ntk_diag"][0]), T, rtol=1e-12)


def test_deep_unscaled_stays_finite():
    r = S.two_input_kernels([10000], "unscaled", angle=0.5, sigma_w2=2.0)
    assert np.isclose(r["log_Q_diag"][0], 10000 * np.log(2.0) + np.log(1.0), rtol=1e-12)  # Q_0 = sw/d = 1
    assert np.all(np.isfinite([r["log_ntk_diag"][0], r["correlation"][0]]))


def test_cli_stable_kernel(capsys):
    assert main(["stable-kernel", "--depth", "50", "200", "1000", "--scaling", "unscaled", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"depth", "log_Q_diag", "correlation", "log_ntk_diag"}
    assert np.allclose(out["log_Q_diag"], np.array([50, 200, 1000]) * np.log(2))
    assert np.all(np.diff(out["correlation"]) > 0) and out["correlation"][-1] < 1


@pytest.mark.parametrize("argv, name", [
    (["stable-kernel", "--depth", "10", "--sigma-b2", "-1"], "sigma_b2"),
    (["stable-kernel", "--depth", "10", "--sigma-w2", "0"], "sigma_w2"),
    (["stable-kernel", "--depth", "0"], "depth"),
    (["stable-kernel", "--depth", "5", "--angle", "4"], "angle"),
    (["stable-kernel", "--depth", "5", "--scaling", "foo(l"], "scaling"),
    (["stable-kernel", "--depth", "5", "--scaling", "1/x"], "scaling"),
])
def test_bad_input(argv, name, capsys):
    assert main(argv) == 2
    assert f"error: {name}:" in capsys.readouterr().err
