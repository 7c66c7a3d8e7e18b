"""Li, Nica & Roy (2021): derivations, generated kernels, mpmath and Monte Carlo checks.

Theory-vs-simulation tolerances are 4 standard errors plus a stated systematic allowance where the
theory is leading order (Theorems 1 and 4 carry O(d/n^2) errors, Conjecture 5 relative O(1/n)).
"""
import json

import mpmath as mp
import numpy as np
import pytest
import sympy as sp
from scipy import integrate, special

import resprop.numeric.theories.lognormal.generated.lognormal as glg
from resprop.derive.theories import lognormal as dlg
from resprop.numeric.cli import main
from resprop.numeric.engine import monte_carlo as M
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.lognormal import log_gaussian as L
from resprop.numeric.theories.lognormal.mp_checks import j2bar_closed_mp, j2bar_quadrature_mp

A = L_ = 2**-0.5


# --------------------------------------------------------------------------- symbolic
def test_j2bar_integrates_to_cho_saul_form():
    derived = dlg.j2bar_from_definition()
    assert sp.simplify(sp.expand_trig(derived - dlg.cho_saul_j2bar())) == 0
    # independent anchor: at theta = 0 eq. (23) is 2 E[relu(Z)^4] = 2 * 3/2
    assert sp.simplify(derived.subs(dlg.theta, 0)) == 3
    assert sp.simplify(derived.subs(dlg.theta, sp.pi)) == 0


def test_lemma16_identity_and_lemma10_limit():
    assert dlg.lemma16_identity() == 0
    # n Cov at theta = 0 is n Var[2||relu(u)||^2] = 3n/(n+2) -> 3 (Lemma 10)
    mean, var = dlg.sphere_relu_moments()
    assert mean == 1 and sp.simplify(var - 3 / (dlg.n + 2)) == 0
    assert sp.simplify(dlg.j2bar_odd_part().subs(dlg.theta, 0)) == sp.limit(dlg.n * var, dlg.n, sp.oo)
    # E[Z^2 relu(Y)^2] = (1 + 2 cos^2)/2 (sum of J2(t) and J2(pi - t))
    assert sp.simplify(sp.expand_trig(2 * dlg.cross_moment_from_definition()
                                      - 1 - 2 * sp.cos(dlg.theta) ** 2)) == 0


def test_remark18_next_order_is_cubic():
    ser = dlg.remark18_series(5)
    xs = list(ser.free_symbols)[0]
    assert ser.coeff(xs, 1) == 8 / sp.pi
    assert ser.coeff(xs, 2) == 0  # the paper's O(alpha^{2k}) is loose: the correction is O(cos^3)
    assert ser.coeff(xs, 3) == sp.Rational(4, 3) / sp.pi
    # numerically: (D(theta_k) - 8 c/pi) / c^3 -> 4/(3 pi) as c -> 0
    c = np.array([1e-1, 1e-2])
    D = L.j2bar_odd_part(np.arccos(c))
    assert np.allclose((D - 8 * c / np.pi) / c**3, 4 / (3 * np.pi), rtol=2e-2)


def test_beta_from_lemmas_is_eq5():
    assert sp.simplify(dlg.beta_from_lemmas() - dlg.beta_paper()) == 0
    # Lemma 9 + 10 give the exact per-layer variance (alpha^2 + lam^2 = 1)
    lam = dlg.lam
    assert sp.simplify(dlg.layer_variance() - (5 * lam**4 + 4 * (1 - lam**2) * lam**2) / dlg.n) == 0




def test_output_moments_match_lognormal_quadrature():
    mu, s2, scale2, d = -0.3, 0.7, 1.1, 5
    gauss = lambda G, f: f(G) * np.exp(-(G - mu) ** 2 / (2 * s2)) / np.sqrt(2 * np.pi * s2)  # noqa: E731
    lo, hi = mu - 40 * np.sqrt(s2), mu + 40 * np.sqrt(s2)
    e1 = integrate.quad(lambda G: gauss(G, np.exp), lo, hi, limit=200)[0]
    e2 = integrate.quad(lambda G: gauss(G, lambda t: np.exp(2 * t)), lo, hi, limit=200)[0]
    mean = scale2**d * e1
    var = 3 * scale2 ** (2 * d) * e2 - mean**2
    corr = (scale2 ** (2 * d) * e2 - mean**2) / var
    assert np.isclose(glg.output_mean_sq(scale2, d, mu, s2), mean, rtol=1e-10)
    assert np.isclose(glg.output_var_sq(scale2, d, mu, s2), var, rtol=1e-10)
    assert np.isclose(glg.output_corr_sq(s2), corr, rtol=1e-10)
    assert np.isclose(glg.output_corr_sq(50.0), 1 / 3, rtol=1e-6)  # §3.2: -> 1/3 as d/n grows


