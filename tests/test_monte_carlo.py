"""Tests of the Monte Carlo engine resprop.numeric.engine.monte_carlo / resprop.numeric.engine.mc_estimators.

Every statistical check uses fixed seeds and a 4-standard-error tolerance; the
reference values come from exact identities derived independently of the code
(Lemma 10 and eq. (10) of Li, Nica & Roy 2021, chi-square/Gaussian moments,
linear and conditionally-centred kernel recursions of PDLT (B.8)) or from the
other sampling path (reduced vs dense).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from resprop.numeric.engine.mc_estimators import jackknife, mean_se, variance_se
from resprop.numeric.engine.monte_carlo import (
    block_correlators,
    conjecture5,
    four_point_vertex,
    g_moments,
    hypoactivation,
    log_norm_moments,
    output_moments,
    simulate_log_gaussian,
    simulate_residual_mlp,
)
from resprop.numeric.engine.validation import ParameterError

Z = 4.0
A = L = 1 / math.sqrt(2)


def _z(a, a_se, b, b_se=0.0):
    """Two-sample (or one-sample when b_se = 0) z-score, elementwise."""
    return np.abs(np.asarray(a) - np.asarray(b)) / np.hypot(a_se, b_se)


# ---------------------------------------------------------------------------
# Li-Nica-Roy: reduced vs dense
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module", params=[False, True], ids=["vanilla", "balanced"])
def lnr_pair(request):
    kw = dict(width=16, depth=8, alpha=A, lam=L, balanced=request.param, samples=20000, n_out=2)
    return (simulate_log_gaussian(method="reduced", seed=101, **kw),
            simulate_log_gaussian(method="dense", seed=202, **kw))


def test_reduced_and_dense_agree_on_G(lnr_pair):
    r, d = (g_moments(s) for s in lnr_pair)
    assert _z(r["mean_G"], r["mean_G_se"], d["mean_G"], d["mean_G_se"]) < Z
    assert _z(r["var_G"], r["var_G_se"], d["var_G"], d["var_G_se"]) < Z


def test_reduced_and_dense_agree_on_activations(lnr_pair):
    r, d = lnr_pair
    (mr, sr), (md, sd) = mean_se(r.act_sq), mean_se(d.act_sq)
    assert np.all(_z(mr, sr, md, sd) < Z)
    (fr, fsr), (fd, fsd) = mean_se(r.active_fraction), mean_se(d.active_fraction)
    assert np.all(_z(fr, fsr, fd, fsd) < Z)
    vr, vd = conjecture5(r, lags=(1,)), conjecture5(d, lags=(1,))
    assert np.all(_z(vr["var"], vr["var_se"], vd["var"], vd["var_se"]) < Z)
    assert _z(vr["cov_avg"][1], vr["cov_avg_se"][1], vd["cov_avg"][1], vd["cov_avg_se"][1]) < Z


def test_reduced_and_dense_agree_on_outputs(lnr_pair):
    r, d = (output_moments(s) for s in lnr_pair)
    assert _z(r["mean_sq"], r["mean_sq_se"], d["mean_sq"], d["mean_sq_se"]) < Z
    assert _z(r["corr_sq"], r["corr_sq_se"], d["corr_sq"], d["corr_sq_se"]) < Z


def test_dense_output_correlation_matches_scalar_times_gaussian():
    """z_out = A g with A = ||z^d||/sqrt(n) independent of g (eq. (15)), so with q_i = z_i^2:
    E q = E A^2, Var q = 3 E A^4 - (E A^2)^2, Corr(q_i, q_j) = (E A^4 - (E A^2)^2) / Var q.
    The right-hand sides come from G of a separate reduced run; the left from a real W_out."""
    kw = dict(width=12, depth=3, alpha=0.9, lam=0.6)
    dense = output_moments(simulate_log_gaussian(method="dense", seed=5, samples=40000, n_out=4, **kw))
    s = simulate_log_gaussian(method="reduced", seed=6, samples=200000, **kw)
    A2 = np.exp(s.G + np.log(0.9**2 + 0.6**2) * 3)

    def moments(m2, m4):
        var = 3 * m4 - m2**2
        return np.stack([m2, var, (m4 - m2**2) / var])

    ref, ref_se = jackknife(moments, [A2, A2**2])
    assert _z(dense["mean_sq"], dense["mean_sq_se"], ref[0], ref_se[0]) < Z
    assert _z(dense["var_sq"], dense["var_sq_se"], ref[1], ref_se[1]) < Z
    assert _z(dense["corr_sq"], dense["corr_sq_se"], ref[2], ref_se[2]) < Z


# ---------------------------------------------------------------------------
# Li-Nica-Roy: exact identities
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [8, 40])
@pytest.mark.parametrize("balanced", [False, True])
def test_layer0_matches_lemma10(n, balanced):
    """zhat^0 is uniform on S^{n-1}: E||relu(u)||^2 = 1/2, Var = 3/(4(n+2)) (Lemma 10); balanced signs keep the law."""
    s = simulate_log_gaussian(width=n, depth=1, alpha=A, lam=L, balanced=balanced, samples=100000, seed=7)
    c = conjecture5(s, layers=[0], lags=())
    assert _z(c["mean"][0], c["mean_se"][0], 0.5) < Z
    assert _z(c["var"][0], c["var_se"][0], 3 / (4 * (n + 2))) < Z
    assert hypoactivation(s)["h"][0] == pytest.approx(c["mean"][0] - 0.5)


def test_fully_connected_limit_is_uniform_and_unbiased():
    """alpha = 0, lam = 1: zhat^l = g^l/||g^l|| is uniform and independent across layers, so every layer obeys
    Lemma 10, lag covariances vanish, h_l = 0, and E exp(G) = prod_l E[2 act_sq] E[||g||^2/n] = 1."""
    n, d = 32, 6
    s = simulate_log_gaussian(width=n, depth=d, alpha=0.0, lam=1.0, samples=60000, seed=8)
    c = conjecture5(s, layers=range(d), lags=(1, 2))
    assert np.all(_z(c["mean"], c["mean_se"], 0.5) < Z)
    assert np.all(_z(c["var"], c["var_se"], 3 / (4 * (n + 2))) < Z)
    for k in (1, 2):
        assert np.all(_z(c["cov"][k][k:], c["cov_se"][k][k:], 0.0) < Z)
    h = hypoactivation(s)
    assert _z(h["h_total"], h["h_total_se"], 0.0) < Z
    m, se = mean_se(np.exp(s.G))
    assert _z(m, se, 1.0) < Z


def test_balanced_norm_identity_with_layer_dependent_coefficients():
    """Balanced: E||phi_s(z)||^2 = ||z||^2/2 given z (eq. (10)), so E||z^d||^2/n = prod_l (alpha_l^2 + lam_l^2),
    i.e. E exp(G) = 1, for any layer-dependent coefficients (Prop. 6)."""
    d = 10
    alpha = np.linspace(0.5, 1.1, d)
    lam = np.linspace(1.2, 0.3, d)
    s = simulate_log_gaussian(width=32, depth=d, alpha=alpha, lam=lam, balanced=True, samples=60000, seed=9)
    m, se = mean_se(np.exp(s.G))
    assert _z(m, se, 1.0) < Z
    # rescaling all coefficients must not change G (it is normalised by prod(alpha^2 + lam^2))
    s3 = simulate_log_gaussian(width=32, depth=d, alpha=3 * alpha, lam=3 * lam, balanced=True, samples=600, seed=9)
    s1 = simulate_log_gaussian(width=32, depth=d, alpha=alpha, lam=lam, balanced=True, samples=600, seed=9)
    np.testing.assert_allclose(s3.G, s1.G, rtol=0, atol=1e-10)


def test_balanced_has_no_hypoactivation_and_no_interlayer_covariance():
    """Fresh signs make E[act_sq_l | past] = 1/2 exactly (eq. (10)): h_l = 0 and Cov(act_sq_l, act_sq_{l-k}) = 0."""
    d = 12
    s = simulate_log_gaussian(width=24, depth=d, alpha=A, lam=L, balanced=True, samples=40000, seed=10)
    h = hypoactivation(s)
    assert np.all(_z(h["h"], h["h_se"], 0.0) < Z)
    c = conjecture5(s, lags=(1, 2))
    for k in (1, 2):
        assert np.all(_z(c["cov"][k][k:], c["cov_se"][k][k:], 0.0) < Z)
        assert _z(c["cov_avg"][k], c["cov_avg_se"][k], 0.0) < Z


def test_vanilla_single_layer_mean_norm():
    """d = 1 vanilla: E||z^1||^2 = alpha^2 E||g||^2 + 2 lam^2 E||relu(g)||^2 = (alpha^2 + lam^2) n, so E exp(G) = 1."""
    s = simulate_log_gaussian(width=10, depth=1, alpha=-0.4, lam=1.3, samples=100000, seed=11)
    m, se = mean_se(np.exp(s.G))
    assert _z(m, se, 1.0) < Z


def test_vanilla_hypoactivation_is_negative():
    """Section 2: in vanilla ResNets h_l < 0 beyond the first layers (slightly fewer than half of the ReLUs active)."""
    s = simulate_log_gaussian(width=24, depth=24, alpha=A, lam=L, samples=20000, seed=12)
    h = hypoactivation(s)
    assert _z(h["h"][0], h["h_se"][0], 0.0) < Z  # zhat^0 is uniform
    assert np.all(h["h"][6:] + Z * h["h_se"][6:] < 0)


def _reference_vanilla_act_sq(n: int, d: int, alpha: float, lam: float, samples: int, seed: int) -> np.ndarray:
    """Independent sampler of eq. (1) written from the paper, not from resprop.numeric.engine.monte_carlo: explicit Gaussian
    W^l, z^0 ~ N(0, I_n), z^{l+1} = alpha z^l + lam sqrt(2/n) W^l relu(z^l); returns
    ||relu(z^l)||^2 / ||z^l||^2 for l = 0..d-1, shape (samples, d)."""
    rng = np.random.default_rng(seed)
    out = np.empty((samples, d))
    for start in range(0, samples, 2000):
        m = min(2000, samples - start)
        z = rng.standard_normal((m, n))
        for l in range(d):
            r = np.maximum(z, 0.0)
            out[start:start + m, l] = np.einsum("ij,ij->i", r, r) / np.einsum("ij,ij->i", z, z)
            W = rng.standard_normal((m, n, n))
            z = alpha * z + lam * math.sqrt(2.0 / n) * np.einsum("mij,mj->mi", W, r)
    return out


def test_hypoactivation_constant_against_independent_sampler():
    """C_hat = (n/d) sum_l h_l (Prop. 2) with n != d (n = 16, d = 8, so n/d and d/n differ 4-fold), against the
    same statistic from the independent dense sampler above (other seed): per-layer h_l, h_total and C_hat agree
    within 4 combined standard errors (measured: C_hat = -0.619 +- 0.012 here, reference -0.608 +- 0.012)."""
    n, d = 16, 8
    s = simulate_log_gaussian(width=n, depth=d, alpha=A, lam=L, samples=40000, seed=21)
    h = hypoactivation(s)
    ref = _reference_vanilla_act_sq(n, d, A, L, samples=40000, seed=22)
    h_ref, h_ref_se = mean_se(ref - 0.5)
    tot_ref, tot_ref_se = mean_se(ref.sum(axis=1) - 0.5 * d)
    assert np.all(_z(h["h"], h["h_se"], h_ref, h_ref_se) < Z)
    assert _z(h["h_total"], h["h_total_se"], tot_ref, tot_ref_se) < Z
    assert _z(h["C_hat"], h["C_hat_se"], tot_ref * n / d, tot_ref_se * n / d) < Z
    assert h["C_hat_se"] < 0.05 * abs(h["C_hat"])  # resolves C_hat well enough to tell n/d from d/n


def test_determinism_and_chunking():
    kw = dict(width=12, depth=5, alpha=0.8, lam=0.5, balanced=True, samples=1001, n_out=2)
    a = simulate_log_gaussian(seed=3, chunk_size=100, **kw)
    b = simulate_log_gaussian(seed=3, chunk_size=100, **kw)
    c = simulate_log_gaussian(seed=np.random.SeedSequence(3), chunk_size=100, **kw)
    for x in (b, c):
        np.testing.assert_array_equal(a.G, x.G)
        np.testing.assert_array_equal(a.act_sq, x.act_sq)
        np.testing.assert_array_equal(a.z_out, x.z_out)
    assert a.G.shape == (1001,) and a.act_sq.shape == (1001, 5) and a.z_out.shape == (1001, 2)
    assert not np.array_equal(a.G, simulate_log_gaussian(seed=4, chunk_size=100, **kw).G)
    assert np.all((a.act_sq >= 0) & (a.act_sq <= 1)) and np.all(np.isfinite(a.G))


# ---------------------------------------------------------------------------
# Estimators on synthetic data
# ---------------------------------------------------------------------------


def test_jackknife_standard_errors_are_calibrated():
    """Gaussian data: SE of the sample variance is sigma^2 sqrt(2/(N-1)); SE of the covariance of a
    bivariate normal with correlation r is sqrt((1 + r^2)/(N-1)) (unit variances)."""
    rng = np.random.default_rng(0)
    N = 20000
    x = 3.0 * rng.standard_normal(N)
    v, v_se = variance_se(x)
    assert v_se == pytest.approx(9.0 * math.sqrt(2 / (N - 1)), rel=0.35)
    r = 0.6
    y = r * x / 3 + math.sqrt(1 - r * r) * rng.standard_normal(N)
    cov, cov_se = jackknife(lambda a, b, ab: ab - a * b, [x / 3, y, x / 3 * y])
    assert cov_se == pytest.approx(math.sqrt((1 + r * r) / (N - 1)), rel=0.35)
    assert _z(cov, cov_se, r) < Z


# ---------------------------------------------------------------------------
# PDLT residual MLP
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["reduced", "dense"])
def test_linear_residual_mlp_kernel_is_exact(method):
    """sigma = id, C_b = 0: E[S2^(l+1) | z^(l)] = (gamma^2 + C_W) S2^(l), so E S2^(l) = (gamma^2 + C_W)^l K1
    (layers l = 0..depth, 0 the input)."""
    depth, gamma, C_W, K1 = 5, 0.8, 0.5, 1.7
    s = simulate_residual_mlp(width=16, depth=depth, gamma=gamma, C_W=C_W, activation="linear", input_kernel=K1,
                              samples=20000, seed=13, method=method)
    f = four_point_vertex(s)
    assert np.all(_z(f["K"], f["K_se"], (gamma**2 + C_W) ** np.arange(depth + 1) * K1) < Z)


def test_relu_residual_mlp_kernel_recursion():
    """gamma = 0: z^(l+1) | z^(l) ~ N(0, C_b + C_W ||relu(z)||^2/n), symmetric, so K_{l+1} = C_b + C_W K_l/2 holds
    exactly at any width.  gamma != 0: exact for layer 1 (the input z^(0) Gaussian); the cross term E[R.z] = 0
    always."""
    C_W, C_b, K1, depth = 1.6, 0.3, 0.7, 5
    s0 = simulate_residual_mlp(width=200, depth=depth, gamma=0.0, C_W=C_W, C_b=C_b, activation="relu", input_kernel=K1,
                               samples=20000, seed=14)
    K = [K1]
    for _ in range(depth):
        K.append(C_b + C_W * K[-1] / 2)
    f = four_point_vertex(s0)
    assert np.all(_z(f["K"], f["K_se"], K) < Z)

    gamma = 0.6
    s = simulate_residual_mlp(width=200, depth=depth, gamma=gamma, C_W=C_W, C_b=C_b, activation="relu", input_kernel=K1,
                              samples=20000, seed=15, record_block=True)
    f = four_point_vertex(s)
    K2 = C_b + C_W * K1 / 2 + gamma**2 * K1
    assert _z(f["K"][:2], f["K_se"][:2], [K1, K2]).max() < Z
    b = block_correlators(s)
    assert np.all(_z(b["G_Rz"], b["G_Rz_se"], 0.0) < Z)
    assert _z(b["G_RR"][0], b["G_RR_se"][0], C_b + C_W * K1 / 2) < Z


@pytest.mark.parametrize("method", ["reduced", "dense"])
def test_block_correlators_satisfy_b44_per_sample(method):
    """||z^(l+1)||^2 = gamma^2 ||z^(l)||^2 + 2 gamma R.z^(l) + ||R||^2 holds sample by sample (B.44 with xi = 1)."""
    gamma = -0.7
    s = simulate_residual_mlp(width=9, depth=4, gamma=gamma, C_W=1.3, C_b=0.2, activation="leaky_relu:0.1",
                              samples=300, seed=16, method=method, record_block=True)
    np.testing.assert_allclose(s.S2[:, 1:], gamma**2 * s.G_zz + 2 * gamma * s.G_Rz + s.G_RR, rtol=1e-12)
    np.testing.assert_allclose(s.G_zz, s.S2[:, :-1], rtol=0)
    n = 9
    np.testing.assert_allclose(s.P * n * (n - 1), (n * s.S2) ** 2 - n * s.S4, rtol=1e-10)


def test_residual_mlp_reduced_and_dense_agree():
    kw = dict(width=16, depth=4, gamma=0.5, C_W=1.5, C_b=0.1, activation="tanh", input_kernel=0.8, samples=20000,
              record_block=True)
    r = simulate_residual_mlp(method="reduced", seed=17, **kw)
    d = simulate_residual_mlp(method="dense", seed=18, **kw)
    fr, fd = four_point_vertex(r), four_point_vertex(d)
    assert np.all(_z(fr["K"], fr["K_se"], fd["K"], fd["K_se"]) < Z)
    assert np.all(_z(fr["V_over_nK2"], fr["V_over_nK2_se"], fd["V_over_nK2"], fd["V_over_nK2_se"]) < Z)
    lr, ld = log_norm_moments(r), log_norm_moments(d)
    assert np.all(_z(lr["var"], lr["var_se"], ld["var"], ld["var_se"]) < Z)
    br, bd = block_correlators(r), block_correlators(d)
    for key in ("G_RR", "G_Rz"):
        assert np.all(_z(br[key], br[key + "_se"], bd[key], bd[key + "_se"]) < Z)


def test_gaussian_first_layer_four_point_vertex_vanishes():
    """The input z^(0) (PDLT's z^(1)) iid N(0, K1): E[z_i^2 z_j^2] = K1^2 for i != j, so V = 0 there (the PDLT
    initial condition V^(1) = 0).  depth = 0 simulates the input alone."""
    s = simulate_residual_mlp(width=6, depth=0, gamma=0.3, C_W=1.0, input_kernel=2.5, samples=100000, seed=19)
    f = four_point_vertex(s)
    assert _z(f["V_over_nK2"][0], f["V_over_nK2_se"][0], 0.0) < Z
    assert _z(f["K"][0], f["K_se"][0], 2.5) < Z


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------

LNR = dict(width=8, depth=3, alpha=0.7, lam=0.7, samples=10, seed=0)
MLP = dict(width=8, depth=2, gamma=0.5, C_W=1.0, samples=10, seed=0)


@pytest.mark.parametrize("override, name", [
    ({"width": 1}, "width"), ({"width": 4.5}, "width"), ({"depth": 0}, "depth"), ({"samples": 1}, "samples"),
    ({"lam": -0.1}, "lam"), ({"alpha": float("nan")}, "alpha"), ({"alpha": [0.5, 0.5]}, "alpha"),
    ({"alpha": 0.0, "lam": 0.0}, "alpha, lam"), ({"alpha": [0.5, 0.0, 0.5], "lam": [1.0, 0.0, 1.0]}, "alpha, lam"),
    ({"method": "fast"}, "method"), ({"seed": -1}, "seed"), ({"chunk_size": 0}, "chunk_size"),
    ({"n_out": -1}, "n_out"), ({"balanced": "yes"}, "balanced"),
])
def test_log_gaussian_rejects_bad_inputs(override, name):
    with pytest.raises(ParameterError) as info:
        simulate_log_gaussian(**{**LNR, **override})
    assert info.value.parameter == name
    assert str(info.value).startswith(name + ":")


def test_zero_coefficients_message():
    with pytest.raises(ParameterError, match=r"alpha = lam = 0 makes the network identically zero; "
                                             r"need alpha\^2 \+ lam\^2 > 0"):
        simulate_log_gaussian(**{**LNR, "alpha": 0.0, "lam": 0.0})


@pytest.mark.parametrize("override, name", [
    ({"width": 1}, "width"), ({"depth": -1}, "depth"), ({"gamma": "x"}, "gamma"), ({"C_W": 0.0}, "C_W"),
    ({"C_b": -1.0}, "C_b"), ({"input_kernel": 0.0}, "input_kernel"), ({"activation": "softplus"}, "activation"),
    ({"activation": "leaky_relu:abc"}, "activation"), ({"activation": lambda x: x[:1]}, "activation"),
    ({"method": "sparse"}, "method"), ({"samples": 1}, "samples"),
])
def test_residual_mlp_rejects_bad_inputs(override, name):
    with pytest.raises(ParameterError) as info:
        simulate_residual_mlp(**{**MLP, **override})
    assert info.value.parameter == name


def test_unknown_activation_lists_allowed_names():
    with pytest.raises(ParameterError, match="relu.*tanh.*erf.*linear.*gelu.*leaky_relu"):
        simulate_residual_mlp(**{**MLP, "activation": "swish"})


def test_estimators_reject_missing_data():
    s = simulate_log_gaussian(**LNR)
    with pytest.raises(ParameterError) as info:
        output_moments(s)
    assert info.value.parameter == "n_out"
    with pytest.raises(ParameterError) as info:
        block_correlators(simulate_residual_mlp(**MLP))
    assert info.value.parameter == "record_block"
    with pytest.raises(ParameterError) as info:
        conjecture5(s, lags=(3,))
    assert info.value.parameter == "lags"
