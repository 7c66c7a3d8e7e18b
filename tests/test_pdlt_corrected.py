"""The corrected O(1/n) theory of ||z^d||^2/n for residual MLPs (derive/theories/pdlt_corrected.py,
numeric/theories/pdlt/corrected.py) against B.26, the vanilla MLP, hand values, mpmath, an independent O(d^2)
quadratic form on a 2-D Gauss--Hermite rule, Li--Nica--Roy's interlayer variance and exact-particle Monte Carlo.

R(d) = lim n Var[||z^d||^2/n]/E[||z^d||^2/n]^2 for d residual layers after the input (K^(0) = 1, C_b = 0, critical
C_W); every comparison with a finite width is at O(1/n) (fixed depth, growing width)."""
from __future__ import annotations

import json
import math
import re

import mpmath as mp
import numpy as np
import pytest
import sympy as sp

from resprop.derive.theories import pdlt_corrected as D
from resprop.generated import gauss_hermite as gh
from resprop.numeric.cli import main
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.pdlt import corrected as C

ACTS = ("relu", "leaky_relu:0.5", "linear", "tanh", "erf", "gelu")


# --------------------------------------------------------------------------- symbolic
def test_influence_recursion_is_chi_P_plus_C_W_X():
    assert D.influence_recursion() == D.chi_par * D.P + D.C_W * D.X


def test_mehler_and_second_channel_is_Q():
    assert D.mehler_check(6)
    assert D.channel_two_is_Q()


def test_depth_one_equals_b26_symbolically():
    assert D.depth_one_is_b26()


def test_gamma_zero_reduces_to_vanilla_symbolically():
    assert D.gamma_zero_is_vanilla()


def test_delta_zero_is_b26_as_printed():
    assert D.b26_is_corrected_without_delta()


@pytest.mark.parametrize("d", [1, 2, 3])
def test_b26_is_the_quadratic_form_without_the_non_rho2_cross_layer_covariances(d):
    """(1) corrected recursion == the lead's quadratic form; (2) B.26 == the same form with Cov(phi_k^2, phi_m^2),
    k != m, replaced by 2 rho^2 K_k K_m Phi'_k Phi'_m; (3) at d >= 2 the full form differs from B.26 exactly by
    those covariances (B.26 keeps Cov(z_d^2, phi_k^2), which is pure second Hermite)."""
    assert D.b26_quadratic_form_check(d)
    diff = sp.expand(D.quadratic_form(d) - D.quadratic_form(d, b26=True))
    cross = {s for s in diff.free_symbols if re.fullmatch(r"C_\d+_\d+", s.name)}
    assert (diff == 0) == (d == 1)
    assert len(cross) == d * (d - 1) // 2


def test_mixed_moment_is_pure_second_hermite():
    mm = D.mixed_moment() - D.mean_sigma_sq
    assert sp.simplify(mm - D.rho**2 * (D.mean_sigma_sq_z_sq - D.mean_sigma_sq)) == 0


def test_k0_class_fourth_channel_is_order_K2():
    h4 = D.k0_fourth_channel_order()
    kappa = [s for s in h4.free_symbols if s.name == "kappa"][0]
    assert sp.limit(h4 / kappa**2, kappa, 0) != 0
    assert sp.limit(h4 / kappa**2, kappa, 0).is_finite


# --------------------------------------------------------------------------- closed-form bivariate moments vs mpmath
def _mp_truncated_sq(m, s):
    """E[v^2; v > 0] for v ~ N(m, s^2): (m^2 + s^2) Phi(m/s) + m s phi(m/s) (truncated-normal moments)."""
    x = m / s
    return (m * m + s * s) * mp.ncdf(x) + m * s * mp.npdf(x)


def _mp_sq_cross(ap, am, rho):
    """E[phi(u)^2 phi(v)^2] by 1-D mpmath quadrature over u of phi(u)^2 times the conditional moment
    E[phi(v)^2 | u] (v | u ~ N(rho u, 1 - rho^2), truncated-normal moments): no arc-cosine formula."""
    s = mp.sqrt(1 - rho**2)

    def inner(u):
        m = rho * u
        return ap**2 * _mp_truncated_sq(m, s) + am**2 * _mp_truncated_sq(-m, s)

    def phi2(u):
        return (ap * u if u > 0 else am * u) ** 2

    return mp.quad(lambda u: phi2(u) * inner(u) * mp.npdf(u), [-mp.inf, 0, mp.inf])


