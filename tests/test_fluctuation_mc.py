"""Explicit finite-width residual networks of resprop.kernel's architecture (numeric/engine/fluctuation_mc.py) and
the width extrapolation rule (numeric/engine/width_extrapolation.py).

References, none taken from the code under test:
* exact finite-width identities: at depth 1 E[K-hat] = K^(1) for every activation and width (the read-in rows are
  exactly N(0, K^(0)), identity 2.1 of docs/design/fluctuations-engine.md); for phi(x) = x at every depth (then
  E[G-hat] = E[K-hat] and the mean recursion is the NNGP's); E[K_law] = E[K_emp] always; at depth 0 K-hat is a
  Wishart matrix, n Cov[K-hat_ab, K-hat_cd] = K_ac K_bd + K_ad K_bc at every width;
* the ReLU arc-cosine kernel (Cho & Saul 2009) written out here for the plain MLP (gamma = 0);
* an independent explicit-weight path (method="dense") against the reduced one;
* Gaussian sampling theory for the jackknife standard error and synthetic series for the extrapolation.
Monte Carlo comparisons use fixed seeds and 4 standard errors (plus the allowance stated where one is needed).
"""
import math

import numpy as np
import pytest

import resprop
from resprop.numeric.engine import fluctuation_mc as F
from resprop.numeric.engine import width_extrapolation as W
from resprop.numeric.engine.mc_estimators import variance_se
from resprop.numeric.engine.validation import ParameterError

X2 = np.array([[1.0, 0.3, -0.2], [-0.4, 1.3, 0.5]])  # P = 2, d_in = 3, unequal norms, angle ~ 80 degrees
X3 = np.array([[1.0, 0.2, -0.3], [0.4, 1.5, 0.2], [-0.5, 0.3, 2.0]])
UPPER2 = np.triu_indices(2)


def _mean_se(a):
    return a.mean(axis=0), a.std(axis=0, ddof=1) / math.sqrt(a.shape[0])


def _within(mean, se, ref, k=4.0, allowance=0.0):
    dev = np.abs(np.asarray(mean) - np.asarray(ref))
    return bool(np.all(dev <= k * np.asarray(se) + allowance)), (dev / np.asarray(se)).max()


# ------------------------------------------------------------------------------------------- the simulator
def test_dense_and_reduced_paths_agree_in_distribution():
    """Explicit W, b against the reduced G R sampler: gamma = 0.6, bias, a non-odd activation, width 32, P = 2;
    means and variances of every K-hat entry and the means of K_law within 4 SE of their difference."""
    kw = dict(X=X2, activation="gelu", depth=2, width=32, sigma_w2=1.4, sigma_b2=0.1, gamma=0.6, branch_scale=0.9)
    red = F.simulate_finite_width(**kw, samples=3000, seed=1, method="reduced")
    den = F.simulate_finite_width(**kw, samples=3000, seed=2, method="dense")
    for key in ("K_emp", "K_law"):
        (m1, s1), (m2, s2) = _mean_se(red[key][:, UPPER2[0], UPPER2[1]]), _mean_se(den[key][:, UPPER2[0], UPPER2[1]])
        ok, z = _within(m1 - m2, np.hypot(s1, s2), 0.0)
        assert ok, (key, z)
    (v1, e1), (v2, e2) = variance_se(red.K_emp[:, UPPER2[0], UPPER2[1]]), variance_se(den.K_emp[:, UPPER2[0], UPPER2[1]])
    ok, z = _within(v1 - v2, np.hypot(e1, e2), 0.0)
    assert ok, z


def test_a_wrong_reduction_would_be_caught():
    """The comparison above can fail: dropping the bias from the dense path moves the means by many SE."""
    kw = dict(X=X2, activation="gelu", depth=2, width=32, sigma_w2=1.4, gamma=0.6, branch_scale=0.9)
    red = F.simulate_finite_width(**kw, sigma_b2=0.1, samples=3000, seed=1)
    den = F.simulate_finite_width(**kw, sigma_b2=0.0, samples=3000, seed=2, method="dense")
    (m1, s1), (m2, s2) = _mean_se(red.K_emp[:, UPPER2[0], UPPER2[1]]), _mean_se(den.K_emp[:, UPPER2[0], UPPER2[1]])
    assert not _within(m1 - m2, np.hypot(s1, s2), 0.0)[0]


