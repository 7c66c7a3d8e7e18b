"""One depth convention (docs/api-renames.md, "Depth: one convention"): ``depth`` is the number of residual layers
after the input; the input kernel is layer 0, so per-layer arrays have depth + 1 entries and depth = 0 is the input
alone.  PDLT App. B labels the input z^(1) (B.3, residual updates l = 2..L), so PDLT's L is depth + 1.

For every function whose depth meaning changed: depth = 0 returns only the input layer, the arrays have depth + 1
layers, and the last layer at depth d equals what ``resprop.kernel`` (the engine that defined the convention) and
the ``resprop residual-mlp`` command give at depth d.  PDLT's block z^(l+1) = gamma z^(l) + b + W sigma(z^(l)),
W ~ N(0, C_W/n), b ~ N(0, C_b) is resprop.kernel's h <- gamma h + lambda (W phi(h) + b) with lambda = 1,
sigma_w2 = C_W, sigma_b2 = C_b; its read-in K^(0) = sigma_w2 x.x/d_in + sigma_b2 gives the input kernel.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import resprop
from resprop.numeric.cli import main
from resprop.numeric.engine import mc_estimators as est
from resprop.numeric.engine import monte_carlo as MCarlo
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.pdlt import corrected as C
from resprop.numeric.theories.pdlt import finite_width_mc as F
from resprop.numeric.theories.pdlt import multi_input as M
from resprop.numeric.theories.pdlt import multi_input_corrected as MC
from resprop.numeric.theories.pdlt import residual_mlp as R
from resprop.numeric.theories.pdlt.mp_checks import nu_from_iteration_mp, vertex_trajectory_mp
from resprop.numeric.theories.pdlt.sweep import RESIDUAL_MLP

#: (activation, gamma, C_W, C_b, input kernel, relative tolerance against resprop.kernel); tanh's Gaussian
#: expectations are quadratures in both engines
CASES = [("relu", 0.5, 1.2, 0.1, 1.3, 1e-12), ("erf", 0.3, 0.9, 0.05, 0.8, 1e-10),
         ("tanh", 0.7, 1.1, 0.0, 1.0, 1e-8), ("linear", 0.6, 0.5, 0.2, 1.7, 1e-12)]


def _inputs(K1: float, C_W: float, C_b: float) -> np.ndarray:
    """One input x (d_in = 1) whose read-in kernel sigma_w2 x^2 + sigma_b2 is K1."""
    return np.array([[math.sqrt((K1 - C_b) / C_W)]])


def _engine(X, activation, depth, gamma, C_W, C_b) -> np.ndarray:
    return np.asarray(resprop.kernel(X, activation, depth, sigma_w2=C_W, sigma_b2=C_b, gamma=gamma, branch_scale=1))


# --------------------------------------------------------------------------- vertex_trajectory (B.12, B.26)
@pytest.mark.parametrize("activation,gamma,C_W,C_b,K1,rtol", CASES)
def test_vertex_trajectory_depth_zero_is_the_input(activation, gamma, C_W, C_b, K1, rtol):
    tr = R.vertex_trajectory(activation, gamma=gamma, depth=0, input_kernel=K1, C_W=C_W, C_b=C_b)
    assert tr.depth == 0 and tr.layers.tolist() == [0]
    assert tr.K.tolist() == [K1] and tr.V.tolist() == [0.0]
    np.testing.assert_allclose(_engine(_inputs(K1, C_W, C_b), activation, 0, gamma, C_W, C_b), [[K1]], rtol=1e-15)


@pytest.mark.parametrize("activation,gamma,C_W,C_b,K1,rtol", CASES)
@pytest.mark.parametrize("depth", [1, 2, 5])
def test_vertex_trajectory_kernel_equals_resprop_kernel(activation, gamma, C_W, C_b, K1, rtol, depth):
    tr = R.vertex_trajectory(activation, gamma=gamma, depth=depth, input_kernel=K1, C_W=C_W, C_b=C_b)
    assert tr.K.shape == tr.V.shape == (depth + 1,) and tr.layers.tolist() == list(range(depth + 1))
    X = _inputs(K1, C_W, C_b)
    for d in range(depth + 1):  # every layer l is resprop.kernel at depth l
        assert tr.K[d] == pytest.approx(float(_engine(X, activation, d, gamma, C_W, C_b)[0, 0]), rel=rtol)


@pytest.mark.parametrize("activation", ["relu", "linear", "leaky_relu:0.3"])
@pytest.mark.parametrize("depth", [0, 1, 7])
def test_scale_invariant_vertex_grows_by_nu_per_residual_layer(activation, depth):
    """At criticality the scale-invariant V/K^2 grows by exactly nu(gamma) per residual layer from V = 0 at the
    input: depth residual layers give depth x nu (PDLT's (L - 1) nu with L = depth + 1)."""
    tr = R.vertex_trajectory(activation, gamma=0.6, depth=depth)
    assert tr.V_over_K2[-1] == pytest.approx(depth * float(R.nu(0.6, activation)), rel=1e-12, abs=1e-15)


def test_vertex_trajectory_refuses_negative_depth():
    with pytest.raises(ParameterError) as err:
        R.vertex_trajectory("relu", gamma=0.5, depth=-1)
    assert err.value.parameter == "depth"


def test_vertex_trajectory_mp_same_convention():
    assert vertex_trajectory_mp("relu", 0.5, 0) == [(1, 0)]
    mp_tr = vertex_trajectory_mp("tanh", 0.5, 4, dps=20)
    tr = R.vertex_trajectory("tanh", gamma=0.5, depth=4)
    assert len(mp_tr) == 5
    np.testing.assert_allclose([float(k) for k, _ in mp_tr], tr.K, rtol=1e-12)
    np.testing.assert_allclose([float(v) for _, v in mp_tr], tr.V, rtol=1e-10, atol=1e-300)
    assert nu_from_iteration_mp("relu", 0.5, depth=2, dps=20)["depth"] == 2


# --------------------------------------------------------------------------- the single-input R(d), CLI
@pytest.mark.parametrize("activation", ["relu", "leaky_relu:0.5", "tanh", "erf", "gelu"])
def test_corrected_and_b26_at_depth_zero_are_gaussian(activation):
    assert C.corrected_ratio(activation, 0.5, 0) == C.b26_ratio(activation, 0.5, 0) == 2.0
    assert C.output_kernel(activation, 0.5, 0) == 1.0
    tr = C.corrected_trajectory(activation, 0.5, 0)
    assert tr.K.tolist() == [1.0] and tr.V_corrected.tolist() == tr.V_b26.tolist() == [0.0]
    if activation != "gelu":
        assert F.b26_ratio_vertex(activation, 0.5, 0) == 2.0


@pytest.mark.parametrize("activation", ["relu", "tanh", "erf"])
@pytest.mark.parametrize("depth", [1, 3])
def test_b26_ratio_is_the_vertex_trajectory_at_the_same_depth(activation, depth):
    tr = R.vertex_trajectory(activation, gamma=math.sqrt(0.5), depth=depth)
    assert C.b26_ratio(activation, 0.5, depth) == pytest.approx(2 + tr.V_over_K2[-1], rel=1e-14)
    assert F.b26_ratio_vertex(activation, 0.5, depth) == pytest.approx(2 + tr.V_over_K2[-1], rel=1e-14)
    assert len(C.corrected_trajectory(activation, 0.5, depth).K) == depth + 1


@pytest.mark.parametrize("activation", ["relu", "tanh", "erf"])
@pytest.mark.parametrize("depth", [0, 1, 4])
def test_cli_residual_mlp_equals_the_python_functions(activation, depth, capsys):
    """``resprop residual-mlp --depth d`` is corrected_ratio / b26_ratio / output_kernel at depth d, the B.26 value
    is vertex_trajectory's last layer at depth d, and K_d is resprop.kernel's depth-d kernel."""
    assert main(["residual-mlp", "--activation", activation, "--gamma", "0.5", "--depth", str(depth),
                 "--width", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["depth"] == depth and out["gamma"] == 0.5 and out["gamma2"] == 0.25
    assert out["corrected"] == C.corrected_ratio(activation, 0.25, depth)  # the corrected theory takes gamma^2
    assert out["b26"] == C.b26_ratio(activation, 0.25, depth)
    tr = R.vertex_trajectory(activation, gamma=0.5, depth=depth)
    assert out["b26"] == pytest.approx(2 + tr.V_over_K2[-1], rel=1e-14)
    assert out["K_d"] == pytest.approx(tr.K[-1], rel=1e-9)
    K_engine = float(_engine(np.array([[1.0 / math.sqrt(out["C_W"])]]), activation, depth, 0.5,
                             out["C_W"], 0.0)[0, 0])
    assert out["K_d"] == pytest.approx(K_engine, rel=1e-8)


# --------------------------------------------------------------------------- P inputs
X2 = np.array([[1.0, 0.0], [0.6, 0.8]])


@pytest.mark.parametrize("activation,gamma,C_W,C_b,K1,rtol", [c for c in CASES if c[0] != "linear"])
def test_multi_input_vertex_depth_convention(activation, gamma, C_W, C_b, K1, rtol):
    r0 = M.multi_input_vertex(activation=activation, gamma=gamma, depth=0, C_W=C_W, C_b=C_b, X=X2, C_W_in=C_W)
    assert r0.layers.tolist() == [0] and r0.K.shape == (1, 2, 2) and not r0.V.any()
    np.testing.assert_allclose(r0.K[0], _engine(X2, activation, 0, gamma, C_W, C_b), rtol=1e-14)
    r = M.multi_input_vertex(activation=activation, gamma=gamma, depth=3, C_W=C_W, C_b=C_b, X=X2, C_W_in=C_W)
    assert r.layers.tolist() == [0, 1, 2, 3] and r.K.shape == (4, 2, 2) and r.V.shape == (4, 2, 2, 2, 2)
    for d in range(4):
        np.testing.assert_allclose(r.K[d], _engine(X2, activation, d, gamma, C_W, C_b), rtol=max(rtol, 1e-9))


def test_multi_input_vertex_corrected_depth_convention():
    K = MC.equiangular_kernel(2, math.pi / 3)
    r0 = MC.multi_input_vertex_corrected(K, "relu", math.sqrt(0.5), 0)
    assert r0.layers.tolist() == [0] and r0.K.shape == (1, 2, 2) and not r0.V.any() and not r0.Delta.any()
    r = MC.multi_input_vertex_corrected(K, "relu", math.sqrt(0.5), 2)
    assert r.layers.tolist() == [0, 1, 2] and r.V.shape == (3, 2, 2, 2, 2)
    # the diagonal element is the single-input corrected theory at the same depth
    np.testing.assert_allclose(r.V[:, 0, 0, 0, 0], C.corrected_trajectory("relu", 0.5, 2).V_corrected, rtol=1e-8)
    assert r.covariance[-1, 0, 0, 0, 0] == pytest.approx(C.corrected_ratio("relu", 0.5, 2), rel=1e-8)


def test_simulate_empirical_kernels_depth_convention():
    K = MC.equiangular_kernel(2, math.pi / 3)
    G0 = M.simulate_empirical_kernels(K, "relu", 0.5, 0, 64, 50, seed=3)
    assert G0.shape == (50, 1, 2, 2)
    G = M.simulate_empirical_kernels(K, "tanh", 0.5, 3, 256, 4000, seed=4)
    assert G.shape == (4000, 4, 2, 2)
    theory = M.multi_input_vertex(K, "tanh", 0.5, 3)
    se = G.std(axis=0, ddof=1) / math.sqrt(G.shape[0])
    # E G = K + O(1/n): 5 SE plus a 1/n allowance
    assert np.all(np.abs(G.mean(axis=0) - theory.K) <= 5 * se + 4 / 256 * np.abs(theory.K))


# --------------------------------------------------------------------------- Monte Carlo of one input, sweep kind
def test_simulate_residual_mlp_depth_convention():
    kw = dict(width=32, gamma=0.5, C_W=0.75, activation="tanh", input_kernel=1.0, samples=3000, seed=5,
              record_block=True)
    s0 = MCarlo.simulate_residual_mlp(depth=0, **kw)
    assert s0.S2.shape == (3000, 1) and s0.G_RR.shape == (3000, 0)
    s = MCarlo.simulate_residual_mlp(depth=4, **kw)
    assert s.S2.shape == (3000, 5) and s.G_RR.shape == (3000, 4)
    # the same seed draws the same networks: depth 0 is the input layer of depth 4
    np.testing.assert_array_equal(s.S2[:, :1], s0.S2)
    f = est.four_point_vertex(s)
    K = R.vertex_trajectory("tanh", gamma=0.5, depth=4, C_W=0.75).K
    assert np.all(np.abs(f["K"] - K) <= 5 * f["K_se"] + 2 / 32 * K)


def test_residual_mlp_sweep_point_depth_convention():
    p = {"width": 16, "depth": 3, "gamma": 0.5, "activation": "relu", "samples": 200, "input_kernel": 1.3,
         "C_b": 0.1, "C_W": 1.2}
    out = RESIDUAL_MLP.compute(p, 0, 7)
    tr = R.vertex_trajectory("relu", gamma=0.5, depth=3, input_kernel=1.3, C_W=1.2, C_b=0.1)
    assert out["theory_K"] == tr.K[-1]
    assert out["theory_K"] == pytest.approx(float(_engine(_inputs(1.3, 1.2, 0.1), "relu", 3, 0.5, 1.2, 0.1)[0, 0]),
                                            rel=1e-12)
    assert out["theory_nu_L_over_n"] == pytest.approx(float(R.nu(0.5, "relu")) * 4 / 16, rel=1e-14)  # L = 3 + 1
    assert RESIDUAL_MLP.params["depth"].check("depth", 0) == 0
    assert RESIDUAL_MLP.compute({**p, "depth": 0}, 0, 7)["theory_V_over_nK2"] == 0.0
    with pytest.raises(ParameterError):
        RESIDUAL_MLP.params["depth"].check("depth", -1)


# --------------------------------------------------------------------------- abcd (Innocenti, Achour & Bogacz 2025)
# The paper counts L weight matrices: read-in W^(1), L - 2 hidden (MLP) or residual (ResNet, eq. 18) layers, readout
# W^(L).  resprop's depth counts the layers after the read-in, readout excluded: depth = L - 2 >= 0.  The closed forms
# below are the paper's, written out here in L = d + 2 (not taken from the generated kernels).
def _paper_pc_rates(N, L, g0):
    """Eq. 72 (r, paper's counting on the eq.-15 family), eq. 93 (D-term), eq. 124 (depth term at alpha = 1/2)."""
    r = L**2 * g0**2 * N**1.5 / (N + 1) ** 2
    D = N**-0.5 / (1 + 1 / N) ** 2
    depth_term = (L / N**2) / (1 + L / N) ** 2
    return r, D, depth_term


@pytest.mark.parametrize("depth", [0, 1, 3, 30])
def test_abcd_rates_at_depth_d_are_the_paper_at_L_d_plus_2(depth):
    from resprop.numeric.theories.abcd import abcd as AB

    N = np.array([4.0, 64.0, 1024.0])
    res = AB.rates(N, depth=depth, gamma0=0.7)
    assert res.depth == depth and res.L == depth + 2
    r, D, term = _paper_pc_rates(N, depth + 2.0, 0.7)
    np.testing.assert_allclose(res.r, r, rtol=1e-13)
    np.testing.assert_allclose(res.D, D, rtol=1e-13)
    np.testing.assert_allclose(res.depth_term_alpha_half, term, rtol=1e-13)


def test_abcd_rates_refuse_negative_depth_and_cli_is_the_function(capsys):
    from resprop.numeric.theories.abcd import abcd as AB

    with pytest.raises(ParameterError) as exc:
        AB.rates([10.0], depth=-1)
    assert exc.value.parameter == "depth"
    assert main(["abcd", "--width", "10", "100", "--depth", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["depth"] == 0 and out["L"] == 2
    r, _, term = _paper_pc_rates(np.array([10.0, 100.0]), 2.0, 1.0)
    np.testing.assert_allclose(out["r"], r, rtol=1e-13)
    np.testing.assert_allclose(out["depth_term_alpha_half"], term, rtol=1e-13)
    assert main(["abcd", "--width", "10", "--json"]) == 0  # default depth 1 (L = 3)
    assert json.loads(capsys.readouterr().out)["L"] == 3
    assert main(["abcd", "--width", "10", "--depth=-1", "--json"]) == 2
    assert "depth" in capsys.readouterr().err


@pytest.mark.parametrize("depth", [0, 1, 4, 9])
def test_abcd_expected_s_minus_one_is_the_paper_at_L_d_plus_2(depth):
    """Eqs 16, 45-47: (L - 1)/(gamma_0^2 N^(2d)) for the MLP; eqs 104-107: L^(2 alpha) ((1 + L^(-2 alpha))^(L-1) - 1)
    /(gamma_0^2 N^(2d)) for the ResNet (mean-field: d = alpha = 1/2; SP: d = alpha = 0, so 2^(L-1) - 1)."""
    from resprop.numeric.theories.abcd import predictive_coding as pc

    L, N, g0 = depth + 2.0, 48.0, 1.3
    assert pc.expected_s_minus_one(N, depth, gamma0=g0) == pytest.approx((L - 1) / (g0**2 * N), rel=1e-13)
    assert pc.expected_s_minus_one(N, depth, arch="resnet", gamma0=g0) == pytest.approx(
        L * ((1 + 1 / L) ** (L - 1) - 1) / (g0**2 * N), rel=1e-12)
    assert pc.expected_s_minus_one(N, depth, arch="resnet", param="sp", gamma0=g0) == pytest.approx(
        (2 ** (L - 1) - 1) / g0**2, rel=1e-12)
    with pytest.raises(ParameterError, match="^depth:"):
        pc.expected_s_minus_one(N, -1)


@pytest.mark.parametrize("arch", ["mlp", "resnet"])
@pytest.mark.parametrize("depth", [0, 1, 3])
def test_abcd_network_at_depth_d_has_d_layers_between_read_in_and_readout(arch, depth):
    """init_network(N, d): L = d + 2 weight matrices, d of them N x N (hidden for the MLP, residual blocks for the
    ResNet); s(theta) is eq. 25 at L = d + 2 from the raw weights, and the equilibrium works at depth 0."""
    from resprop.numeric.theories.abcd import predictive_coding as pc

    N, D = 5, 3
    rng = np.random.default_rng(depth)
    net = pc.init_network(N, depth, d_in=D, arch=arch, param="ntk", rng=rng)  # NTK: gamma = 1, a_l = 1/2
    assert net.depth == depth and net.L == depth + 2 and len(net.weights) == depth + 2
    assert [W.shape for W in net.weights] == [(N, D)] + [(N, N)] * depth + [(1, N)]
    kinds = net.kinds()
    assert kinds.count("residual") == (depth if arch == "resnet" else 0) and len(kinds) == depth + 2
    L = depth + 2
    if arch == "mlp":  # eq. 25: 1 + gamma^-2 sum_{l=2}^{L} N^{-2 a (L - l + 1)} ||W^(L) ... W^(l)||^2, gamma = 1
        s, prod = 1.0, None
        for l in range(L, 1, -1):
            prod = net.weights[l - 1] if prod is None else prod @ net.weights[l - 1]
            s += N ** (-(L - l + 1)) * np.sum(prod**2)
        assert pc.s_theta(net) == pytest.approx(s, rel=1e-12)
    x, y = rng.standard_normal((D, 4)), rng.standard_normal((1, 4))
    assert pc.equilibrated_energy(net, x, y) == pytest.approx(pc.equilibrated_energy(net, x, y, method="solve"),
                                                              rel=1e-10)
    assert len(pc.equilibrium_linear(net, x, y)) == depth + 1  # z_1 .. z_(L-1)


def test_abcd_sweeps_and_training_take_depths():
    """s_theta_sweep fits in the paper's L = depth + 2; the training networks have depth residual blocks and are
    drawn from the same random stream as before the convention (keyed by L)."""
    from resprop.numeric.theories.abcd import predictive_coding as pc
    from resprop.numeric.theories.abcd import training as PT

    sw = pc.s_theta_sweep([16, 64], [0, 6], n_samples=200, seed=3)
    assert sw.depths.tolist() == [0, 6] and sw.L.tolist() == [2, 8]
    np.testing.assert_allclose(sw.theory[:, 0], [(2 - 1) / 16, (8 - 1) / 16], rtol=1e-13)
    with pytest.raises(ParameterError, match="^depths:"):
        pc.s_theta_sweep([16], [-1], n_samples=10)
    net = PT.make_network(8, 2, "mean_field", d_in=5, d_out=3, seed=4)
    assert len(net.weights) == 4 and net.kinds.count("residual") == 2
    ref = pc.init_network(8, 2, d_in=5, d_out=3, arch="resnet", param="mean_field",
                          rng=np.random.default_rng([4, 8, 4]))
    for a, b in zip(net.weights, ref.weights):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ParameterError, match="^depth:"):
        PT.make_network(8, -1, "mean_field")
    assert PT.pc_config(True).depths == (2, 14)  # the paper's L = 4, 16