@pytest.mark.parametrize("rho", [-0.7, 0.3, 0.9])
@pytest.mark.parametrize("slopes", [(1.0, 0.0), (1.0, 0.5), (1.0, -0.3)])
def test_phi_sq_cross_moment_closed_form_vs_mpmath(rho, slopes):
    ap, am = slopes
    mp.mp.dps = 20
    ref = float(_mp_sq_cross(mp.mpf(ap), mp.mpf(am), mp.mpf(rho)))
    assert float(C.arccos2_moment(rho, ap, am)) == pytest.approx(ref, rel=1e-12)


def test_quadrant_moment_end_points():
    # J(1) = E[u^4; u > 0] = 3/2, J(0) = 1/4, J(-1) = 0
    J = D.quadrant_moment()
    assert [J.subs(D.rho, r) for r in (1, 0, -1)] == [sp.Rational(3, 2), sp.Rational(1, 4), 0]


def test_mixed_moment_vs_mpmath_relu():
    mp.mp.dps = 20
    rho = mp.mpf("0.6")
    s2 = 1 - rho**2  # E[v^2 | u] = rho^2 u^2 + 1 - rho^2
    ref = mp.quad(lambda u: u * u * (rho**2 * u * u + s2) * mp.npdf(u), [0, mp.inf])
    val = D.mixed_moment().subs({D.rho: sp.Rational(3, 5), D.mean_sigma_sq: sp.Rational(1, 2),
                                 D.mean_sigma_sq_z_sq: sp.Rational(3, 2)})
    assert float(val) == pytest.approx(float(ref), rel=1e-14)


def test_gelu_mean_square_vs_mpmath():
    mp.mp.dps = 25
    g2 = lambda x: (x * (1 + mp.erf(x / mp.sqrt(2))) / 2) ** 2  # noqa: E731
    ref = mp.quad(lambda x: g2(x) * mp.exp(-x * x / 2), [-mp.inf, 0, mp.inf]) / mp.sqrt(2 * mp.pi)
    assert C.GELU_MEAN_SQ == pytest.approx(float(ref), rel=1e-13)


# --------------------------------------------------------------------------- numeric limits and hand values
def test_relu_half_depth_one_is_the_hand_value():
    # Var(z_1^2) + 2 Cov(z_1^2, relu(z_0)^2) + Var(relu^2) = 2 + 2 (1/2) + 5/4 (K = C_W = 1)
    assert C.corrected_ratio("relu", 0.5, 1) == pytest.approx(4.25, abs=1e-14)
    assert C.b26_ratio("relu", 0.5, 1) == pytest.approx(4.25, abs=1e-14)


def test_relu_half_depth_two_is_the_hand_value():
    # d = 2 adds Cov(z_2^2, phi_0^2) twice (rho^2 = 1/4) and 2 Cov(phi_0^2, phi_1^2) = 2 (J(1/sqrt2) - 1/4)
    J = (1.5 + 1.5 * math.pi) / (2 * math.pi)  # J(1/sqrt 2) = [3/2 + (3 pi/4) 2]/(2 pi)
    hand = 2 + 1 + 2 * 0.25 + 2 * 1.25 + 2 * (J - 0.25)
    assert C.corrected_ratio("relu", 0.5, 2) == pytest.approx(hand, rel=1e-14)


@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("gamma2", [0.0, 0.25, 0.5, 0.75])
def test_depth_one_equals_b26_numerically(activation, gamma2):
    assert C.corrected_ratio(activation, gamma2, 1) == pytest.approx(C.b26_ratio(activation, gamma2, 1), rel=1e-12)


@pytest.mark.parametrize("activation", ACTS)
def test_gamma_zero_is_the_vanilla_mlp(activation):
    for d in (1, 2, 5):
        assert C.corrected_ratio(activation, 0.0, d) == pytest.approx(C.b26_ratio(activation, 0.0, d), rel=1e-12)


def test_vanilla_relu_product_of_independent_layers():
    # gamma = 0: Y = (1/n) sum xi_d^2 prod_l C_W (1/n) sum relu(xi_l)^2, independent factors of relative
    # variance 2/n and Var(relu^2)/<relu^2>^2 / n = 5/n: R = 2 + 5 d
    for d in (1, 3, 10):
        assert C.corrected_ratio("relu", 0.0, d) == pytest.approx(2 + 5 * d, rel=1e-14)