@pytest.mark.parametrize("activation", ["erf", "relu", "gelu", "tanh", "sin(x) + x**2/10", "abs(x)"])
def test_depth_one_mean_is_the_nngp_at_any_width(activation):
    """Depth 1: E[K-hat^(1)] = gamma^2 K^(0) + lambda^2 (sigma_w2 G(K^(0)) + sigma_b2) exactly (Gaussian read-in),
    so the mean at width 16 must match resprop.kernel with no allowance."""
    args = (X2, activation, 1)
    params = dict(sigma_w2=1.3, sigma_b2=0.2, gamma=-0.7, branch_scale=0.8)
    K = resprop.kernel(*args, **params)
    sim = F.simulate_finite_width(*args[:2], 1, 16, **params, samples=4000, seed=3)
    for key in ("K_emp", "K_law"):
        m, s = _mean_se(sim[key])
        ok, z = _within(m[UPPER2], s[UPPER2], K[UPPER2])
        assert ok, (activation, key, z)


def test_linear_network_mean_is_exact_with_branch_scale_array_and_expression():
    """phi(x) = x: E[K-hat^(l)] = (gamma^2 + lambda_l^2 sigma_w2) E[K-hat^(l-1)] + lambda_l^2 sigma_b2 J exactly at
    every width; with a bias the order of the lambda_l matters, so a misplaced lambda_l is caught."""
    params = dict(sigma_w2=1.1, sigma_b2=0.3, gamma=-0.8)
    lam = np.array([0.3, 1.2, 0.6])
    for scale in (lam, "l/L"):
        K = resprop.kernel(X2, "linear", 3, branch_scale=scale, **params)
        sim = F.simulate_finite_width(X2, "linear", 3, 8, branch_scale=scale, **params, samples=6000, seed=4)
        for key in ("K_emp", "K_law"):
            m, s = _mean_se(sim[key])
            ok, z = _within(m[UPPER2], s[UPPER2], K[UPPER2])
            assert ok, (scale, key, z)
    # reversed lambdas give another mean (the test above can fail)
    K_rev = resprop.kernel(X2, "linear", 3, branch_scale=lam[::-1], **params)
    sim = F.simulate_finite_width(X2, "linear", 3, 8, branch_scale=lam, **params, samples=6000, seed=4)
    m, s = _mean_se(sim.K_law)
    assert not _within(m[UPPER2], s[UPPER2], K_rev[UPPER2])[0]


def test_branch_scale_expression_is_the_array_of_its_values():
    """"l/L" at depth 3 is lambda = (1/3, 2/3, 1): the same draws give the same kernels."""
    kw = dict(X=X2, activation="tanh", depth=3, width=24, sigma_w2=1.2, sigma_b2=0.1, gamma=0.9, samples=50, seed=8)
    a = F.simulate_finite_width(**kw, branch_scale="l/L")
    b = F.simulate_finite_width(**kw, branch_scale=np.array([1.0, 2.0, 3.0]) / 3.0)
    np.testing.assert_allclose(a.K_emp, b.K_emp, rtol=1e-13)


@pytest.mark.parametrize("activation", ["erf", "gelu"])
def test_mean_approaches_the_nngp_at_large_width(activation):
    """Depth 3, gamma = 1: E[K-hat_n] = K + m/n + c/n^2 + ...  The Richardson combination 2 E_128 - E_64 cancels m/n
    and leaves -c/(2 n^2) at n = 64.  Allowance: |c| <= 16 max_a K_aa, i.e. 16 max K_aa / (2 * 64^2) ~ 0.002 max K_aa
    (a pilot run at n = 16 ... 256 shows n (E_n - K) changing by < 0.7 per doubling, |c| <~ 20 < 16 max K_aa here).
    A wrong layer recursion misses by O(1) x K; the raw width-64 mean itself is not required to match."""
    params = dict(sigma_w2=1.5, sigma_b2=0.1, gamma=1.0, branch_scale=1.0)
    K = resprop.kernel(X2, activation, 3, **params)
    allowance = 16 * np.max(np.diagonal(K)) / (2 * 64**2)
    small = F.simulate_finite_width(X2, activation, 3, 64, **params, samples=8000, seed=64)
    large = F.simulate_finite_width(X2, activation, 3, 128, **params, samples=4000, seed=128)
    for key in ("K_emp", "K_law"):
        (m1, s1), (m2, s2) = _mean_se(small[key]), _mean_se(large[key])
        rich, se = 2 * m2 - m1, np.hypot(2 * s2, s1)
        ok, z = _within(rich[UPPER2], se[UPPER2], K[UPPER2], allowance=allowance)
        assert ok, (activation, key, z)
    # and the limit is resprop.kernel's, not a neighbouring kernel's: 5% more sigma_w2 is rejected
    K_off = resprop.kernel(X2, activation, 3, **{**params, "sigma_w2": 1.575})
    assert not _within(rich[UPPER2], se[UPPER2], K_off[UPPER2], allowance=allowance)[0]


