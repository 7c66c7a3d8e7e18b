"""Tests of the finite-width simulator resprop.numeric.engine.simulate (no NNGP/response theory here).

Statistical checks use fixed seeds and 4-standard-error tolerances.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from resprop.numeric.engine.simulate import (
    finite_difference_response,
    finite_difference_response_offdiag,
    kernel_summary,
    mean_and_se,
    simulate_kernels,
)

NET = dict(rho=1.0, sigma_w2=1.2, sigma_b2=0.2)


def _inputs(P: int, d_in: int, seed: int) -> np.ndarray:
    """P random inputs with ||x||^2 = d_in."""
    X = np.random.default_rng(seed).standard_normal((P, d_in))
    return X * np.sqrt(d_in) / np.linalg.norm(X, axis=1, keepdims=True)


def _var_and_se(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sample variance along axis 0 and its standard error sqrt((m4 - var^2)/n)."""
    n = a.shape[0]
    centred = a - a.mean(axis=0)
    var = (centred**2).sum(axis=0) / (n - 1)
    m4 = (centred**4).mean(axis=0)
    return var, np.sqrt(np.maximum(m4 - var**2, 0.0) / n)


def _linear_kernel_recursion(K0: float, depth: int, rho: float, s_w2: float, s_b2: float) -> np.ndarray:
    """E[C^(l)] for phi(x) = x: C^(l) = rho^2 (s_w2 K^(l-1) + s_b2), K^(l) = K^(l-1) + C^(l), exact at any N."""
    C, K = [K0], K0
    for _ in range(depth):
        C.append(rho**2 * (s_w2 * K + s_b2))
        K += C[-1]
    return np.array(C)


@pytest.fixture(scope="module")
def reduced_and_dense():
    X = _inputs(2, 10, seed=11)
    kw = dict(depth=5, width=64, activation="erf", samples=4000, **NET)
    return (
        simulate_kernels(X, method="reduced", seed=123, **kw),
        simulate_kernels(X, method="dense", seed=456, **kw),
    )


@pytest.mark.parametrize("key", ["C", "C_emp", "K_emp"])
def test_reduced_and_dense_means_agree(reduced_and_dense, key):
    reduced, dense = reduced_and_dense
    m_r, se_r = mean_and_se(reduced[key])
    m_d, se_d = mean_and_se(dense[key])
    assert m_r.shape == (6, 2, 2)
    assert np.all(np.abs(m_r - m_d) <= 4 * np.hypot(se_r, se_d) + 1e-12)


@pytest.mark.parametrize("key", ["C", "C_emp", "K_emp"])
def test_reduced_and_dense_variances_agree(reduced_and_dense, key):
    reduced, dense = reduced_and_dense
    v_r, se_r = _var_and_se(reduced[key])
    v_d, se_d = _var_and_se(dense[key])
    assert np.all(np.abs(v_r - v_d) <= 4 * np.hypot(se_r, se_d) + 1e-12)


def test_reduced_and_dense_output_kernel_agree(reduced_and_dense):
    reduced, dense = reduced_and_dense
    m_r, se_r = mean_and_se(reduced["K_out"])
    m_d, se_d = mean_and_se(dense["K_out"])
    assert np.all(np.abs(m_r - m_d) <= 4 * np.hypot(se_r, se_d))


@pytest.mark.parametrize("method", ["reduced", "dense"])
def test_shapes_and_exact_identities(method):
    X = _inputs(3, 7, seed=2)
    out = simulate_kernels(X, depth=4, width=16, samples=10, seed=0, method=method, chunk_size=3, **NET)
    arrays = ("C", "C_emp", "K", "K_emp", "K_out")
    assert out.fields() == ("width", "depth") + arrays and (out.width, out.depth, out.samples) == (16, 4, 10)
    assert {k: getattr(out, k).shape for k in arrays} == {
        "C": (10, 5, 3, 3), "C_emp": (10, 5, 3, 3), "K": (10, 5, 3, 3),
        "K_emp": (10, 5, 3, 3), "K_out": (10, 3, 3),
    }
    C0 = 1.2 / 7 * X @ X.T + 0.2
    np.testing.assert_allclose(out["C"][:, 0], np.broadcast_to(C0, (10, 3, 3)), rtol=1e-14)
    np.testing.assert_allclose(out["K"], np.cumsum(out["C"], axis=1), rtol=1e-14)
    np.testing.assert_allclose(out["C_emp"][:, 0], out["K_emp"][:, 0], rtol=1e-14)
    for key in arrays:
        np.testing.assert_allclose(out[key], out[key].swapaxes(-1, -2), rtol=1e-14)