def test_log_chi2_density_normalised_with_digamma_mean():
    for k in (1, 2, 10):
        p = lambda y: glg.log_chi2_density(y, k)  # noqa: E731
        assert np.isclose(integrate.quad(p, -60, 10)[0], 1, atol=1e-9)
        mean = integrate.quad(lambda y: y * p(y), -60, 10)[0]
        assert np.isclose(mean, special.digamma(k / 2) + np.log(2), atol=1e-8)


# --------------------------------------------------------------------------- corrected Prop. 6
def test_prop6_layerwise_reduces_to_theorem1():
    n, d = 50, 30
    uni = L.theory(n, d, A, L_, hypo_constant=0.0)
    lay = L.theory_layerwise(n, [A] * d, [L_] * d)
    assert np.isclose(lay["var_G"], uni["var_G"], rtol=1e-12)
    assert np.isclose(lay["mean_G"], uni["mean_G"], rtol=1e-12)
    # the printed cos factor alpha_i^2 / sqrt(alpha_i^2 + lam_i^2) gives a different theta_k (0.5 vs 0.707
    # per layer), contradicting eq. (8) and Cor. 17's theta_k = arccos(alpha^k); the corrected factor agrees
    assert np.isclose(glg.layer_cos_factor(A, L_), glg.cos_theta_k(A, L_, 1))
    assert not np.isclose(A**2 / np.sqrt(A**2 + L_**2), glg.cos_theta_k(A, L_, 1))


def test_layerwise_balanced_by_monte_carlo():
    rng = np.random.default_rng(3)
    d, n = 12, 48
    alpha = rng.uniform(0.5, 1.2, d)
    lam = rng.uniform(0.3, 1.0, d)
    th = L.theory_layerwise(n, alpha, lam, balanced=True)
    g = M.g_moments(M.simulate_log_gaussian(width=n, depth=d, alpha=alpha, lam=lam, balanced=True, samples=40000, seed=5))
    allowance = 2 * d / n**2
    assert abs(g["var_G"] - th["var_G"]) < 4 * g["var_G_se"] + allowance
    assert abs(g["mean_G"] - th["mean_G"]) < 4 * g["mean_G_se"] + allowance


# --------------------------------------------------------------------------- generated vs mpmath
def test_j2bar_kernel_vs_mpmath_quadrature():
    for t in (0.0, 0.7, 2.5, np.pi):
        q = j2bar_quadrature_mp(t, dps=20)
        assert abs(float(L.j2bar(t)) - float(q)) < 1e-14


def test_j2bar_closed_form_25_digits():
    for t in ("0.3", "2.0"):
        with mp.workdps(40):
            q = j2bar_quadrature_mp(mp.mpf(t), dps=30)
            c = j2bar_closed_mp(mp.mpf(t), dps=30)
            assert abs(q - c) < mp.mpf(10) ** -27 * abs(c)