@pytest.mark.parametrize("gamma2", [0.25, 0.5, 0.75])
def test_linear_network_has_no_correction(gamma2):
    # phi^2 = z^2 has only Hermite channels 0 and 2: B.26 is exact for the linear network
    for d in (2, 6):
        assert C.corrected_ratio("linear", gamma2, d) == pytest.approx(C.b26_ratio("linear", gamma2, d), rel=1e-12)


def test_b26_trajectory_matches_the_internal_delta_zero_recursion():
    for act in ("tanh", "erf", "gelu"):
        tr = C.corrected_trajectory(act, 0.5, 6)
        assert tr.ratio_b26[-1] == pytest.approx(C.b26_ratio(act, 0.5, 6), rel=1e-12)


def test_relu_corrected_equals_li_nica_roy_interlayer_variance():
    """Li, Nica & Roy (2021) Thm 1: Var[ln ||z^d||^2] = beta + c^2 I_total at alpha = gamma, lam^2 = 1 - gamma^2;
    n Var[ln Y] -> R at leading order.  An independent formula (their J2 odd part), equal to the corrected R."""
    from resprop.numeric.theories.lognormal import log_gaussian as LG
    n = 10**9
    for g2 in (0.25, 0.5, 0.75):
        for d in (2, 5, 12):
            lnr = LG.theory(n, d, math.sqrt(g2), math.sqrt(1 - g2)).var_G * n
            assert C.corrected_ratio("relu", g2, d) == pytest.approx(lnr, rel=1e-9)


# --------------------------------------------------------------------------- independent O(d^2) quadratic form
def _quadratic_form_numeric(activation, gamma2, d):
    """R(d) from the lead's quadratic form (sympy's generic form, numbers substituted) with every moment on the
    generated 2-D Gauss--Hermite rule (``expect2``, 128^2 nodes): no Hermite channels, no panels."""
    ac = C._activation(activation)
    C_W = C.critical_C_W(activation, gamma2)
    f = lambda u: ac.phi(u) ** 2  # noqa: E731
    Ks = [1.0]
    for _ in range(d):
        Ks.append(1.0 if activation == "gelu" else gamma2 * Ks[-1] + C_W * float(gh.expect2(f, lambda v: 1 + 0 * v,
                                                                                             Ks[-1], 1.0, 0.0)))
    g = math.sqrt(gamma2)
    subs = {D.gamma: sp.Float(g, 30), D.C_W: sp.Float(C_W, 30)}
    for k in range(d):
        K = Ks[k]
        Phi = float(gh.expect2(f, lambda v: 1 + 0 * v, K, 1.0, 0.0))
        q = float(gh.expect2(f, lambda v: v * v, K, K, K))
        f4 = float(gh.expect2(f, f, K, K, K))
        subs[sp.Symbol(f"K{k}", positive=True)] = K
        subs[sp.Symbol(f"dPhi{k}", real=True)] = (q - K * Phi) / (2 * K**2)
        subs[sp.Symbol(f"Var{k}", positive=True)] = f4 - Phi**2
        for j in range(k):
            cov = float(gh.expect2(f, f, Ks[j], K, g ** (k - j) * Ks[j]))
            Pj = float(gh.expect2(f, lambda v: 1 + 0 * v, Ks[j], 1.0, 0.0))
            subs[sp.Symbol(f"C_{j}_{k}")] = cov - Pj * Phi
    subs[sp.Symbol(f"K{d}", positive=True)] = Ks[d]
    return float(D.quadratic_form(d).subs(subs)) / Ks[d] ** 2


@pytest.mark.parametrize("activation", ["tanh", "erf", "gelu"])
def test_smooth_activations_vs_independent_quadratic_form(activation):
    for g2, d in ((0.5, 3), (0.75, 4)):
        ref = _quadratic_form_numeric(activation, g2, d)
        assert C.corrected_ratio(activation, g2, d) == pytest.approx(ref, rel=1e-10)


