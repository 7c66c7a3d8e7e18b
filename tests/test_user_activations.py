"""Issue 23, item 5: activations as a user writes them (abs, Max, Piecewise, sign, Heaviside, floor, ...).

References are independent of the code under test: the dual kernels of sign, Heaviside, |x| and ReLU are the
closed forms derived by hand below (orthant probability of a bivariate normal: P(u > 0, v > 0) = 1/4 +
asin(rho)/(2 pi); the arc-cosine kernels of Cho & Saul 2009), iterated by a plain NumPy loop of the recursion
K <- gamma^2 K + lambda^2 (sigma_w^2 <phi phi> + sigma_b^2); floor is checked on one layer against an mpmath
quadrature (exact conditional sum over the integers, tanh-sinh over unit intervals, 20 digits).
"""
from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import resprop
from resprop.numeric.cli import main
from resprop.numeric.engine import piecewise_duals
from resprop.numeric.engine.activation_check import check_activation
from resprop.numeric.engine.expectations import activation_expression, kernels
from resprop.numeric.engine.validation import ParameterError

X = np.array([[1.0, 0.0, 0.2], [0.6, 0.8, -0.1], [-0.5, 0.5, 0.9]])
SW, SB, DEPTH = 1.3, 0.1, 3


# ------------------------------------------------------------------ hand-derived dual kernels (rho, d_a, d_b)
def _asin(r):
    return np.arcsin(np.clip(r, -1.0, 1.0))


def sign_pair(r, da, db):  # E[sgn u sgn v] = 1 - 2 P(u, v of opposite sign) = 1 - 2 acos(rho)/pi
    return 2 / np.pi * _asin(r)


def heaviside_pair(r, da, db):  # P(u > 0, v > 0)
    return 0.25 + _asin(r) / (2 * np.pi)


def abs_pair(r, da, db):  # |u||v|: 2 x the ReLU kernel at rho plus 2 x at -rho
    r = np.clip(r, -1, 1)
    return 2 / np.pi * np.sqrt(da * db) * (np.sqrt(1 - r * r) + r * _asin(r))


def relu_pair(r, da, db):
    r = np.clip(r, -1, 1)
    return np.sqrt(da * db) / (2 * np.pi) * (np.sqrt(1 - r * r) + (np.pi - np.arccos(r)) * r)


def step_pair(r, da, db):  # E[H(u) H(v)] = relu' relu'
    return (np.pi - np.arccos(np.clip(r, -1, 1))) / (2 * np.pi)


def reference(pair, depth=DEPTH, sw=SW, sb=SB, gamma=1.0, lam=1.0, dpair=None):
    """The plain NumPy loop of the NNGP (and NTK) recursion with a hand-derived dual kernel."""
    K = sw * X @ X.T / X.shape[1] + sb
    T = K.copy()
    for _ in range(depth):
        d = np.diag(K)
        rho = K / np.sqrt(np.outer(d, d))
        np.fill_diagonal(rho, 1.0)
        E = pair(rho, d[:, None], d[None, :])
        K_new = gamma**2 * K + lam**2 * (sw * E + sb)
        if dpair is not None:
            T = gamma**2 * T + lam**2 * (sw * E + sb + sw * dpair(rho, d[:, None], d[None, :]) * T)
        K = K_new
    return (K, T) if dpair is not None else K


def _close(a, b, rtol=1e-11):
    scale = np.sqrt(np.outer(np.diag(b), np.diag(b)))
    return float(np.max(np.abs(a - b) / scale)) <= rtol


# ------------------------------------------------------------------ accepted: NNGP (and NTK for kinks)
NNGP_CASES = [("sign(x)", sign_pair), ("Heaviside(x)", heaviside_pair), ("abs(x)", abs_pair),
              ("x*sign(x)", abs_pair), ("Max(x, 0)", relu_pair), ("Piecewise((x, x > 0), (0, True))", relu_pair),
              ("x*Heaviside(x)", relu_pair), ("Min(x, 0)", relu_pair)]


@pytest.mark.parametrize("activation,pair", NNGP_CASES, ids=[c[0] for c in NNGP_CASES])
def test_nngp_matches_hand_derived_loop(activation, pair):
    K = resprop.kernel(X, activation, DEPTH, SW, SB)
    assert _close(K, reference(pair))


def test_nngp_with_gamma_and_branch_scale():
    K = resprop.kernel(X, "sign(x)", 4, SW, SB, gamma=0.8, branch_scale=0.5)
    assert _close(K, reference(sign_pair, depth=4, gamma=0.8, lam=0.5))