@pytest.mark.parametrize("method", ["reduced", "dense"])
def test_rho_zero_is_readin_only(method):
    X = _inputs(2, 5, seed=3)
    out = simulate_kernels(X, depth=3, width=20, rho=0.0, sigma_w2=1.2, sigma_b2=0.2,
                           samples=50, seed=1, method=method)
    C0 = 1.2 / 5 * X @ X.T + 0.2
    assert np.all(out["C"][:, 1:] == 0.0)
    assert np.all(out["C_emp"][:, 1:] == 0.0)
    assert np.all(out["K"] == np.broadcast_to(C0, out["K"].shape))
    np.testing.assert_array_equal(out["K_emp"][:, 1:], np.repeat(out["K_emp"][:, :1], 3, axis=1))


@pytest.mark.parametrize("rho", [1.0, 0.4])
def test_linear_activation_mean_kernel_is_exact(rho):
    d_in, depth, s_w2, s_b2 = 20, 4, 1.2, 0.2
    x = _inputs(1, d_in, seed=4)
    out = simulate_kernels(x, depth=depth, width=30, rho=rho, sigma_w2=s_w2, sigma_b2=s_b2,
                           activation="linear", samples=20000, seed=5)
    expected = _linear_kernel_recursion(1.2 + 0.2, depth, rho, s_w2, s_b2)
    mean, se = mean_and_se(out["C"][:, :, 0, 0])
    assert abs(mean[1] - rho**2 * (s_w2 * 1.4 + s_b2)) <= 4 * se[1]
    assert np.all(np.abs(mean - expected) <= 4 * se + 1e-12)
    mean_emp, se_emp = mean_and_se(out["K_emp"][:, :, 0, 0])
    assert np.all(np.abs(mean_emp - np.cumsum(expected)) <= 4 * se_emp)


@pytest.mark.parametrize("activation", ["tanh", "relu", "gelu", np.sin])
def test_empirical_residual_covariance_is_unbiased_for_conditional_kernel(activation):
    """E[f_l^T f_l / N | h_{l-1}] = C^(l), so both sample means agree for any activation."""
    X = _inputs(2, 6, seed=6)
    out = simulate_kernels(X, depth=3, width=40, activation=activation, samples=4000, seed=7, **NET)
    diff = out["C_emp"][:, 1:] - out["C"][:, 1:]
    mean, se = mean_and_se(diff)
    assert np.all(np.abs(mean) <= 4 * se)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(width=0), "width"),
        (dict(width=2.5), "width"),
        (dict(depth=0), "depth"),
        (dict(samples=0), "samples"),
        (dict(sigma_w2=-1.0), "sigma_w2"),
        (dict(sigma_b2=float("nan")), "sigma_b2"),
        (dict(sigma_w2_in=-0.1), "sigma_w2_in"),
        (dict(sigma_b2_out=-0.1), "sigma_b2_out"),
        (dict(rho=float("inf")), "rho"),
        (dict(activation="softsign"), "activation"),
        (dict(activation=3), "activation"),
        (dict(method="exact"), "method"),
        (dict(seed=-1), "seed"),
        (dict(chunk_size=0), "chunk_size"),
    ],
)
def test_invalid_arguments_name_the_parameter(kwargs, name):
    args = dict(depth=2, width=4, samples=3, **NET) | kwargs
    with pytest.raises(ValueError, match=rf"^{name}:"):
        simulate_kernels(np.ones((1, 3)), **args)


@pytest.mark.parametrize("X", [np.array([[1.0, np.nan]]), np.ones(3), np.ones((0, 3))])
def test_invalid_inputs_name_X(X):
    with pytest.raises(ValueError, match=r"^X:"):
        simulate_kernels(X, depth=2, width=4, samples=3, **NET)


def test_width_error_message_states_range():
    with pytest.raises(ValueError, match=r"^width: must be an integer >= 1, got 0$"):
        simulate_kernels(np.ones((1, 3)), depth=2, width=0, **NET)


@pytest.mark.parametrize("delta", [0.0, -1e-3, 1.2, float("nan")])
def test_finite_difference_rejects_bad_delta(delta):
    # K0 - sigma_b2_in = 1.2 for ||x||^2 = d_in
    with pytest.raises(ValueError, match=r"^delta:"):
        finite_difference_response(np.ones(4), delta=delta, depth=2, width=4, samples=3, **NET)


def test_offdiag_rejects_collinear_inputs():
    with pytest.raises(ValueError, match=r"^x2:"):
        finite_difference_response_offdiag(np.ones(4), 2 * np.ones(4), delta=1e-3, depth=2, width=4,
                                           samples=3, **NET)


@pytest.mark.parametrize("method", ["reduced", "dense"])
def test_finite_difference_response_is_normalised_and_deterministic(method):
    x = _inputs(1, 10, seed=8)[0]
    kw = dict(delta=1e-3, depth=4, width=32, samples=50, method=method, **NET)
    eta = finite_difference_response(x, seed=9, **kw)
    assert eta.shape == (50, 5)
    np.testing.assert_allclose(eta[:, 0], 1.0, rtol=1e-10)
    np.testing.assert_array_equal(eta, finite_difference_response(x, seed=9, **kw))
    assert not np.array_equal(eta, finite_difference_response(x, seed=10, **kw))