def test_scale_invariant_vs_independent_quadratic_form():
    # the relu closed form against the same quadratic form with the bivariate moments by mpmath
    mp.mp.dps = 20
    g2, d = 0.5, 3
    g = math.sqrt(g2)
    subs = {D.gamma: sp.Float(g, 30), D.C_W: 1}
    for k in range(d):
        subs.update({sp.Symbol(f"K{k}", positive=True): 1, sp.Symbol(f"dPhi{k}", real=True): sp.Rational(1, 2),
                     sp.Symbol(f"Var{k}", positive=True): sp.Rational(5, 4)})
        for j in range(k):
            subs[sp.Symbol(f"C_{j}_{k}")] = float(_mp_sq_cross(1, 0, mp.mpf(g) ** (k - j))) - 0.25
    subs[sp.Symbol(f"K{d}", positive=True)] = 1
    assert C.corrected_ratio("relu", g2, d) == pytest.approx(float(D.quadratic_form(d).subs(subs)), rel=1e-12)


def test_smooth_channel_truncation_is_converged():
    # the channel count follows rho_max; doubling the cap must not move R
    base = C.corrected_ratio("tanh", 0.75, 12)
    old = C.MAX_CHANNELS
    try:
        C.MAX_CHANNELS = 2 * old
        assert C.corrected_ratio("tanh", 0.75, 12) == pytest.approx(base, rel=1e-11)
    finally:
        C.MAX_CHANNELS = old


# --------------------------------------------------------------------------- generated recursions and nu
def test_generated_scale_invariant_recursion_equals_the_vectorised_sum():
    import resprop.numeric.theories.pdlt.generated.pdlt_corrected_recursions as pcr
    for act, (ap, am) in (("relu", (1.0, 0.0)), ("leaky_relu:0.5", (1.0, 0.5))):
        for g2 in (0.25, 0.75):
            d = 40
            out = []
            pcr.vertex_corrected_scale_invariant(np.zeros(1), np.zeros(1), np.ones(1), np.full(d, math.sqrt(g2)),
                                                 np.full(d, ap), np.full(d, am),
                                                 record=lambda l, V, S, g: out.append(2 + V[0]))
            ref = [C.corrected_ratio(act, g2, k) for k in range(1, d + 1)]
            np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_nu_corrected_is_the_large_depth_slope():
    for act, g2 in (("relu", 0.5), ("relu", 0.25), ("leaky_relu:0.5", 0.75)):
        d = 3000
        slope = C.corrected_ratio(act, g2, d + 1) - C.corrected_ratio(act, g2, d)
        assert slope == pytest.approx(C.nu_corrected(act, g2), rel=1e-10)


def test_nu_corrected_k0_class_is_b35():
    assert C.nu_corrected("tanh", 0.5) == pytest.approx(2 / 3 * (1 - 0.25), rel=1e-14)