@pytest.mark.parametrize("activation,pair,dpair", [("abs(x)", abs_pair, sign_pair),
                                                   ("Max(x, 0)", relu_pair, step_pair),
                                                   ("Piecewise((x, x > 0), (0, True))", relu_pair, step_pair)])
def test_ntk_of_kinks_matches_hand_derived_loop(activation, pair, dpair):
    K, T = resprop.kernel(X, activation, DEPTH, SW, SB, ntk=True)
    K_ref, T_ref = reference(pair, dpair=dpair)
    assert _close(K, K_ref) and _close(T, T_ref)


def test_reference_loop_can_fail():
    """The comparison distinguishes sign from Heaviside and abs from relu (the test can fail)."""
    assert not _close(resprop.kernel(X, "sign(x)", DEPTH, SW, SB), reference(heaviside_pair))
    assert not _close(resprop.kernel(X, "abs(x)", DEPTH, SW, SB), reference(relu_pair))


def test_unequal_diagonals_general_path_and_extreme_variances():
    """Pairs at variances 1e-4 .. 1e4 and rho up to 1 - 1e-14 against the closed forms (relative 1e-12)."""
    for name, pair in (("sign(x)", sign_pair), ("Heaviside(x)", heaviside_pair), ("abs(x)", abs_pair)):
        pd = piecewise_duals.duals(name)
        for da in (1e-4, 1.0, 1e4):
            for db in (1e-4, 3.0, 1e4):
                for r in (-1.0, -0.9999, -0.3, 0.0, 0.7, 1 - 1e-8, 1 - 1e-14, 1.0):
                    f, _ = pd.pair(da, db, r)
                    scale = math.sqrt(pd.diagonal(da)[0] * pd.diagonal(db)[0])
                    assert abs(f - pair(r, da, db)) <= 1e-12 * scale, (name, da, db, r)


# ------------------------------------------------------------------ floor: one layer vs mpmath
def _floor_pair_mpmath(da, db, c):
    """E[floor(u) floor(v)]: u-integral by mpmath.quad on unit intervals, E[floor(v) | u] summed exactly."""
    mp.mp.dps = 20
    da, db, c = mp.mpf(da), mp.mpf(db), mp.mpf(c)
    m_coef, sig = c / da, mp.sqrt(db - c * c / da)

    def inner(u):
        m = m_coef * u
        lo, hi = int(mp.floor(m - 11 * sig)) - 1, int(mp.floor(m + 11 * sig)) + 1
        return mp.fsum(n * (mp.ncdf((n + 1 - m) / sig) - mp.ncdf((n - m) / sig)) for n in range(lo, hi + 1)) \
            + (lo - 1) * mp.ncdf((lo - m) / sig) + (hi + 1) * (1 - mp.ncdf((hi + 1 - m) / sig))

    a = mp.sqrt(da)
    L = 10 * a
    pts = [-L, *[mp.mpf(n) for n in range(int(mp.ceil(-L)), int(mp.floor(L)) + 1)], L]
    return mp.quad(lambda u: mp.npdf(u, 0, a) * mp.floor(u) * inner(u), pts)


def _floor_sq(d):
    a = mp.sqrt(mp.mpf(d))
    return mp.fsum(n * n * (mp.ncdf((n + 1) / a) - mp.ncdf(n / a)) for n in range(-int(12 * a) - 2, int(12 * a) + 2))


@pytest.mark.timeout(300)
def test_floor_one_layer_vs_mpmath():
    Xf = np.array([[1.0, 0.3], [0.4, -0.9], [-0.7, 0.2]])
    sw, sb = 1.2, 0.05
    K0 = sw * Xf @ Xf.T / 2 + sb
    K1 = resprop.kernel(Xf, "floor(x)", 1, sw, sb)
    ref = np.empty((3, 3))
    for i in range(3):
        ref[i, i] = float(_floor_sq(K0[i, i]))
        for j in range(i):
            ref[i, j] = ref[j, i] = float(_floor_pair_mpmath(K0[i, i], K0[j, j], K0[i, j]))
    ref = K0 + sw * ref + sb
    assert _close(K1, ref, rtol=1e-11)


# ------------------------------------------------------------------ refusals
REFUSED = [
    ("I*x", "not real"), ("x + I", "not real"), ("sqrt(x)", "not real and finite"), ("log(x)", "not real"),
    ("1/x", "not real and finite"), ("zoo*x", "not finite"), ("nan*x", "not finite"),
    ("Integral(exp(-t**2)*y, t)", "x only"), ("f(x)", "undefined function"), ("DiracDelta(x)", "distribution"),
    ("exp(x**2)", "grows like exp"), ("1e200*x", "too large"), ("x > 0", "expression in x"),
    ("__import__('os')", "not a SymPy"), ("9**9**9**9", "too large"), ("floor(x**2)", "non-linear"),
    ("Abs(sin(x))", "breakpoints"), ("sqrt(Abs(x))", "unbounded"), ("Piecewise((tanh(x), x > 0), (0, True))",
                                                                    "polynomial pieces"),
    ("", "empty"), ("y*x", "x only"), ("nosuch(x", "cannot parse"),
]


