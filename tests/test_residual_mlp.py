"""PDLT App. B residual MLPs: derivation of B.26 from B.3, criticality, nu(gamma), r*, gamma*(r), xi recipe,
mpmath iteration of the recursion, Monte Carlo, and the cross-check against Li-Nica-Roy."""
import json

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import resprop.numeric.theories.pdlt.generated.pdlt as gpr
from resprop.derive.theories import pdlt as dr
from resprop.generated.gauss_hermite import expect1
from resprop.numeric.cli import main
from resprop.numeric.engine import monte_carlo as M
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.pdlt import residual_mlp as R
from resprop.numeric.theories.pdlt.mp_checks import nu_from_iteration_mp, vertex_trajectory_mp


# --------------------------------------------------------------------------- symbolic
def test_gaussian_derivative_identity():
    assert dr.gaussian_derivative_identity(8) == 0


def test_b26_follows_from_forward_equation():
    k_next, v_next = dr.four_point_recursion_from_forward()
    assert sp.simplify(v_next - dr.four_point_recursion_paper()) == 0
    assert sp.simplify(k_next - dr.kernel_recursion()) == 0
    # gamma = 0 is the vanilla MLP recursion (PDLT 5.109): C_W^2(<s^4> - <s^2>^2) + chi^2 V
    chi0 = dr.chi_parallel().subs(dr.gamma, 0)
    vanilla = dr.C_W**2 * (dr.mean_sigma_4 - dr.mean_sigma_sq**2) + chi0**2 * dr.V
    assert sp.simplify(v_next.subs(dr.gamma, 0) - vanilla) == 0


def test_scale_invariant_criticality_and_nu():
    crit = dr.criticality_scale_invariant()
    A2 = (dr.a_plus**2 + dr.a_minus**2) / 2
    assert sp.simplify(crit[dr.C_W] - (1 - dr.gamma**2) / A2) == 0 and crit[dr.C_b] == 0
    nu = dr.nu_scale_invariant()
    assert sp.simplify(nu - dr.nu_scale_invariant_paper()) == 0
    # ReLU by hand: A2 = A4 = 1/2, 3 A4/A2^2 - 1 = 5
    g = dr.gamma
    assert sp.simplify(nu.subs({dr.a_plus: 1, dr.a_minus: 0}) - (1 - g**2) * (5 * (1 - g**2) + 4 * g**2)) == 0
    assert sp.simplify(nu.subs(g, 1)) == 0


@settings(max_examples=30, deadline=None)
@given(st.floats(0.0, 3.0), st.floats(-3.0, 3.0))
def test_nu_decreases_in_gamma(a_plus, a_minus):
    """Footnote 7: nu(gamma) is positive on [0, 1) and non-increasing (because A4 >= A2^2)."""
    if a_plus**2 + a_minus**2 < 1e-6:
        return
    g = np.linspace(0, 0.999, 200)
    nu = gpr.nu_scale_invariant(g, a_plus, a_minus)
    assert np.all(nu > 0)
    assert np.all(np.diff(nu) <= 1e-12 * nu.max())


def test_k0_class_nu_and_expansions():
    assert sp.simplify(dr.nu_k0() - sp.Rational(2, 3) * (1 - dr.gamma**4)) == 0
    e = dr.k0_class_expansions()
    # B.34: <s^4> - <s^2>^2 = sigma_1^4 (2 K^2 + O(K^3))
    lead = sp.series(e["sigma_4"] - e["sigma_sq"] ** 2, dr.K, 0, 3).removeO()
    assert sp.simplify(lead - 2 * dr.sigma1**4 * dr.K**2) == 0


def test_tanh_erf_coefficients_by_quadrature():
    """sigma_1 and a_1 from the SymPy series against small-K Gaussian quadrature of <sigma^2>."""
    for name, f in (("tanh", np.tanh), ("erf", __import__("scipy.special", fromlist=["erf"]).erf)):
        ac = R.activation_class(name)
        K = np.array([1e-3, 2e-3])
        g = expect1(lambda z: f(z) ** 2, K)
        a1_est = (g / ac.sigma1**2 - K) / K**2  # = a_1 + O(K)
        assert np.allclose(a1_est, ac.a1, atol=0.05)
        assert np.isclose(np.sqrt(g[0] / K[0]), ac.sigma1, rtol=1e-2)


def test_gamma_star_inverts_r_star_and_footnote8():
    for act in ("relu", "linear", "leaky_relu:0.3", "tanh"):
        g = np.array([0.05, 0.3, 0.6, 0.9, 0.99])
        r = R.r_star(g, act, 2)
        assert np.allclose(R.gamma_star(r, act, 2), g, rtol=1e-9)
        r0 = R.r_star(0.0, act, 2)
        assert R.gamma_star(0.5 * r0, act, 2) == 0  # shallower than optimal: no residual connection
    # footnote 8: 1 - gamma*^2 ~ 1/((20 + 3 n_L) r) (scale-invariant), 3/((20 + 3 n_L) r) (K* = 0)
    r = 1e5
    assert np.isclose((1 - R.gamma_star(r, "relu", 1) ** 2) * r, 1 / 23, rtol=1e-3)
    assert np.isclose((1 - R.gamma_star(r, "tanh", 1) ** 2) * r, 3 / 23, rtol=1e-3)
    assert np.isclose(R.critical_C_W(R.gamma_star(r, "relu", 1), "relu") * r, 2 / 23, rtol=1e-3)