# --------------------------------------------------------------------------- Monte Carlo (exact particles)
def _mc_ratio(gamma2, depth, width, samples, seed, chunk=2000):
    """Exact-particle ReLU network: z^(l+1) = gamma z + sigma_l xi, sigma_l^2 = (1/n) sum relu(z)^2 (C_W = 1 at
    gamma^2 = 1/2), i.e. the law of gamma z + W relu(z) with fresh Gaussian W.  R per chunk, mean and its SE."""
    rng = np.random.default_rng(seed)
    g, cw = math.sqrt(gamma2), 2 * (1 - gamma2)
    rs = []
    for _ in range(samples // chunk):
        z = rng.standard_normal((chunk, width))
        for _ in range(depth):
            s2 = cw * np.mean(np.maximum(z, 0) ** 2, axis=1, keepdims=True)
            z = g * z + np.sqrt(s2) * rng.standard_normal((chunk, width))
        y = np.mean(z * z, axis=1)
        rs.append(width * y.var(ddof=1) / y.mean() ** 2)
    rs = np.array(rs)
    return rs.mean(), rs.std(ddof=1) / math.sqrt(len(rs))


def test_relu_depth_two_vs_exact_particle_monte_carlo():
    """n = 1024, 4e4 networks, seed 7: within 4 SE plus the O(1/n) allowance 30/n (R_n - R_inf ~ a/n with
    a ~ 19 measured at n = 16..128 in a width scan; the issue's independent value is 7.48 +- 0.03 at n = 1024)."""
    r, se = _mc_ratio(0.5, 2, 1024, 40000, seed=7)
    theory = C.corrected_ratio("relu", 0.5, 2)
    assert abs(r - theory) < 4 * se + 30 / 1024, (r, se, theory)
    assert abs(r - C.b26_ratio("relu", 0.5, 2)) > 10 * se  # B.26 (6.5) is excluded


# --------------------------------------------------------------------------- input validation and CLI
@pytest.mark.parametrize("args,name", [(("sigmoid", 0.5, 2), "activation"), (("relu", 1.0, 2), "gamma2"),
                                       (("relu", -0.1, 2), "gamma2"), (("relu", 0.5, -1), "depth"),
                                       (("relu", 0.5, 10**7), "depth"), (("tanh", 0.5, 10**4), "depth"),
                                       (("relu", float("nan"), 2), "gamma2")])
def test_bad_input_names_the_parameter(args, name):
    for fn in (C.corrected_ratio, C.b26_ratio):
        with pytest.raises(ParameterError) as err:
            fn(*args)
        assert err.value.parameter == name


def test_cli_json(capsys):
    assert main(["residual-mlp", "--activation", "relu", "--gamma", repr(math.sqrt(0.5)), "--depth", "2", "--width",
                 "1024", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["b26"] == pytest.approx(6.5, rel=1e-12)
    assert out["corrected"] == pytest.approx(C.corrected_ratio("relu", 0.5, 2), rel=1e-14)
    assert out["rel_var_corrected"] == pytest.approx(out["corrected"] / 1024, rel=1e-14)
    assert out["var_b26"] == pytest.approx(6.5 / 1024, rel=1e-12)


def test_cli_simulates_at_the_given_width(capsys):
    """--samples: the measured R_n at n = 256 (ReLU, gamma^2 = 1/2, d = 2) lies within 4 SE plus the next-order
    allowance (d/n) R of the corrected R(d), and more than 4 SE above B.26."""
    assert main(["residual-mlp", "--activation", "relu", "--gamma", repr(math.sqrt(0.5)), "--depth", "2", "--width",
                 "256", "--samples", "20000", "--seed", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert abs(out["simulated"] - out["corrected"]) <= 4 * out["simulated_se"] + 2 / 256 * out["corrected"]
    assert out["simulated"] - out["b26"] > 4 * out["simulated_se"] + 2 / 256 * out["b26"]


@pytest.mark.parametrize("argv,name", [(["--activation", "relu", "--gamma", "1.5", "--depth", "2"], "gamma"),
                                       (["--activation", "nope", "--gamma", "0.5", "--depth", "2"], "activation"),
                                       (["--activation", "relu", "--gamma", "0.5", "--depth", "-1"], "depth"),
                                       (["--activation", "relu", "--gamma", "0.5", "--depth", "2", "--width", "0"],
                                        "width"),
                                       (["--activation", "relu", "--gamma", "0.5", "--depth", "2", "--samples", "9"],
                                        "samples"),
                                       (["--activation", "relu", "--gamma", "0.5", "--depth", "2", "--width", "8",
                                         "--samples", "1"], "samples")])
def test_cli_bad_input_exits_2_naming_the_parameter(argv, name, capsys):
    assert main(["residual-mlp", *argv]) == 2
    assert name in capsys.readouterr().err


# --------------------------------------------------------------------------- r*, gamma*, deep asymptotics
def test_nu_corrected_unit_slope_relu_closed_form():
    # hand: I_D = int_0^1 D(rho)/rho = [3 pi/4 + (pi/2) ln 2 + pi/4]/(2 pi) = 1/2 + ln(2)/4, slope 4 + 16 I_D
    assert C.nu_corrected_unit_slope("relu") == pytest.approx(12 + 4 * math.log(2), rel=1e-12)
    assert C.nu_corrected_unit_slope("linear") == pytest.approx(4.0, abs=1e-12)  # B.29's slope: no correction
    assert C.nu_corrected("relu", 1 - 1e-4) / 1e-4 == pytest.approx(12 + 4 * math.log(2), rel=1e-3)


def test_gamma_star_corrected_inverts_r_star_corrected():
    g = C.gamma_star_corrected(0.1, "relu")
    assert C.r_star_corrected("relu", g * g) == pytest.approx(0.1, rel=1e-9)
    assert C.gamma_star_corrected(0.02, "relu") == 0.0  # r below min r*_corr: criterion unsatisfiable