def test_cli_j2bar_json(capsys):
    assert main(["j2bar", "1.0", "--digits", "30", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"theta", "closed_form", "quadrature"}
    c, q = out["closed_form"][0], out["quadrature"][0]
    assert isinstance(c, str) and len(c.replace(".", "").lstrip("0")) == 30
    with mp.workdps(40):
        assert abs(mp.mpf(c) - mp.mpf(q)) < mp.mpf(10) ** -28
        # independent reference: (3/2) sin 2 + (pi - 1)(1 + 2 cos^2 1), divided by pi
        ref = (3 * mp.sin(2) / 2 + (mp.pi - 1) * (1 + 2 * mp.cos(1) ** 2)) / mp.pi
        assert abs(mp.mpf(c) - ref) < mp.mpf(10) ** -28


# --------------------------------------------------------------------------- density by convolution
def test_density_convolution_matches_direct_sampling():
    mu, s2, n_out, shift = -1.2, 2.3, 10, -np.log(10)
    y = np.linspace(-25, 10, 7001)
    p = L.log_output_density(y, n_out=n_out, mean_G=mu, var_G=s2, shift=shift)
    h = y[1] - y[0]
    assert np.isclose(p.sum() * h, 1, atol=1e-6)
    mean = np.sum(y * p) * h
    var = np.sum((y - mean) ** 2 * p) * h
    assert np.isclose(mean, shift + mu + special.digamma(n_out / 2) + np.log(2), atol=1e-5)
    assert np.isclose(var, s2 + special.polygamma(1, n_out / 2), atol=1e-4)
    rng = np.random.default_rng(1)
    m = 200_000
    samples = shift + rng.normal(mu, np.sqrt(s2), m) + np.log(rng.chisquare(n_out, m))
    cdf = np.cumsum(p) * h
    for q in (-6.0, -3.0, -1.0, 1.0):
        emp = np.mean(samples <= q)
        assert abs(np.interp(q, y, cdf) - emp) < 4 * np.sqrt(emp * (1 - emp) / m)


# --------------------------------------------------------------------------- theory vs simulation






def test_conjecture5_quantities():
    """Eqs (11)-(13) / Fig. 4: variance and lag-1, lag-2 covariances of ||relu(zhat)||^2 against the
    uniform-sphere values (Lemma 10, Lemma 16), relative O(1/n): allowance 8/n relative (measured n x
    relative error <= 6 at n = 32, 64, 128)."""
    n = 96
    s = M.simulate_log_gaussian(width=n, depth=40, alpha=A, lam=L_, samples=20000, seed=9)
    c5 = M.conjecture5(s)
    th = L.conjecture5_theory(n, A, L_)
    assert abs(c5["var_avg"] - th["var"]) < 4 * c5["var_avg_se"] + 8 / n * th["var"]
    for k in (1, 2):
        assert abs(c5["cov_avg"][k] - th["cov"][k]) < 4 * c5["cov_avg_se"][k] + 8 / n * th["cov"][k]
    # (11): the mean is 1/2 (1 + O(1/n)), and the hypoactivation is negative
    assert -8 / n < c5["mean_avg"] - 0.5 < 0




# --------------------------------------------------------------------------- CLI and bad input
def test_cli_log_gaussian(capsys):
    argv = ["log-gaussian", "--width", "32", "--depth", "16", "--alpha", "0.7071", "--lam", "0.7071", "--balanced",
            "--simulate", "--samples", "4000", "--seed", "0", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["simulation"]) >= {"mean_G", "mean_G_se", "var_G", "var_G_se"}
    beta = 2 / 32 + 16 / 32 * (5 * 0.7071**4 + 4 * 0.7071**4) / (2 * 0.7071**2) ** 2
    assert np.isclose(out["theory"]["var_G"], beta) and np.isclose(out["theory"]["mean_G"], -beta / 2)
    assert main(["log-gaussian", "--width", "32", "--depth", "16", "--alpha", "0.7071", "--lam", "0.7071",
                 "--hypo-constant", "-0.9", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "simulation" not in out and np.isclose(out["theory"]["mean_G"], -beta / 2 + 2 * 0.5 * (-0.9) * 16 / 32,
                                                    rtol=1e-3)


@pytest.mark.parametrize("argv, name", [
    (["log-gaussian", "--width", "10", "--depth", "5", "--alpha", "0", "--lam", "0"], "alpha, lam"),
    (["log-gaussian", "--width", "1", "--depth", "5", "--alpha", "1", "--lam", "1"], "width"),
    (["log-gaussian", "--width", "10", "--depth", "0", "--alpha", "1", "--lam", "1"], "depth"),
    (["log-gaussian", "--width", "10", "--depth", "5", "--alpha", "1", "--lam", "-1"], "lam"),
    (["j2bar", "3.2"], "theta"),
    (["j2bar", "-0.1"], "theta"),
])
def test_bad_input_names_parameter(argv, name, capsys):
    assert main(argv) == 2
    assert f"error: {name}:" in capsys.readouterr().err


def test_bad_theta_in_python_api():
    with pytest.raises(ParameterError, match="theta"):
        L.j2bar([0.5, 4.0])