def test_gamma_star_finite_at_q_equal_5():
    """(Q - 5) u^2 + 4 u = t: the rationalised root stays finite where Q = 3 A4 / A2^2 = 5."""
    s = np.sqrt(5 - np.sqrt(24))  # a_-/a_+ with a^4 - 10 a^2 + 1 = 0
    A2, A4 = (1 + s**2) / 2, (1 + s**4) / 2
    assert np.isclose(3 * A4 / A2**2, 5)
    r = 2.0
    u = 1 - gpr.gamma_star_scale_invariant(r, 1, 1.0, s) ** 2
    assert np.isclose(4 * u, 4 / (23 * r))


def test_xi_recipe_solves_b45():
    g, Grr, Grz, Gzz = 0.6, 1.3, 0.2, 1.1
    xi = R.xi_from_correlators(g, Grr, Grz, Gzz)
    assert xi > 0 and np.isclose(xi**2 * Grr + 2 * g * xi * Grz, (1 - g**2) * Gzz)
    # an MLP block at criticality (G_Rz = 0, G_RR = C_W(gamma) A2 K) needs xi = 1
    assert np.isclose(R.xi_from_correlators(g, float(R.critical_C_W(g, "relu")) * 0.5 * 2.0, 0.0, 2.0), 1.0)


def test_xi_from_simulated_block():
    """B.45 fed by correlators measured on a simulated ReLU block with C_W = 2 (critical inside the block):
    G_RR = K and G_Rz = 0 in expectation, so xi(gamma) = sqrt(1 - gamma^2)."""
    gamma = 0.6
    s = M.simulate_residual_mlp(width=64, depth=2, gamma=gamma, C_W=2.0, activation="relu", input_kernel=1.0, samples=20000,
                                seed=4, record_block=True)
    bc = M.block_correlators(s)
    xi = R.xi_from_correlators(gamma, bc["G_RR"][0], bc["G_Rz"][0], bc["G_zz"][0])
    # propagate the correlator SEs through xi by finite differences
    h = 1e-6
    dxi = [(R.xi_from_correlators(gamma, *(np.array([bc["G_RR"][0], bc["G_Rz"][0], bc["G_zz"][0]])
                                           + h * np.eye(3)[i])) - xi) / h for i in range(3)]
    se = np.sqrt(sum((dx * bc[k + "_se"][0]) ** 2 for dx, k in zip(dxi, ("G_RR", "G_Rz", "G_zz"))))
    assert abs(xi - np.sqrt(1 - gamma**2)) < 4 * se


# --------------------------------------------------------------------------- recursion: float vs mpmath
def test_vertex_trajectory_float_vs_mpmath():
    tr = R.vertex_trajectory("tanh", gamma=0.5, depth=24, input_kernel=1.0)
    mp_tr = vertex_trajectory_mp("tanh", 0.5, 24, dps=20)
    assert len(tr["K"]) == len(mp_tr) == 25  # layers 0..24
    K_mp = np.array([float(k) for k, _ in mp_tr])
    V_mp = np.array([float(v) for _, v in mp_tr])
    assert np.allclose(tr["K"], K_mp, rtol=1e-12)
    assert np.allclose(tr["V"][1:], V_mp[1:], rtol=1e-10)


def test_nu_by_mpmath_iteration():
    relu = nu_from_iteration_mp("relu", 0.5, depth=3, dps=30)
    assert abs(float(relu["nu"]) - float(R.nu(0.5, "relu"))) < 1e-25
    leaky = nu_from_iteration_mp("leaky_relu:0.1", 0.3, depth=3, dps=30)
    assert abs(float(leaky["nu"]) - float(R.nu(0.3, "leaky_relu:0.1"))) < 1e-13
    tanh = nu_from_iteration_mp("tanh", 0.5, depth=149, dps=20)
    # deep slope extrapolated from PDLT's layers 75..150 (depth 149) against B.35's 2/3 (1 - gamma^4)
    assert abs(float(tanh["nu"]) - 2 / 3 * (1 - 0.5**4)) < 1e-3


def test_cli_nu(capsys):
    assert main(["nu", "--gamma", "0.5", "--activation", "relu", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"gamma", "activation", "nu", "C_W", "r_star"}
    nu = 0.75 * (5 * 0.75 + 4 * 0.25)  # (1 - g^2)[(1 - g^2) 5 + 4 g^2], by hand
    assert np.isclose(out["nu"], nu) and np.isclose(out["C_W"], 1.5) and np.isclose(out["r_star"], 4 / (23 * nu))
    assert main(["nu", "--gamma", "0.5", "--activation", "leaky_relu:0.1", "--n-out", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    A2, A4 = (1 + 0.01) / 2, (1 + 1e-4) / 2
    nu = 0.75 * (0.75 * (3 * A4 / A2**2 - 1) + 4 * 0.25)
    assert np.isclose(out["nu"], nu) and np.isclose(out["r_star"], 4 / (29 * nu))


@pytest.mark.parametrize("argv, name", [
    (["nu", "--gamma", "1.0", "--activation", "relu"], "gamma"),
    (["nu", "--gamma", "-0.1", "--activation", "relu"], "gamma"),
    (["nu", "--gamma", "0.5", "--activation", "softplus"], "activation"),
    (["nu", "--gamma", "0.5", "--activation", "leaky_relu:abc"], "activation"),
    (["nu", "--gamma", "0.5", "--activation", "relu", "--n-out", "0"], "n_out"),
])
def test_bad_input(argv, name, capsys):
    assert main(argv) == 2
    assert f"error: {name}:" in capsys.readouterr().err


def test_bad_gamma_python():
    with pytest.raises(ParameterError, match="gamma"):
        R.nu([0.2, 1.5], "tanh")


# --------------------------------------------------------------------------- theory vs simulation