@pytest.mark.parametrize("method", ["reduced", "dense"])
def test_offdiag_response_is_normalised_and_deterministic(method):
    x1, x2 = _inputs(2, 10, seed=12)
    kw = dict(delta=1e-3, depth=4, width=32, samples=50, method=method, **NET)
    eta = finite_difference_response_offdiag(x1, x2, seed=9, **kw)
    assert eta.shape == (50, 5)
    np.testing.assert_allclose(eta[:, 0], 1.0, rtol=1e-9)
    np.testing.assert_array_equal(eta, finite_difference_response_offdiag(x1, x2, seed=9, **kw))


def test_linear_activation_response_is_exact():
    """phi(x) = x: E[C^(l)] is affine in K^(0), so E[eta^(l)] = rho^2 s_w2 (1 + rho^2 s_w2)^(l-1) exactly."""
    rho, s_w2, depth = 0.7, 1.2, 4
    x1, x2 = _inputs(2, 12, seed=13)
    kw = dict(delta=1e-2, depth=depth, width=25, rho=rho, sigma_w2=s_w2, sigma_b2=0.2,
              activation="linear", samples=4000, seed=14)
    expected = np.array([1.0] + [rho**2 * s_w2 * (1 + rho**2 * s_w2) ** (l - 1) for l in range(1, depth + 1)])
    for eta in (finite_difference_response(x1, **kw), finite_difference_response_offdiag(x1, x2, **kw)):
        mean, se = mean_and_se(eta)
        assert np.all(np.abs(mean - expected) <= 4 * se + 1e-9)


def test_reduced_and_dense_responses_agree():
    x = _inputs(1, 10, seed=15)[0]
    kw = dict(delta=1e-3, depth=3, width=32, samples=3000, **NET)
    m_r, se_r = mean_and_se(finite_difference_response(x, method="reduced", seed=16, **kw))
    m_d, se_d = mean_and_se(finite_difference_response(x, method="dense", seed=17, **kw))
    assert np.all(np.abs(m_r - m_d) <= 4 * np.hypot(se_r, se_d) + 1e-9)


def test_results_do_not_depend_on_generator_reuse():
    X = _inputs(2, 5, seed=18)
    kw = dict(depth=2, width=8, samples=20, **NET)
    a = simulate_kernels(X, seed=np.random.default_rng(3), **kw)
    b = simulate_kernels(X, seed=3, **kw)
    for key in a.fields():
        np.testing.assert_array_equal(a[key], b[key])


def test_mean_and_se_and_summary():
    """Exact references: 0..9 has mean 9/2 and sum of squared deviations 165/2, so its SE is
    sqrt(165/2 / 9 / 10) = sqrt(11/12); the summary is checked entry by entry against Python's
    ``statistics`` module (an implementation independent of numpy)."""
    import statistics

    a = np.arange(10.0)
    mean, se = mean_and_se(a)
    assert mean == 4.5
    assert se == pytest.approx(math.sqrt(11 / 12), rel=1e-14)
    m2, se2 = mean_and_se(np.array([[1.0, 2.0], [3.0, 6.0]]))  # columns: deviations +-1 and +-2
    np.testing.assert_allclose(m2, [2.0, 4.0], rtol=1e-15)
    np.testing.assert_allclose(se2, [1.0, 2.0], rtol=1e-14)
    m_ax1, se_ax1 = mean_and_se(np.array([[1.0, 3.0], [2.0, 6.0]]), axis=1)
    np.testing.assert_allclose(m_ax1, [2.0, 4.0], rtol=1e-15)
    np.testing.assert_allclose(se_ax1, [1.0, 2.0], rtol=1e-14)
    out = simulate_kernels(_inputs(2, 4, seed=0), depth=2, width=8, samples=5, seed=0, **NET)
    summary = kernel_summary(out)
    assert summary["C"]["mean"].shape == (3, 2, 2)
    assert summary["K_out"]["se"].shape == (2, 2)
    for key in ("C", "C_emp", "K", "K_emp", "K_out"):
        samples = out[key]
        for idx in np.ndindex(samples.shape[1:]):
            column = [float(v) for v in samples[(slice(None),) + idx]]
            assert summary[key]["mean"][idx] == pytest.approx(statistics.fmean(column), rel=1e-13, abs=1e-15)
            assert summary[key]["se"][idx] == pytest.approx(statistics.stdev(column) / math.sqrt(5),
                                                            rel=1e-12, abs=1e-15)
    assert np.any(summary["K_out"]["se"] > 0)  # the comparison above is not vacuous: the samples differ
    assert summary.K_out.se is summary["K_out"]["se"]
    assert kernel_summary(out, keys=("C",)).fields() == ("C",)
    with pytest.raises(ValueError, match=r"^keys:"):
        kernel_summary(out, keys=("Q",))
    with pytest.raises(ValueError, match=r"^a:"):
        mean_and_se(np.ones((1, 3)))