@pytest.mark.parametrize("activation,why", REFUSED, ids=[c[0] or "empty" for c in REFUSED])
def test_refused_with_a_reason(activation, why):
    with pytest.raises(ParameterError) as exc:
        resprop.kernel(X, activation, 2, SW, SB)
    assert exc.value.parameter.startswith("activation") and why in str(exc.value)


@pytest.mark.parametrize("activation", ["sign(x)", "Heaviside(x)", "floor(x)", "ceiling(x)", "frac(x)",
                                        "Heaviside(x - 1/2)"])
def test_ntk_of_a_jump_is_refused(activation):
    with pytest.raises(ParameterError) as exc:
        resprop.kernel(X, activation, 2, SW, SB, ntk=True)
    assert exc.value.parameter == "activation" and "Dirac delta" in str(exc.value) and "infinite" in str(exc.value)
    assert np.all(np.isfinite(resprop.kernel(X, activation, 2, SW, SB)))  # the NNGP exists


def test_floor_at_a_variance_beyond_the_range_is_refused_naming_it():
    with pytest.raises(ParameterError) as exc:
        resprop.kernel(30 * X, "floor(x)", 1, 5.0, 0.1)
    assert exc.value.parameter == "activation" and "variance" in str(exc.value)


def test_evaluated_integral_is_accepted():
    """Integral(x, x) = x^2/2 is evaluated by SymPy (previously NotImplementedError)."""
    assert np.allclose(resprop.kernel(X, "Integral(x, x)", 1, SW, SB), resprop.kernel(X, "x**2/2", 1, SW, SB))


def test_classification():
    assert check_activation("tanh(x)").kind == "smooth"
    c = check_activation("floor(2*x + 1/2)")
    assert c.piecewise and c.lattices == ((0.5, -0.25),) and c.discontinuous
    c = check_activation("Max(-1, Min(1, x))")
    assert c.breakpoints == (-1.0, 1.0) and not c.discontinuous
    assert check_activation("Piecewise((x, x > 0), (0, True))").relu and not check_activation("abs(x)").relu


# ------------------------------------------------------------------ theory drivers
@pytest.mark.parametrize("activation", ["sign(x)", "abs(x)", "floor(x)", "Heaviside(x)", "I*x", "zoo*x",
                                        "x + I", "Integral(f(x), x)"])
def test_theory_drivers_refuse_cleanly(activation):
    with pytest.raises(ParameterError) as exc:
        kernels(activation)
    assert exc.value.parameter == "activation"


def test_theory_drivers_recognise_relu():
    assert kernels("Max(x, 0)").name == "relu"
    with pytest.raises(ParameterError):
        activation_expression("x + I")


# ------------------------------------------------------------------ CLI
def _cli(tmp_path, capsys, activation, *extra):
    np.save(tmp_path / "X.npy", X)
    code = main(["kernel", "--inputs", str(tmp_path / "X.npy"), "--activation", activation, "--depth", "3",
                 "--sigma-w2", str(SW), "--sigma-b2", str(SB), "--out", str(tmp_path / "K.npz"), *extra])
    return code, capsys.readouterr()


@pytest.mark.parametrize("activation", ["I*x", "x + I", "zoo*x", "Integral(x, y)", "sqrt(x)", "1e200*x",
                                        "exp(x**2)", "nosuch(x"])
def test_cli_refusals_are_one_line_naming_activation(tmp_path, capsys, activation):
    code, out = _cli(tmp_path, capsys, activation)
    lines = out.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("resprop: error: --activation")


@pytest.mark.parametrize("activation", ["sign(x)", "floor(x)"])
def test_cli_ntk_of_a_jump(tmp_path, capsys, activation):
    code, out = _cli(tmp_path, capsys, activation, "--ntk")
    lines = out.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--activation" in lines[0] and "Dirac delta" in lines[0]


@pytest.mark.parametrize("activation,pair", [("abs(x)", abs_pair), ("Heaviside(x)", heaviside_pair),
                                             ("Max(x, 0)", relu_pair)])
def test_cli_accepts_and_matches(tmp_path, capsys, activation, pair):
    code, out = _cli(tmp_path, capsys, activation)
    assert code == 0 and "wrote" in out.out
    assert _close(np.load(tmp_path / "K.npz")["nngp"], reference(pair))