def test_law_kernel_mean_equals_empirical_mean():
    """E[K_law] = E[K_emp] exactly (paired difference within 4 SE), ReLU with bias, gamma < 0, small width."""
    sim = F.simulate_finite_width(X3, "relu", 3, 12, 1.6, 0.2, gamma=-0.8, branch_scale=[0.7, 1.1, 0.9],
                                  samples=5000, seed=5)
    m, s = _mean_se(sim.K_emp - sim.K_law)
    ok, z = _within(m, s + 1e-300, 0.0)
    assert ok, z
    assert np.all(s > 0)


def _relu_arccos(K):
    """E[relu(u) relu(v)], (u, v) ~ N(0, K) (Cho & Saul): sqrt(K_aa K_bb) (sin t + (pi - t) cos t) / (2 pi)."""
    d = np.sqrt(np.diagonal(K))
    c = np.clip(K / np.outer(d, d), -1.0, 1.0)
    t = np.arccos(c)
    return np.outer(d, d) * (np.sin(t) + (np.pi - t) * c) / (2 * np.pi)


def test_gamma_zero_is_the_plain_mlp():
    """gamma = 0: h^(1) = W phi(h^(0)) + b, so E[K-hat^(1)] = sigma_w2 E[relu relu](K^(0)) + sigma_b2 (arc-cosine
    kernel); and K_law = sigma_w2 Phi^T Phi / n + sigma_b2 of the last hidden layer only (no skip term)."""
    sw, sb = 2.0, 0.1
    K0 = sw * X3 @ X3.T / 3 + sb
    ref = sw * _relu_arccos(K0) + sb
    sim = F.simulate_finite_width(X3, "relu", 1, 16, sw, sb, gamma=0.0, samples=4000, seed=6)
    m, s = _mean_se(sim.K_emp)
    ok, z = _within(m, s, ref)
    assert ok, z
    np.testing.assert_allclose(resprop.kernel(X3, "relu", 1, sw, sb, gamma=0.0), ref, rtol=1e-12)
    # two layers: E[K_law^(2)] = E[sigma_w2 G-hat^(1) + sigma_b2] does not contain K^(0) (checked via a large skip)
    a = F.simulate_finite_width(X3, "relu", 2, 16, sw, sb, gamma=0.0, samples=200, seed=7)
    assert a.K_law.min() > sb - 1e-12 and np.all(np.diagonal(a.K_law, axis1=1, axis2=2) > sb)


def test_results_do_not_depend_on_chunk_size():
    """Per-sample seed streams: bit-identical kernels for chunk sizes 1, 7 and automatic, on both paths, and the
    first samples of a longer run are a shorter run."""
    for method in ("reduced", "dense"):
        kw = dict(X=X3, activation="tanh", depth=3, width=20, sigma_w2=1.3, sigma_b2=0.1, gamma=0.7,
                  branch_scale="1/sqrt(L)", samples=23, seed=9, method=method)
        runs = [F.simulate_finite_width(**kw, chunk_size=c) for c in (1, 7, None)]
        for r in runs[1:]:
            assert np.array_equal(r.K_emp, runs[0].K_emp) and np.array_equal(r.K_law, runs[0].K_law)
        short = F.simulate_finite_width(**{**kw, "samples": 10}, chunk_size=4)
        assert np.array_equal(short.K_emp, runs[0].K_emp[:10])
    other = F.simulate_finite_width(**{**kw, "seed": 10})
    assert not np.array_equal(other.K_emp, runs[0].K_emp)


def test_record_fields():
    sim = F.simulate_finite_width(X2, "erf", 2, 8, 1.0, 0.0, samples=5, seed=0)
    assert sim.samples == 5 and sim.width == 8 and sim.depth == 2 and sim.method == "reduced"
    assert sim.K_emp.shape == sim.K_law.shape == (5, 2, 2)
    np.testing.assert_allclose(sim.input_kernel, X2 @ X2.T / 3, rtol=1e-14)
    assert set(sim.to_dict()) == {"width", "depth", "method", "input_kernel", "K_emp", "K_law"}


