"""Predictive coding vs backprop (Innocenti, Achour & Bogacz 2025): closed forms, inference, scalings, cosines.

Reference routes are independent of the code under test: SymPy minimisation and Lagrange solutions, a
dense least-squares solve of the stacked energy, SciPy's L-BFGS on the activities, central finite
differences, the paper's equations (25, 104) coded directly from raw weights, Monte Carlo against exact
expectations, and fitted exponents compared with derived ones within their standard errors.
"""
import math

import numpy as np
import pytest
import sympy as sp
from scipy import optimize, stats

import resprop.numeric.theories.abcd.generated.predictive_coding as gen
from resprop.derive.theories import predictive_coding as dpc
from resprop.numeric.engine.validation import ParameterError
from resprop.numeric.theories.abcd import predictive_coding as pc


def _net_and_data(N, L, *, arch="mlp", param="mean_field", activation="linear", d_out=1, seed=0, P=7, D=5):
    """A network with the paper's L weight matrices (resprop depth L - 2) and data."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((D, P))
    y = rng.standard_normal((d_out, P))
    net = pc.init_network(N, L - 2, d_in=D, d_out=d_out, arch=arch, param=param, activation=activation, rng=rng)
    return net, x, y


# --------------------------------------------------------------------------- symbolic closed forms
@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_chain_minimisation_gives_loss_over_s(L):
    w = dpc.chain_weights(L)
    diff = dpc.chain_energy_by_minimisation(L, w) - dpc.chain_energy_closed_form(L, w)
    assert sp.cancel(diff) == 0


def test_width2_L3_matrix_case_and_lagrange_general_form():
    assert dpc.width2_L3_residual() == 0
    assert dpc.lagrange_residual(5) == 0


def test_generated_chain_energy_matches_numeric_minimisation():
    rng = np.random.default_rng(1)
    for _ in range(5):
        x, y, *w = rng.standard_normal(5) * 1.5
        f = lambda z: 0.5 * ((z[0] - w[0] * x) ** 2 + (z[1] - w[1] * z[0]) ** 2 + (y - w[2] * z[1]) ** 2)  # noqa: E731
        res = optimize.minimize(f, np.zeros(2), method="BFGS", options={"gtol": 1e-12})
        assert gen.chain_energy_L3(x, y, *w) == pytest.approx(res.fun, rel=1e-8, abs=1e-14)


def test_row_norm_gain_matches_monte_carlo():
    rng = np.random.default_rng(2)
    n, c, sig2 = 6, 0.7, 0.3
    v = rng.standard_normal((1, n))
    W = rng.standard_normal((200_000, n, n)) * np.sqrt(sig2)
    for skip in (False, True):
        out = v @ ((np.eye(n) if skip else 0) + c * W)
        ratio = np.sum(out**2, axis=(-2, -1)) / np.sum(v**2)
        formula = dpc.gain_formula(skip)
        values = {"c": c, "sigma2": sig2, "n": n}
        expect = float(formula.subs({sym: values[sym.name] for sym in formula.free_symbols}))
        assert abs(ratio.mean() - expect) < 4 * ratio.std() / np.sqrt(ratio.size)


def test_pc_bp_cosine_kernel_is_the_law_of_cosines():
    rng = np.random.default_rng(3)
    for _ in range(20):
        g, gs = rng.standard_normal(9), rng.standard_normal(9)
        loss, s = rng.random() + 0.1, 1 + 3 * rng.random()
        pc_grad = g / s - loss * gs / s**2  # eq. 26
        direct = pc_grad @ g / np.linalg.norm(pc_grad) / np.linalg.norm(g)
        rho = loss * np.linalg.norm(gs) / (s * np.linalg.norm(g))
        theta = np.arccos(g @ gs / np.linalg.norm(g) / np.linalg.norm(gs))
        assert gen.pc_bp_cosine(rho, theta) == pytest.approx(direct, abs=1e-12)
    rho, theta = 1e-3, 1.1
    assert 1 - gen.pc_bp_cosine(rho, theta) == pytest.approx(gen.pc_bp_one_minus_cosine_small_rho(rho, theta), rel=1e-2)


def test_resnet_large_depth_constant_is_e_minus_one():
    # eq. 107 says Theta(L/N); the exact expectation fixes the constant: N E[s - 1]/L -> e - 1
    L = np.array([1e2, 1e4, 1e6])
    ratio = gen.s_minus_one_resnet_init(L, 1.0, 1.0, 0.0, 0.5) / L
    assert abs(ratio[-1] - (math.e - 1)) < 1e-5
    assert np.all(np.diff(np.abs(ratio - (math.e - 1))) < 0)
    # alpha = 1 > 1/2: the residual blocks barely grow the paths, E[s - 1] = L - 1/2 + O(1/L) like an MLP's L - 1
    L = 1e4  # (1 + L^{-2 alpha}) loses digits of L^{-2 alpha}: relative accuracy ~ 1e-16 L^{2 alpha}
    assert gen.s_minus_one_resnet_init(L, 1.0, 1.0, 0.0, 1.0) == pytest.approx(L - 0.5, rel=1e-6)


# --------------------------------------------------------------------------- equilibrated energy: three routes
CASES = [("mlp", "mean_field", 8, 3), ("mlp", "sp", 10, 5), ("mlp", "mup", 6, 4), ("mlp", "ntk", 6, 2),
         ("resnet", "mean_field", 8, 5), ("resnet", "sp", 6, 4)]


@pytest.mark.parametrize("arch,param,N,L", CASES)
def test_closed_form_equals_linear_solve_and_gd(arch, param, N, L):
    net, x, y = _net_and_data(N, L, arch=arch, param=param, seed=N + L)
    closed = pc.equilibrated_energy(net, x, y)
    solved = pc.equilibrated_energy(net, x, y, method="solve")
    assert closed == pytest.approx(solved, rel=1e-11)
    res = pc.inference_gd(net, x, y, gtol=1e-11)
    assert res.converged
    assert res.energy == pytest.approx(closed, rel=1e-8)
    for z_gd, z_star in zip(res.hidden, pc.equilibrium_linear(net, x, y)):
        np.testing.assert_allclose(z_gd, z_star, rtol=0, atol=1e-8 * (1 + np.abs(z_star).max()))
    # F* = L / s: the PCN energy at equilibrium is a rescaled MSE, never above it
    assert closed == pytest.approx(pc.mse_loss(net, x, y) / pc.s_theta(net), rel=1e-12)
    assert closed <= pc.mse_loss(net, x, y)


def test_vector_output_matrix_form_equals_solve():
    net, x, y = _net_and_data(7, 4, arch="resnet", d_out=3, seed=4)
    assert pc.equilibrated_energy(net, x, y) == pytest.approx(pc.equilibrated_energy(net, x, y, method="solve"),
                                                             rel=1e-11)
    with pytest.raises(ParameterError, match="^net"):
        pc.s_theta(net)


def test_batched_networks_match_one_by_one():
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((5, 4)), rng.standard_normal((1, 4))
    net = pc.init_network(6, 2, d_in=5, arch="resnet", batch=(3,), rng=rng)  # L = 4
    F = pc.equilibrated_energy(net, x, y)
    assert F.shape == (3,)
    for b in range(3):
        one = net.with_weights([W[b] for W in net.weights])
        assert F[b] == pytest.approx(pc.equilibrated_energy(one, x, y, method="solve"), rel=1e-11)


def _eq25_mlp(net):
    """Eq. 25 from raw weights: 1 + gamma^-2 sum_{l=2}^{L} N^{-2 sum_{k>=l} a_k} ||W^(L) ... W^(l)||^2."""
    p = pc.PARAMETERISATIONS[net.param]
    N, L = net.width, net.L
    gamma = net.gamma0 * N**p.d
    total, prod = 0.0, None
    for l in range(L, 1, -1):
        prod = net.weights[l - 1] if prod is None else prod @ net.weights[l - 1]
        total += N ** (-2 * p.a * (L - l + 1)) * np.sum(prod**2)
    return 1 + total / gamma**2


def _eq104_resnet(net):
    """Eqs 104-105 from raw weights (mean-field): 1 + (||w||^2 + sum_l ||w prod_{k=l}^{L-1}(I + W/(L^a sqrt N))||^2)/(g0^2 N^2)."""
    N, L, a = net.width, net.L, net.alpha
    w = net.weights[-1]
    total, p = np.sum(w**2), w
    for k in range(L - 1, 1, -1):
        p = p @ (np.eye(N) + net.weights[k - 1] / (L**a * np.sqrt(N)))
        total += np.sum(p**2)
    return 1 + total / (net.gamma0**2 * N**2)


@pytest.mark.parametrize("param", ["mean_field", "sp", "mup", "ntk"])
def test_s_theta_is_eq25_for_mlps(param):
    net, *_ = _net_and_data(9, 5, param=param, seed=6)
    assert pc.s_theta(net) == pytest.approx(_eq25_mlp(net), rel=1e-12)


def test_s_theta_is_eq104_for_resnets():
    net, *_ = _net_and_data(9, 6, arch="resnet", seed=7)
    assert pc.s_theta(net) == pytest.approx(_eq104_resnet(net), rel=1e-12)


# --------------------------------------------------------------------------- gradients
def _fd_directional(fun, net, direction, h=1e-6):
    plus = net.with_weights([W + h * V for W, V in zip(net.weights, direction)])
    minus = net.with_weights([W - h * V for W, V in zip(net.weights, direction)])
    return (fun(plus) - fun(minus)) / (2 * h)


@pytest.mark.parametrize("arch,activation", [("mlp", "linear"), ("resnet", "linear"), ("mlp", "tanh"),
                                             ("resnet", "tanh")])
def test_bp_gradients_match_finite_differences(arch, activation):
    net, x, y = _net_and_data(6, 4, arch=arch, activation=activation, seed=8)
    rng = np.random.default_rng(9)
    for _ in range(3):
        V = [rng.standard_normal(W.shape) for W in net.weights]
        fd = _fd_directional(lambda n: pc.mse_loss(n, x, y), net, V)
        an = sum(np.sum(g * v) for g, v in zip(pc.bp_weight_gradients(net, x, y), V))
        assert an == pytest.approx(fd, rel=1e-6, abs=1e-10)


@pytest.mark.parametrize("arch", ["mlp", "resnet"])
def test_pc_gradient_is_gradient_of_equilibrated_energy(arch):
    """Envelope theorem: dF/dW at z* equals d(L/s)/dW; and eq. 26 with the eq. 48/109 recursion for ds/dW."""
    net, x, y = _net_and_data(6, 5, arch=arch, seed=10)
    g_pc, _, _ = pc.pc_weight_gradients(net, x, y)
    g_bp = pc.bp_weight_gradients(net, x, y)
    g_s = pc.rescaling_gradient(net)
    loss, s = pc.mse_loss(net, x, y), pc.s_theta(net)
    for a, b, c in zip(g_pc, g_bp, g_s):
        np.testing.assert_allclose(a, b / s - loss * c / s**2, rtol=1e-9, atol=1e-12)
    rng = np.random.default_rng(11)
    for _ in range(3):
        V = [rng.standard_normal(W.shape) for W in net.weights]
        assert sum(np.sum(g * v) for g, v in zip(g_pc, V)) == pytest.approx(
            _fd_directional(lambda n: pc.equilibrated_energy(n, x, y), net, V), rel=1e-6)
        assert sum(np.sum(g * v) for g, v in zip(g_s, V)) == pytest.approx(
            _fd_directional(pc.s_theta, net, V), rel=1e-6)
    cos_direct = pc.gradient_cosine(g_pc, g_bp)
    assert pc.pc_bp_cosine_closed_form(net, x, y)["cosine"] == pytest.approx(cos_direct, abs=1e-12)


@pytest.mark.parametrize("arch", ["mlp", "resnet"])
def test_tanh_inference_matches_lbfgs(arch):
    net, x, y = _net_and_data(5, 4, arch=arch, activation="tanh", seed=12, P=3)
    N, P = net.width, x.shape[1]

    def f(flat):
        hidden = [flat[k * N * P:(k + 1) * N * P].reshape(N, P) for k in range(net.L - 1)]
        return float(pc.energy(net, x, y, hidden))

    z0 = np.concatenate([h.ravel() for h in pc.forward(net, x)[1:-1]])
    ref = optimize.minimize(f, z0, method="L-BFGS-B", options={"ftol": 1e-16, "gtol": 1e-12, "maxiter": 20000})
    res = pc.inference_gd(net, x, y, gtol=1e-10)
    assert res.converged
    assert res.energy == pytest.approx(ref.fun, rel=1e-7)
    assert res.energy <= ref.fun * (1 + 1e-9)  # GD to a tight gradient tolerance is at least as low


def test_activity_gradient_matches_finite_differences_tanh():
    net, x, y = _net_and_data(5, 4, arch="resnet", activation="tanh", seed=13, P=3)
    rng = np.random.default_rng(14)
    hidden = [rng.standard_normal((5, 3)) for _ in range(3)]
    zs, errs = pc._errors(net, x, y, hidden)
    grads = pc._activity_grad(net, zs, errs)
    V = [rng.standard_normal((5, 3)) for _ in range(3)]
    h = 1e-6
    fd = (pc.energy(net, x, y, [a + h * v for a, v in zip(hidden, V)])
          - pc.energy(net, x, y, [a - h * v for a, v in zip(hidden, V)])) / (2 * h)
    assert sum(np.sum(g * v) for g, v in zip(grads, V)) / x.shape[1] == pytest.approx(fd, rel=1e-6)


# --------------------------------------------------------------------------- s(theta) - 1 scaling
@pytest.mark.parametrize("arch", ["mlp", "resnet"])
def test_reduced_sampler_has_the_dense_law(arch):
    kw = dict(arch=arch, param="mean_field")
    dense = pc.sample_s_theta(12, 4, 1500, method="dense", rng=np.random.default_rng(15), **kw)
    reduced = pc.sample_s_theta(12, 4, 20000, method="reduced", rng=np.random.default_rng(16), **kw)
    assert stats.ks_2samp(dense, reduced).pvalue > 1e-3
    expect = 1 + pc.expected_s_minus_one(12, 4, **kw)
    for sample in (dense, reduced):
        assert abs(sample.mean() - expect) < 4 * sample.std() / np.sqrt(sample.size)


@pytest.mark.parametrize("arch", ["mlp", "resnet"])
@pytest.mark.parametrize("param,exponent", [("mean_field", -1.0), ("sp", 0.0)])
def test_s_minus_one_width_exponent(arch, param, exponent):
    """Eq. 16: s - 1 = Theta(1/N) under mean-field; Fig. A.19: Theta(1) under SP."""
    sw = pc.s_theta_sweep([16, 32, 64, 128, 256], [3, 7], arch=arch, param=param, n_samples=3000, seed=17)
    z = (sw["mean"] - sw["theory"]) / sw["se"]
    assert np.max(np.abs(z)) < 4.5
    for fit in sw["fit_width"]:
        assert abs(fit["slope"] - exponent) < 4 * fit["slope_se"]
        assert fit["slope_se"] < 0.02


def test_resnet_s_minus_one_scales_with_L_over_N():
    """Eq. 19: s - 1 = Theta(L/N) for mean-field ResNets (alpha = 1/2), with constant e - 1 at large depth."""
    sw = pc.s_theta_sweep([64, 256], [126, 254, 510, 1022], arch="resnet", n_samples=4000, seed=18)  # L = 128..1024
    np.testing.assert_array_equal(sw["L"], [128, 256, 512, 1024])
    for fit, fit_th in zip(sw["fit_depth"], sw["fit_depth_theory"]):
        assert abs(fit["slope"] - fit_th["slope"]) < 4 * fit["slope_se"]
        assert abs(fit["slope"] - 1.0) < 0.02 + 4 * fit["slope_se"]
    collapse = sw["mean"] * sw["widths"][None, :] / sw["L"][:, None]
    err = sw["se"] * sw["widths"][None, :] / sw["L"][:, None]
    assert abs(collapse[-1, -1] - (math.e - 1)) < 4 * err[-1, -1] + 1e-3
    # at equal L/N (L = 256, N = 64 vs L = 1024, N = 256) s - 1 agrees: a function of L/N only
    a, b = (sw["mean"][1, 0], sw["se"][1, 0]), (sw["mean"][3, 1], sw["se"][3, 1])
    assert abs(a[0] - b[0]) < 4 * math.hypot(a[1], b[1]) + 0.005 * a[0]


def test_rescaling_gradient_entries_are_smaller_than_eq55():
    """Eq. 55 gives ds/dW_ij = Theta(L N^{-2d-a-1/2}) (N^{-2} mean-field); the sum over N in eq. 53 has random
    signs at initialisation, so the entries are Theta(L N^{-2d-a-1}): N^{-5/2} mean-field, N^{-1} SP."""
    widths = [32, 64, 128, 256]
    for param, derived, paper in (("mean_field", -2.5, -2.0), ("sp", -1.0, -0.5)):
        rms = np.array([[np.sqrt(np.mean(pc.rescaling_gradient(pc.init_network(
            N, 3, param=param, rng=np.random.default_rng([19, N, k])))[2] ** 2)) for k in range(8)] for N in widths])
        fit = pc.fit_power_law(widths, rms.mean(1), rms.std(1, ddof=1) / np.sqrt(rms.shape[1]))
        assert abs(fit["slope"] - derived) < 0.2 + 3 * fit["slope_se"]
        assert fit["slope"] < paper - 0.3


# --------------------------------------------------------------------------- PC vs BP on the toy task
def test_toy_task_shapes_and_labels():
    x, y = pc.toy_task(rng=np.random.default_rng(0))
    assert x.shape == (40, 20) and y.shape == (1, 20)
    assert set(np.unique(y)) <= {-1.0, 1.0}


@pytest.fixture(scope="module")
def linear_cosines():
    widths = [16, 64, 256, 1024]
    return {param: pc.cosine_vs_width(widths, 3, param=param, n_seeds=6, seed=20) for param in ("mean_field", "sp")}


def test_mean_field_linear_pc_converges_to_bp(linear_cosines):
    """Corollary 3.2 / Fig. 2: cos -> 1 and ||g_PC - g_BP||/||g_BP|| -> 0 as N grows at fixed L = 5 (depth 3)."""
    r = linear_cosines["mean_field"]
    om, om_se = 1 - r["mean"], r["se"]
    assert np.all(np.diff(r["mean"]) > 0)
    assert r["mean"][-1] > 0.999
    fit = pc.fit_power_law(r["widths"], om, np.maximum(om_se, 1e-12))
    # 1 - cos ~ rho^2/2 with rho = Theta(L/N): exponent -2 (pre-asymptotic fits land slightly above)
    assert abs(fit["slope"] + 2) < 0.25 + 3 * fit["slope_se"]
    efit = pc.fit_power_law(r["widths"], r["rel_error_mean"], r["rel_error_se"])
    assert abs(efit["slope"] + 1) < 0.15 + 3 * efit["slope_se"]


def test_sp_linear_pc_gradient_does_not_converge_to_bp(linear_cosines):
    """Fig. A.18: under SP s stays ~ L, so the PC gradient stays ~ grad L / s: relative error ~ 1 - 1/s at any width;
    the direction aligns only as 1 - cos ~ 1/N (rho = Theta(N^{-1/2})), far slower than mean-field."""
    sp_, mf = linear_cosines["sp"], linear_cosines["mean_field"]
    one_minus_inv_s = 1 - np.mean(1 / sp_["s"], axis=1)
    assert np.all(sp_["rel_error_mean"] > 0.6)
    # ||g_PC - g||/||g|| = |(1 - 1/s) g_hat + (rho/s) ds_hat| -> 1 - 1/s as rho -> 0 (N = 256, 1024)
    assert np.all(np.abs(sp_["rel_error_mean"][2:] - one_minus_inv_s[2:]) < 0.03)
    efit = pc.fit_power_law(sp_["widths"][1:], sp_["rel_error_mean"][1:], sp_["rel_error_se"][1:])
    assert abs(efit["slope"]) < 0.05 + 3 * efit["slope_se"]
    fit = pc.fit_power_law(sp_["widths"], 1 - sp_["mean"], sp_["se"])
    assert abs(fit["slope"] + 1) < 0.3 + 3 * fit["slope_se"]
    for j in (2, 3):  # N = 256, 1024: SP's 1 - cos exceeds mean-field's by a wide margin
        gap = (1 - sp_["mean"][j]) - 5 * (1 - mf["mean"][j])
        assert gap > 3 * math.hypot(sp_["se"][j], 5 * mf["se"][j])


def test_tanh_pc_with_gd_inference_converges_to_bp_under_mean_field_only():
    widths = [16, 64, 128]
    mf = pc.cosine_vs_width(widths, 3, activation="tanh", n_seeds=3, seed=21, gtol=1e-7)
    sp_ = pc.cosine_vs_width(widths, 3, param="sp", activation="tanh", n_seeds=3, seed=21, gtol=1e-7)
    assert mf["mean"][-1] > mf["mean"][0] + 4 * math.hypot(mf["se"][-1], mf["se"][0])
    assert mf["mean"][-1] > 0.97
    assert mf["rel_error_mean"][-1] < 0.5 * mf["rel_error_mean"][0]
    # SP: at N = 128 the PC gradient is still far from BP's, in direction and size
    assert (1 - sp_["mean"][-1]) > 3 * (1 - mf["mean"][-1])
    assert sp_["rel_error_mean"][-1] > 0.5


def test_fig4_few_inference_steps_do_not_reach_bp_in_deep_networks():
    """Fig. 4: with 20 GD inference steps a shallow tanh ResNet reaches its equilibrium gradient, a deep one does not;
    at convergence the deep network's PC gradient is much closer to BP's than after 20 steps."""
    r = pc.cosine_vs_inference_step(48, [1, 10], [0.02, 0.3], n_iter=20, n_seeds=2, seed=22)  # L = 3, 12
    children = np.random.SeedSequence(22).spawn(4)
    for i, dep in enumerate((1, 10)):
        for k in range(2):  # rebuild the same networks (child i * n_seeds + k) and infer to convergence
            rng = np.random.default_rng(children[i * 2 + k])
            x, y = pc.toy_task(20, 40, rng)
            net = pc.init_network(48, dep, arch="resnet", activation="tanh", rng=rng)
            g_pc, _, info = pc.pc_weight_gradients(net, x, y, inference="gd", gtol=1e-7, max_iter=200_000)
            assert info.converged
            converged = pc.gradient_cosine(g_pc, pc.bp_weight_gradients(net, x, y))
            few = r["cosine"][i, 1, k]
            if dep == 1:
                assert abs(few - converged) < 0.01
                assert r["cosine"][i, 0, k] < converged - 0.02  # a small step is not enough either
            else:
                assert few < converged - 0.05


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs,name", [
    (dict(width=0, depth=1), "width"), (dict(width=4.5, depth=1), "width"), (dict(width=4, depth=-1), "depth"),
    (dict(width=4, depth=2.5), "depth"), (dict(width=4, depth=True), "depth"),
    (dict(width=4, depth=1, gamma0=-1.0), "gamma0"), (dict(width=4, depth=1, weight_variance=-0.5), "weight_variance"),
    (dict(width=4, depth=1, alpha=-0.5), "alpha"), (dict(width=4, depth=1, param="xavier"), "param"),
    (dict(width=4, depth=1, arch="cnn"), "arch"), (dict(width=4, depth=1, activation="relu6"), "activation"),
    (dict(width=4, depth=1, d_in=0), "d_in"), (dict(width=4, depth=1, gamma0=float("nan")), "gamma0"),
])
def test_bad_network_parameters_name_the_parameter(kwargs, name):
    with pytest.raises(ParameterError, match=f"^{name}:"):
        pc.init_network(**kwargs)


def test_bad_data_and_solver_inputs():
    net, x, y = _net_and_data(4, 3, seed=23)
    with pytest.raises(ParameterError, match="^x:"):
        pc.equilibrated_energy(net, x[:-1], y)
    with pytest.raises(ParameterError, match="^y:"):
        pc.equilibrated_energy(net, x, y[:, :-1])
    with pytest.raises(ParameterError, match="^beta:"):
        pc.inference_gd(net, x, y, beta=-0.1)
    with pytest.raises(ParameterError, match="^method:"):
        pc.equilibrated_energy(net, x, y, method="magic")
    tanh_net, *_ = _net_and_data(4, 3, activation="tanh", seed=23)
    with pytest.raises(ParameterError, match="^activation:"):
        pc.equilibrated_energy(tanh_net, x, y)
    with pytest.raises(ParameterError, match="^n_samples:"):
        pc.sample_s_theta(8, 1, 0)
    with pytest.raises(ParameterError, match="^width:"):
        pc.expected_s_minus_one(0.5, 2)
    with pytest.raises(ParameterError, match="^depth:"):
        pc.expected_s_minus_one(8, -1)
    with pytest.raises(ParameterError, match="^widths:"):
        pc.cosine_vs_width([0, 8])


# --------------------------------------------------------------------------- figures
def test_make_pc_figures_quick_writes_two_pngs(tmp_path):
    import matplotlib.image as mpimg

    from resprop.numeric.theories.abcd.figures import FIGURE_NAMES, make_figures

    paths = make_figures(tmp_path / "pc", quick=True, seed=0)
    assert [p.name for p in paths] == list(FIGURE_NAMES)
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        img = mpimg.imread(p)
        assert img.shape[0] > 300 and img.shape[1] > 300 and float(np.ptp(img[..., :3])) > 0.5