# ------------------------------------------------------------------------------------------- validation
GOOD = dict(X=X2, activation="erf", depth=2, width=8, sigma_w2=1.0, sigma_b2=0.1, gamma=1.0, branch_scale=1.0,
            samples=4, seed=0)


@pytest.mark.parametrize("name, value", [
    ("X", [[np.nan, 1.0]]), ("X", [1.0, 2.0]), ("X", [[0.0, 0.0]]),
    ("activation", "nope(x)"), ("activation", "y + x"), ("activation", 3.0),
    ("depth", -1), ("depth", 2.5), ("depth", True), ("depth", 10**30),
    ("width", 0), ("width", "8"),
    ("sigma_w2", 0.0), ("sigma_w2", math.nan), ("sigma_w2", -1.0), ("sigma_b2", -5e-324), ("sigma_b2", math.inf),
    ("gamma", math.inf), ("gamma", "a"), ("gamma", [1.0, 2.0]),
    ("branch_scale", [1.0, 2.0, 3.0]), ("branch_scale", "1/(l - 1)"), ("branch_scale", "q"),
    ("samples", 0), ("samples", 10**30), ("seed", -1), ("seed", 1.5),
    ("method", "qr"), ("chunk_size", 0),
])
def test_bad_input_is_a_parameter_error_naming_it(name, value):
    kwargs = {**GOOD, name: value}
    if name == "X" and np.ndim(value) == 2 and np.all(np.asarray(value) == 0):
        kwargs["sigma_b2"] = 0.0  # a zero input without bias has K^(0)_aa = 0
    with pytest.raises(ParameterError, match=name):
        F.simulate_finite_width(**kwargs)


def test_dense_path_refuses_huge_width_and_overflow_names_the_inputs():
    with pytest.raises(ParameterError, match="width"):
        F.simulate_finite_width(**{**GOOD, "width": F.DENSE_MAX_WIDTH + 1, "method": "dense"})
    with pytest.raises(ParameterError, match="sigma_w2"):
        F.simulate_finite_width(**{**GOOD, "activation": "relu", "sigma_w2": 1e200, "depth": 3})


@pytest.mark.parametrize("name, kwargs", [
    ("widths", dict(widths=(16, 16, 32))), ("widths", dict(widths=(16, 32))), ("widths", dict(widths=(0, 16, 32))),
    ("samples", dict(samples=39)), ("samples", dict(samples=[100, 100])),
    ("quadruples", dict(quadruples=[[0, 1, 0, 2]])), ("quadruples", dict(quadruples=[[0, 1, 0]])),
    ("quadruples", dict(quadruples=[[0.5, 1, 0, 1]])), ("seed", dict(seed=-2)),
])
def test_campaign_validation_names_the_parameter(name, kwargs):
    base = dict(widths=(16, 32, 64), samples=100, seed=0)
    with pytest.raises(ParameterError, match=name):
        F.fluctuation_campaign(X2, "erf", 1, 1.0, 0.1, **{**base, **kwargs})


# ------------------------------------------------------------------------------------------- estimators
def test_jackknife_standard_error_of_a_covariance_is_honest():
    """Bivariate Gaussian per-sample entries with known covariance: R = n Cov and its 40-block jackknife SE
    against the exact SE n sqrt((s_x^2 s_y^2 + s_xy^2) / S) (within 15%: the SE of a 40-block SE is ~11%)."""
    rng = np.random.default_rng(11)
    S, n = 20000, 50
    C = np.array([[2.0, 0.8], [0.8, 1.0]])
    xy = rng.multivariate_normal([3.0, 1.0], C, size=S)
    K = np.empty((S, 2, 2))
    K[:, 0, 0], K[:, 1, 1] = xy[:, 0], xy[:, 1]
    K[:, 0, 1] = K[:, 1, 0] = 0.5 * (xy[:, 0] + xy[:, 1])
    sim = F.FiniteWidthKernels(width=n, depth=1, method="reduced", input_kernel=np.eye(2), K_emp=K, K_law=K)
    st = F.width_statistics(sim, np.zeros((2, 2)), [[0, 0, 1, 1], [0, 0, 0, 0]])
    exact_se = n * np.sqrt(np.array([C[0, 0] * C[1, 1] + C[0, 1] ** 2, 2 * C[0, 0] ** 2]) / S)
    assert np.all(np.abs(st.R_se / exact_se - 1) < 0.15), st.R_se / exact_se
    assert np.all(np.abs(st.R - n * np.array([C[0, 1], C[0, 0]])) < 4 * exact_se)
    np.testing.assert_allclose(st.mean_shift, n * K.mean(axis=0), rtol=1e-12)


def test_campaign_recovers_the_wishart_covariance_at_depth_zero():
    """Depth 0: K-hat = h^T h / n with rows iid N(0, K^(0)), so n Cov[K-hat_ab, K-hat_cd] = K_ac K_bd + K_ad K_bc at
    every width: each R_n and the extrapolated R_inf within 4 SE (+ the stated systematic)."""
    q = np.array([[0, 1, 0, 1], [0, 0, 1, 1], [0, 1, 1, 2], [2, 2, 2, 2], [0, 1, 1, 0]])
    camp = F.fluctuation_campaign(X3, "erf", 0, 1.3, 0.2, widths=(8, 16, 32, 64), samples=3000, seed=12,
                                  quadruples=q)
    K = 1.3 * X3 @ X3.T / 3 + 0.2
    exact = K[q[:, 0], q[:, 2]] * K[q[:, 1], q[:, 3]] + K[q[:, 0], q[:, 3]] * K[q[:, 1], q[:, 2]]
    for n, R, se in zip(camp.widths, camp.R_n, camp.R_n_se):
        ok, z = _within(R, se, exact)
        assert ok, (n, z)
    for e, ref in zip(camp.covariance, exact):
        assert abs(e.value - ref) <= 4 * e.se + (e.systematic or 0.0), (e, ref)
    assert camp.covariance[0].value == pytest.approx(camp.covariance[4].value, rel=1e-12)  # (ab,ab) = (ab,ba)
    assert all(m is None for m in camp.mean_shift)  # K_law = K^(0): no mean shift to estimate
    assert camp.to_dict()["widths"] == [8, 16, 32, 64]


def test_campaign_extrapolates_the_exact_linear_layer():
    """One linear layer, gamma = 0, no bias, P = 1: K-hat^(1) = sigma_w2 K^(0) A B with A, B iid chi^2_n / n, so
    R_n = n Var K-hat^(1) = (sigma_w2 K^(0))^2 (4 + 4/n) exactly and E[K-hat^(1)] = sigma_w2 K^(0) (no mean shift):
    the extrapolated R_inf must be 4 (sigma_w2 K^(0))^2 and the mean shift 0, within 4 SE (+ systematic)."""
    X = np.array([[1.0, 0.5]])
    sw = 1.2
    c = sw * sw * 1.25 / 2
    camp = F.fluctuation_campaign(X, "linear", 1, sw, 0.0, gamma=0.0, widths=(8, 16, 32, 64), samples=4000, seed=21)
    (R,), (m,) = camp.covariance, camp.mean_shift
    assert abs(R.value - 4 * c * c) <= 4 * R.se + (R.systematic or 0.0), R
    assert R.se < 0.2 * c * c  # informative: a 25% error in R_inf would be > 4 SE
    assert abs(m.value) <= 4 * m.se + (m.systematic or 0.0), m
    for n, R_n, se in zip(camp.widths, camp.R_n[:, 0], camp.R_n_se[:, 0]):
        ok, z = _within(R_n, se, c * c * (4 + 4 / n))
        assert ok, (n, z)


def test_campaign_mean_shift_and_covariance_symmetry_at_depth_two():
    """Depth 2, ReLU with bias: the mean shift per pair and the symmetries Cov(ab, cd) = Cov(ba, dc) =
    Cov(cd, ab) of the estimates; independent seeds per width (different widths never share draws)."""
    q = [[0, 1, 0, 2], [1, 0, 2, 0], [0, 2, 0, 1]]
    camp = F.fluctuation_campaign(X3, "relu", 2, 1.5, 0.1, gamma=0.9, widths=(16, 32, 64), samples=400, seed=3,
                                  quadruples=q)
    np.testing.assert_allclose(camp.R_inf[0], camp.R_inf[1], rtol=1e-12)
    np.testing.assert_allclose(camp.R_inf[0], camp.R_inf[2], rtol=1e-12)
    assert len(camp.mean_shift) == 6 and all(e is not None and e.se > 0 for e in camp.mean_shift)
    assert camp.R_n.shape == (3, 3) and camp.mean_shift_n.shape == (3, 3, 3)
    for (a, b), e in zip(camp.mean_shift_pairs, camp.mean_shift):
        assert e.values == tuple(camp.mean_shift_n[:, a, b]) and e.se_n == tuple(camp.mean_shift_n_se[:, a, b])
    # E[K_law] = E[K_emp]: the mean shift measured on K_law agrees with the one of the raw K-hat means
    ok, z = _within(camp.mean_shift_n, np.hypot(camp.mean_shift_n_se, np.array(camp.widths)[:, None, None]
                                                * camp.mean_K_emp_n_se),
                    np.array(camp.widths)[:, None, None] * (camp.mean_K_emp_n - camp.nngp))
    assert ok, z
    K = resprop.kernel(X3, "relu", 2, 1.5, 0.1, gamma=0.9)
    np.testing.assert_allclose(camp.nngp, K, rtol=1e-14)


# ------------------------------------------------------------------------------------------- extrapolation
WIDTHS = np.array([64, 128, 256, 512, 1024])


def test_extrapolation_recovers_a_known_limit_and_its_standard_error_is_honest():
    """R_n = 3 + 5/n + N(0, 0.05^2): R_inf within 4 SE every time, and |R_inf - 3| < 2 SE in ~95% of 400 series."""
    rng = np.random.default_rng(13)
    se = np.full(WIDTHS.size, 0.05)
    hits, models = 0, set()
    for _ in range(400):
        e = W.extrapolate(WIDTHS, 3.0 + 5.0 / WIDTHS + se * rng.standard_normal(WIDTHS.size), se)
        assert abs(e.value - 3.0) < 4 * e.se + (e.systematic or 0.0)
        hits += abs(e.value - 3.0) < 2 * e.se
        models.add(e.model)
    assert 0.90 < hits / 400 < 0.99, hits
    assert "a/n" in models
    clean = W.extrapolate(WIDTHS, 3.0 + 5.0 / WIDTHS, se)
    assert clean.model == "a/n" and clean.value == pytest.approx(3.0, abs=1e-12)
    assert clean.coefficients[0] == pytest.approx(5.0, rel=1e-9) and clean.systematic == pytest.approx(0.0, abs=1e-9)


def test_extrapolation_switches_to_the_quadratic_model_on_a_strong_one_over_n_squared_term():
    rng = np.random.default_rng(14)
    se = np.full(WIDTHS.size, 0.01)
    values = 3.0 + 5.0 / WIDTHS + 4000.0 / WIDTHS**2 + se * rng.standard_normal(WIDTHS.size)
    e = W.extrapolate(WIDTHS, values, se)
    assert e.model == "a/n + b/n^2" and e.p_value_linear < W.CHI2_P_MIN
    assert abs(e.value - 3.0) < 4 * e.se, e
    assert abs(e.value_linear - 3.0) > 4 * e.se  # the rejected model misses by more than the chosen one's error
    assert e.systematic is None  # the linear model is not acceptable: no two-model systematic


def test_fit_ratio_moved_to_the_engine_keeps_its_old_import():
    from resprop.numeric.theories.pdlt import finite_width_mc as old

    assert old.fit_ratio is W.fit_ratio and old.CHI2_P_MIN == W.CHI2_P_MIN
    se = np.full(WIDTHS.size, 0.05)
    R_inf, s, model, coef, chi2, dof, p, chi2_1 = old.fit_ratio(WIDTHS, 3.0 + 5.0 / WIDTHS, se)
    assert model == "a/n" and R_inf == pytest.approx(3.0, abs=1e-12) and dof == 3


@pytest.mark.parametrize("kwargs, name", [
    (dict(widths=[64, 128], values=[1.0, 2.0], se=[1.0, 1.0]), "widths"),
    (dict(widths=[64, 64, 128], values=[1.0, 2.0, 3.0], se=[1.0, 1.0, 1.0]), "widths"),
    (dict(widths=[64, 128, 256], values=[1.0, 2.0], se=[1.0, 1.0, 1.0]), "values"),
    (dict(widths=[64, 128, 256], values=[1.0, 2.0, 3.0], se=[1.0, 0.0, 1.0]), "se"),
    (dict(widths=[64, 128, 256], values=[1.0, math.nan, 3.0], se=[1.0, 1.0, 1.0]), "values"),
])
def test_extrapolation_validation(kwargs, name):
    with pytest.raises(ParameterError, match=name):
        W.extrapolate(**kwargs)
