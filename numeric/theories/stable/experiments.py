"""Experiments of Hayou et al. (2021), Stable ResNet, section 4 (Fig. 2), section 6 (Prop. 10) and section 7
(Fig. 3, Table 2), on the kernel engine of :mod:`resprop.numeric.theories.stable.stable_resnet`.

Sphere (zonal) engine
    Every experiment here uses inputs of one common norm (unit circle, digits standardised to the unit sphere).
    Then Q_l(x, x) is the same for all inputs, so C_l(x, x') and the NTK correlation are functions of the input
    cosine c = x.x' alone, and recursion (5)/(9) acts elementwise on c.  :func:`zonal_kernel_maps` runs the
    generated ReLU recursion that ``stable_resnet.kernels`` runs (`resprop.generated.residual_recursions`,
    g = 1, w = lambda^2 sigma_w^2, s = lambda^2 sigma_b^2, the same common log scale) on the common diagonal
    and a vector of cosines.  :func:`sphere_kernels` evaluates
    it on a P x P Gram matrix either exactly (all distinct cosines) or, for large P, by a cubic spline of
    1 - C in log(angle) on ``nodes`` log-spaced angles; the spline error is < 1e-12 in absolute terms (tested
    against the direct P x P engine ``stable_resnet.kernels``).  This is what makes P = 1000 to 1800 points at
    depth 1000 cost seconds (the direct engine needs ~1.6 ms per layer at P = 1000 on two cores).

Functions
    :func:`circle_points`, :func:`spectra` (Fig. 2), :func:`gp_regression` (Fig. 3), :func:`digits_classification`
    (Table 2 on scikit-learn's 8x8 digits instead of MNIST / CIFAR-10), :func:`gp_kl_logscale` /
    :func:`gp_kl_direct` / :func:`pac_bayes_kl` (Prop. 10) and :func:`make_stable_figures`.

The NNGP experiments use the correlation kernel C_L (eq. 3), as the paper does in section 7, so the unscaled
network's exploding variance plays no role; only :func:`pac_bayes_kl` uses the covariance Q_L = e^s Q_normalised,
because the KL divergence depends on the scale.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg as sla  # noqa: E402
from scipy.interpolate import CubicSpline  # noqa: E402
from scipy.special import expit  # noqa: E402

import resprop.numeric.theories.stable.generated.stable as gs  # noqa: E402
from resprop.numeric.engine import residual_kernel as RK  # noqa: E402
from resprop.numeric.engine import validation as V  # noqa: E402
from resprop.numeric.engine.blas_threads import one_blas_thread  # noqa: E402
from resprop.numeric.engine.results import ResultRecord  # noqa: E402
from resprop.numeric.engine.validation import ParameterError  # noqa: E402
from resprop.numeric.theories.stable import stable_resnet as sr  # noqa: E402

__all__ = ["SCALINGS", "STABLE_FIGURE_NAMES", "circle_points", "zonal_kernel_maps", "sphere_kernels", "top_eigenvalues",
           "spectra", "gp_posterior", "gp_regression", "load_digits_sphere", "digits_classification", "digits_table",
           "gp_kl_logscale", "gp_kl_direct", "pac_bayes_kl", "make_stable_figures", "ZonalKernels", "Spectra",
           "GPPosterior", "GPRegression", "DigitsClassification", "DigitsTable", "PacBayesKL"]

SCALINGS = ("unscaled", "uniform", "decreasing")
STABLE_FIGURE_NAMES = ("stable_fig1_diagonal.png", "stable_fig2_spectra.png", "stable_fig3_gp_regression.png",
                       "stable_table2_digits.png", "stable_pac_bayes_kl.png")
_COLOURS = {"unscaled": "C3", "uniform": "C0", "decreasing": "C2"}
_DPI = 110


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class ZonalKernels(ResultRecord):
    """One depth of :func:`zonal_kernel_maps` / :func:`sphere_kernels`: the NNGP correlation C_L and the NTK
    correlation (arrays; None where :func:`sphere_kernels` was not asked for them) and the natural-log
    diagonals log Q_L(x, x), log Theta_L(x, x) (the same for every input)."""

    correlation: np.ndarray | None
    ntk_correlation: np.ndarray | None
    log_Q_diag: float
    log_ntk_diag: float


@dataclass(frozen=True)
class Spectra(ResultRecord):
    """:func:`spectra`: leading eigenvalues / largest, ``nngp`` and ``ntk`` map scaling -> (len(depths), k)."""

    depths: list[int]
    P: int
    k: int
    sigma_w2: float
    sigma_b2: float
    nngp: dict[str, np.ndarray]
    ntk: dict[str, np.ndarray]


@dataclass(frozen=True)
class GPPosterior(ResultRecord):
    """:func:`gp_posterior`: posterior mean, latent variance and predictive variance at the test points."""

    mean: np.ndarray
    var: np.ndarray
    predictive_var: np.ndarray


@dataclass(frozen=True)
class GPRegression(ResultRecord):
    """:func:`gp_regression`: training data, the grid ``x`` with the target ``y_true``, posterior mean, latent and
    predictive variance, the 95% predictive band, the posterior mean at the training inputs and the RMSE."""

    depth: int
    scaling: str
    noise: float
    x_train: np.ndarray
    y_train: np.ndarray
    x: np.ndarray
    y_true: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    predictive_var: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    mean_train: np.ndarray
    rmse: float


@dataclass(frozen=True)
class DigitsClassification(ResultRecord):
    """:func:`digits_classification`: the split sizes and, per scaling (dict keys) a list over depths of the test
    and validation accuracy, the chosen noise variance and whether it is a grid end ("lower" / "upper" / None);
    ``seconds`` per scaling."""

    depths: list[int]
    n_train: int
    n_val: int
    n_test: int
    seed: int
    noise_grid: list[float]
    test_accuracy: dict[str, list[float]]
    val_accuracy: dict[str, list[float]]
    noise_var: dict[str, list[float]]
    noise_var_at_edge: dict[str, list[str | None]]
    seconds: dict[str, float]


@dataclass(frozen=True)
class DigitsTable(ResultRecord):
    """:func:`digits_table`: mean and standard deviation over seeds of the test accuracy (per scaling, a list over
    depths) and the per-seed :class:`DigitsClassification` runs."""

    depths: list[int]
    n_train: int
    n_val: int
    n_test: int
    seeds: list[int]
    mean: dict[str, list[float]]
    std: dict[str, list[float]]
    runs: list[DigitsClassification]


@dataclass(frozen=True)
class PacBayesKL(ResultRecord):
    """:func:`pac_bayes_kl`: per scaling (dict keys) the KL and log Q_L scale, lists over ``depths``; ``n`` is the
    number of training points and ``noise`` the noise standard deviation."""

    depths: list[int]
    n: int
    noise: float
    kl: dict[str, list[float]]
    log_scale: dict[str, list[float]]


# --------------------------------------------------------------------------- inputs
def circle_points(P: int = 1000, seed: int = 0) -> np.ndarray:
    """P points uniform at random on the unit circle, as rows (cos t, sin t) of a (P, 2) array."""
    P = V.integer("P", P, 1)
    t = np.random.default_rng(seed).uniform(0.0, 2 * np.pi, P)
    return np.column_stack([np.cos(t), np.sin(t)])


def _depths_tuple(depths) -> tuple[int, ...]:
    return tuple(int(L) for L in V.depths("depths", np.atleast_1d(depths)))


def _depth_independent(scaling, depth: int) -> bool:
    """True when lambda_{l,L} does not depend on L (so one run of depth max(depths) holds every shallower net)."""
    s = sr.parse_scaling(scaling)
    if s.values is not None:
        return False
    lam_max = sr.lambda_squared(s, depth)
    return all(np.allclose(sr.lambda_squared(s, L), lam_max[:L], rtol=1e-14, atol=0)
               for L in sorted({1, 2, max(1, depth // 2), depth}))


# --------------------------------------------------------------------------- zonal engine
def zonal_kernel_maps(c, depths, scaling="uniform", sigma_w2: float = 2.0, sigma_b2: float = 0.0,
                      norm2_over_d: float = 1.0) -> dict[int, ZonalKernels]:
    """C_L(c) and the NTK correlation for inputs of equal norm with cosines ``c``, for each depth L in ``depths``.

    ``norm2_over_d`` = ||x||^2/d fixes Q_0(x, x') = sigma_b^2 + sigma_w^2 (||x||^2/d) c (eq. 5); it only matters
    when sigma_b > 0.  Returns {L: :class:`ZonalKernels`} (correlation, ntk_correlation, log_Q_diag,
    log_ntk_diag) with arrays shaped like ``c`` and natural-log diagonals (the same for every input).  Scalings
    whose lambda does not depend on L are run once to max(depths); the others (uniform) once per depth.

    The recursion is the generated ReLU one of `derive/residual.py` (g = 1, w = lambda^2 sigma_w^2,
    s = lambda^2 sigma_b^2), as in ``stable_resnet.kernels``: ``relu_diagonal_ntk`` on the common diagonal and
    ``relu_nngp_ntk`` on the vector of pairs, whose row and column diagonals are that one diagonal.  The state
    is renormalised to a unit diagonal after every layer (``block=1``), as a P x P run sees it for a pair of
    inputs at a small angle: the generated form evaluates sqrt(K_aa) sqrt(K_bb), which equals the diagonal
    exactly only when it is 1, and the NTK term arccos(C) magnifies an ulp of C near C = 1 to ~1e-8.
    """
    c = np.clip(np.asarray(c, float), -1.0, 1.0)
    depths = _depths_tuple(depths)
    sigma_w2 = float(V.positive("sigma_w2", sigma_w2))
    sigma_b2 = float(V.nonnegative("sigma_b2", sigma_b2))
    a = float(V.positive("norm2_over_d", norm2_over_d))
    q0 = gs.input_kernel(sigma_b2, sigma_w2, a * np.concatenate([[1.0], c.ravel()]), 1)
    runs = [max(depths)] if _depth_independent(scaling, max(depths)) else sorted(set(depths))
    wanted = set(depths)
    rec = RK.recursions("relu")
    pair, diagonal = rec.pair["ntk"], rec.diagonal["ntk"]
    one = np.ones((1, 1))
    out = {}
    for run in runs:
        lam2 = sr.lambda_squared(scaling, run)
        w, s = lam2 * sigma_w2, lam2 * sigma_b2
        d, td = q0[:1] / q0[0], q0[:1] / q0[0]
        Q, T = q0[1:] / q0[0], q0[1:] / q0[0]
        log_scale = float(np.log(q0[0]))
        with np.errstate(all="ignore"):  # overflow: ZonalKernels of non-finite values, as before
            for l in range(run):
                seq = (np.ones(1), w[l:l + 1], s[l:l + 1] * np.exp(-log_scale))
                d, td = diagonal(d, td, *seq)
                Q, T = pair(Q, T, one, one, *seq)
                r = float(d[0])
                d, td, Q, T = d / r, td / r, Q / r, T / r
                log_scale += float(np.log(r))
                if l + 1 in wanted and (len(runs) == 1 or l + 1 == run):
                    out[l + 1] = ZonalKernels(correlation=np.clip(Q / d[0], -1.0, 1.0).reshape(c.shape),
                                              ntk_correlation=(T / td[0]).reshape(c.shape),
                                              log_Q_diag=float(log_scale + np.log(d[0])),
                                              log_ntk_diag=float(log_scale + np.log(td[0])))
    return out


def _gram_cosines(X) -> tuple[np.ndarray, float]:
    """Cosines x.x'/|x|^2 of equal-norm rows and |x|^2/d."""
    X = V.real("X", X)
    if X.ndim != 2:
        raise ParameterError("X", f"must be a (P, d) array, got shape {X.shape}")
    n2 = np.einsum("ij,ij->i", X, X)
    if n2.min() <= 0 or not np.allclose(n2, n2[0], rtol=1e-10, atol=0):
        raise ParameterError("X", "the sphere engine needs inputs of one common nonzero norm")
    return np.clip(X @ X.T / n2[0], -1.0, 1.0), float(n2[0]) / X.shape[1]


def sphere_kernels(X, depths, scaling="uniform", sigma_w2: float = 2.0, sigma_b2: float = 0.0,
                   nodes: int | None = 20000, Y=None,
                   keys=("correlation", "ntk_correlation")) -> dict[int, ZonalKernels]:
    """C_L and the NTK correlation matrices for equal-norm inputs X (rows), at each depth in ``depths``.

    With ``Y`` (rows of the same norm) the cross matrices C_L(X, Y) are returned instead.  ``nodes=None``
    evaluates the recursion on every entry (exact, slow for large P); otherwise a cubic spline of 1 - C in
    log(angle) on ``nodes`` angles log-spaced in [1e-8, pi] (below 1e-8: 1 - C ~ angle^2, NTK ~ angle).
    ``keys`` selects which of "correlation" / "ntk_correlation" are returned (plus the log diagonals); returns
    {L: :class:`ZonalKernels`} with the other one None.
    """
    keys = tuple(keys)
    if not set(keys) <= {"correlation", "ntk_correlation"}:
        raise ParameterError("keys", f"must be a subset of ('correlation', 'ntk_correlation'), got {keys}")
    if Y is None:
        G, a = _gram_cosines(X)
    else:
        G, a = _gram_cosines(np.vstack([X, Y]))
        G = G[: len(X), len(X):]
    if nodes is None:
        maps = zonal_kernel_maps(G, depths, scaling, sigma_w2, sigma_b2, a)
        out = {L: {"log_Q_diag": m.log_Q_diag, "log_ntk_diag": m.log_ntk_diag, **{k: m[k] for k in keys}}
               for L, m in maps.items()}
    else:
        nodes = V.integer("nodes", nodes, 16)
        t_min = 1e-8
        logt = np.linspace(np.log(t_min), np.log(np.pi), nodes)
        maps = zonal_kernel_maps(np.cos(np.exp(logt)), depths, scaling, sigma_w2, sigma_b2, a)
        theta = np.arccos(G)
        small = theta < t_min
        lt = np.log(np.where(small, t_min, theta))
        out = {}
        for L, m in maps.items():
            res: dict[str, Any] = {"log_Q_diag": m.log_Q_diag, "log_ntk_diag": m.log_ntk_diag}
            for key in keys:
                u_nodes = 1.0 - m[key]
                u = CubicSpline(logt, u_nodes)(lt)
                power = 2 if key == "correlation" else 1  # 1 - C ~ angle^2; the NTK has an |angle| term
                u = np.where(small, u_nodes[0] * (theta / t_min) ** power, u)
                res[key] = 1.0 - u
            if "correlation" in res:
                res["correlation"] = np.clip(res["correlation"], -1.0, 1.0)
            out[L] = res
    if Y is None:  # exact symmetry and unit diagonal (x.x/|x|^2 = 1 - 1e-16 would move the NTK entry by 1e-9)
        for res in out.values():
            for key in keys:
                M = (res[key] + res[key].T) / 2
                np.fill_diagonal(M, 1.0)
                res[key] = M
    return {L: ZonalKernels(correlation=res.get("correlation"), ntk_correlation=res.get("ntk_correlation"),
                            log_Q_diag=res["log_Q_diag"], log_ntk_diag=res["log_ntk_diag"]) for L, res in out.items()}


# --------------------------------------------------------------------------- Fig. 2
def top_eigenvalues(K, k: int) -> np.ndarray:
    """The k largest eigenvalues of the symmetric matrix K, descending, divided by the largest."""
    K = np.asarray(K, float)
    P = K.shape[0]
    k = min(V.integer("k", k, 1), P)
    # one BLAS thread: on a loaded 2-core machine threaded OpenBLAS eigh was measured 40x slower
    with one_blas_thread():  # full divide-and-conquer; the MRRR subset driver was not faster here
        ev = sla.eigh(K, eigvals_only=True, driver="evd")[::-1][:k]
    return ev / ev[0]


def spectra(depths=(1, 10, 100, 1000), scalings=SCALINGS, P: int = 1000, k: int = 10, sigma_w2: float = 2.0,
            sigma_b2: float = 0.0, seed: int = 0, nodes: int | None = 20000) -> Spectra:
    """Fig. 2: leading k eigenvalues (each divided by the largest) of the NNGP correlation matrix C_L and of the
    normalised NTK matrix Theta_L(x, x')/Theta_L(x, x) on P uniform random points of the unit circle.

    Returns :class:`Spectra` (depths, P, k, sigma_w2, sigma_b2, nngp: {scaling: (len(depths), k)}, ntk: {...}).
    """
    depths = _depths_tuple(depths)
    X = circle_points(P, seed)
    nngp, ntk = {}, {}
    for sc in scalings:
        ker = sphere_kernels(X, depths, sc, sigma_w2, sigma_b2, nodes=nodes)
        nngp[sc] = np.array([top_eigenvalues(ker[L].correlation, k) for L in depths])
        ntk[sc] = np.array([top_eigenvalues(ker[L].ntk_correlation, k) for L in depths])
    return Spectra(depths=list(depths), P=int(P), k=int(k), sigma_w2=sigma_w2, sigma_b2=sigma_b2, nngp=nngp, ntk=ntk)


# --------------------------------------------------------------------------- Fig. 3
def gp_posterior(K_train, K_cross, k_test_diag, y, noise: float) -> GPPosterior:
    """GP regression (eq. 10) with noise standard deviation ``noise``: posterior mean, latent variance and
    predictive variance (latent + noise^2) at the test points.  K_cross is (n_test, n_train)."""
    K_train = np.asarray(K_train, float)
    s2 = float(noise) ** 2
    cho = sla.cho_factor(K_train + s2 * np.eye(len(K_train)), lower=True)
    alpha = sla.cho_solve(cho, np.asarray(y, float))
    mean = np.asarray(K_cross, float) @ alpha
    v = sla.solve_triangular(cho[0], np.asarray(K_cross, float).T, lower=True)
    var = np.maximum(np.asarray(k_test_diag, float) - np.einsum("ij,ij->j", v, v), 0.0)
    return GPPosterior(mean=mean, var=var, predictive_var=var + s2)


def _target(x):
    return x * np.sin(x)


def gp_regression(depth: int = 1000, scaling="uniform", n_train: int = 5, noise: float = 0.1, grid: int = 200,
                  seed: int = 0, sigma_w2: float = 2.0, sigma_b2: float = 0.0,
                  noisy_targets: bool = True) -> GPRegression:
    """Fig. 3: NNGP regression of y = x sin x, x in [0, 2 pi) mapped to (cos x, sin x) on the unit circle.

    ``noise`` is the paper's sigma (standard deviation, sigma = 0.1); n_train uniform random training inputs,
    targets x sin x + sigma * N(0, 1) when ``noisy_targets``.  The prior kernel is the NNGP correlation kernel
    C_L (eq. 3), as in the paper's section 7.  Because x sin x vanishes at 0 and 2 pi the target is continuous
    on the circle.  Returns (:class:`GPRegression`) the grid, mean, latent and predictive variance, the 95%
    predictive band (mean +- 1.96 sd), the training data and the posterior mean at the training inputs.
    """
    depth = V.integer("depth", depth, 1)
    n_train = V.integer("n_train", n_train, 1)
    grid = V.integer("grid", grid, 2)
    noise = float(V.positive("noise", noise))
    rng = np.random.default_rng(seed)
    x_tr = np.sort(rng.uniform(0.0, 2 * np.pi, n_train))
    y_tr = _target(x_tr) + (noise * rng.standard_normal(n_train) if noisy_targets else 0.0)
    x_gr = np.linspace(0.0, 2 * np.pi, grid, endpoint=False)
    x_all = np.concatenate([x_tr, x_gr])
    c = np.cos(x_all[:, None] - x_tr[None, :])  # cosines to the training inputs (train + grid rows)
    m = zonal_kernel_maps(c, [depth], scaling, sigma_w2, sigma_b2, 0.5)[depth]  # ||x||^2/d = 1/2 in R^2
    K = m.correlation
    assert K is not None  # zonal_kernel_maps computes both correlations
    post = gp_posterior(K[:n_train], K, np.ones(len(x_all)), y_tr, noise)
    sd = np.sqrt(post.predictive_var[n_train:])
    mean = post.mean[n_train:]
    return GPRegression(depth=depth, scaling=str(scaling), noise=noise, x_train=x_tr, y_train=y_tr,
                        x=x_gr, y_true=_target(x_gr), mean=mean, var=post.var[n_train:],
                        predictive_var=post.predictive_var[n_train:], lower=mean - 1.96 * sd,
                        upper=mean + 1.96 * sd, mean_train=post.mean[:n_train],
                        rmse=float(np.sqrt(np.mean((mean - _target(x_gr)) ** 2))))


# --------------------------------------------------------------------------- Table 2
def load_digits_sphere() -> tuple[np.ndarray, np.ndarray]:
    """All 1797 scikit-learn digits (10 classes, 8x8), each image standardised (own mean removed) and scaled to
    the unit sphere of R^64 (the paper standardises MNIST / CIFAR-10 images onto the sphere)."""
    from sklearn.datasets import load_digits

    data = load_digits()
    X = data.data.astype(float)
    X -= X.mean(axis=1, keepdims=True)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, data.target.astype(int)


def digits_classification(depths=(50, 200, 1000), scalings=SCALINGS, n_train: int = 1000, n_val: int = 300,
                          n_test: int | None = None, seed: int = 0, noise_grid=None, sigma_w2: float = 2.0,
                          sigma_b2: float = 0.0, nodes: int | None = 20000) -> DigitsClassification:
    """Table 2 on scikit-learn digits: NNGP posterior-mean classification with the correlation kernel C_L.

    Random split (train / validation / test; n_test=None uses the rest of the 1797 images), targets one-hot
    minus 0.1 (Lee et al. 2018), prediction Q_N(.)(Q_NN + sigma^2 I)^-1 Y with the noise variance sigma^2 chosen
    from ``noise_grid`` (default 10^-12 .. 10^1) by validation accuracy (ties: the largest).  Returns
    (:class:`DigitsClassification`) per
    scaling and depth the test and validation accuracy and the chosen sigma^2; ``noise_var_at_edge`` says
    where that choice is an end point of the grid ("lower"/"upper": the best noise may lie outside the
    searched range) and is None where it is interior.
    """
    depths = _depths_tuple(depths)
    X, lab = load_digits_sphere()
    n_train, n_val = V.integer("n_train", n_train, 2), V.integer("n_val", n_val, 1)
    n_test = len(X) - n_train - n_val if n_test is None else V.integer("n_test", n_test, 1)
    if n_train + n_val + n_test > len(X):
        raise ParameterError("n_train", f"n_train + n_val + n_test must be <= {len(X)}")
    grid = np.logspace(-12, 1, 27) if noise_grid is None else np.sort(V.positive("noise_grid", noise_grid))
    perm = np.random.default_rng(seed).permutation(len(X))
    tr, va, te = perm[:n_train], perm[n_train:n_train + n_val], perm[n_train + n_val:n_train + n_val + n_test]
    Y = np.eye(10)[lab[tr]] - 0.1
    test_accuracy, val_accuracy, noise_var, noise_var_at_edge, seconds = {}, {}, {}, {}, {}
    for sc in scalings:
        t0 = time.perf_counter()
        K = sphere_kernels(X[np.concatenate([tr, va, te])], depths, sc, sigma_w2, sigma_b2, nodes=nodes,
                           keys=("correlation",))
        accs_te: list[float] = []
        accs_va, noises, edges = [], [], []
        for L in depths:
            C = K[L].correlation
            assert C is not None  # asked for with keys=("correlation",)
            with one_blas_thread():
                lam, U = sla.eigh(C[:n_train, :n_train], driver="evd")
                UY = U.T @ Y
                KU = C[n_train:, :n_train] @ U
            best: tuple[float, Any, float | None] = (-1.0, None, None)
            for s2 in grid:
                pred = KU @ (UY / (lam + s2)[:, None])
                acc_va = float(np.mean(pred[:n_val].argmax(1) == lab[va]))
                if acc_va >= best[0]:
                    best = (acc_va, s2, float(np.mean(pred[n_val:].argmax(1) == lab[te])))
            accs_va.append(best[0])
            noises.append(float(best[1]))
            edges.append("lower" if best[1] == grid[0] and grid.size > 1 else
                         "upper" if best[1] == grid[-1] and grid.size > 1 else None)
            assert best[2] is not None  # set by the first noise level (acc_va >= 0 > -1)
            accs_te.append(best[2])
        test_accuracy[sc], val_accuracy[sc], noise_var[sc] = accs_te, accs_va, noises
        noise_var_at_edge[sc] = edges
        seconds[sc] = time.perf_counter() - t0
    return DigitsClassification(depths=list(depths), n_train=n_train, n_val=n_val, n_test=n_test, seed=seed,
                                noise_grid=grid.tolist(), test_accuracy=test_accuracy, val_accuracy=val_accuracy,
                                noise_var=noise_var, noise_var_at_edge=noise_var_at_edge, seconds=seconds)


def digits_table(depths=(50, 200, 1000), scalings=SCALINGS, seeds=(0, 1, 2), **kwargs) -> DigitsTable:
    """:func:`digits_classification` over several random splits (the paper's 3 runs): per-seed results and the
    mean and standard deviation of the test accuracy per scaling and depth (:class:`DigitsTable`)."""
    runs = [digits_classification(depths, scalings, seed=int(sd), **kwargs) for sd in seeds]
    acc = {sc: np.array([r.test_accuracy[sc] for r in runs]) for sc in scalings}
    first = runs[0]
    return DigitsTable(depths=first.depths, n_train=first.n_train, n_val=first.n_val, n_test=first.n_test,
                       seeds=[int(sd) for sd in seeds], mean={sc: a.mean(0).tolist() for sc, a in acc.items()},
                       std={sc: (a.std(0, ddof=1) if len(seeds) > 1 else 0 * a[0]).tolist() for sc, a in acc.items()},
                       runs=runs)


# --------------------------------------------------------------------------- Prop. 10
def _kl_terms(log_mu, z2, noise2):
    t = log_mu - np.log(noise2)  # log(mu/sigma^2), may be -inf for mu = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.where(np.isfinite(t), z2 / noise2 * expit(t) * expit(-t), 0.0)
    return 0.5 * (np.logaddexp(0.0, t) - expit(t) + fit)


def gp_kl_logscale(Q_normalised, log_scale: float, y, noise: float) -> float:
    """KL(posterior || prior) of GP regression (eq. 10) on the N training inputs, for Q = e^log_scale Q_normalised.

    With mu_i = e^s lambda_i the eigenvalues of Q and z = U^T y,
    KL = 1/2 sum_i [log(1 + mu_i/sigma^2) - mu_i/(mu_i + sigma^2) + z_i^2 mu_i/(mu_i + sigma^2)^2],
    evaluated with log(mu_i/sigma^2) = s + log lambda_i - log sigma^2 (logaddexp / expit), so it is finite for
    Q ~ 2^1000.  ``noise`` is the standard deviation sigma.
    """
    lam, U = np.linalg.eigh(np.asarray(Q_normalised, float))
    z2 = (U.T @ np.asarray(y, float)) ** 2
    with np.errstate(divide="ignore"):
        log_mu = float(log_scale) + np.log(np.clip(lam, 0.0, None))
    return float(np.sum(_kl_terms(log_mu, z2, float(noise) ** 2)))


def gp_kl_direct(Q, y, noise: float) -> float:
    """Textbook Gaussian KL(N(m, S) || N(0, Q)) with S = Q - Q (Q + s2 I)^-1 Q, m = Q (Q + s2 I)^-1 y."""
    Q = np.asarray(Q, float)
    y = np.asarray(y, float)
    N = len(Q)
    A = Q + float(noise) ** 2 * np.eye(N)
    m = Q @ np.linalg.solve(A, y)
    S = Q - Q @ np.linalg.solve(A, Q)
    S = (S + S.T) / 2
    Qi_S = np.linalg.solve(Q, S)
    _, ld_q = np.linalg.slogdet(Q)
    _, ld_s = np.linalg.slogdet(S)
    return float(0.5 * (np.trace(Qi_S) - N + m @ np.linalg.solve(Q, m) + ld_q - ld_s))


def _kl_data(n: int, seed: int):
    X = circle_points(n, seed)
    t = np.mod(np.arctan2(X[:, 1], X[:, 0]), 2 * np.pi)
    return X, _target(t)


def pac_bayes_kl(depths=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000), scalings=SCALINGS, n: int = 50,
                 noise: float = 0.1, seed: int = 0, sigma_w2: float = 2.0, sigma_b2: float = 0.0) -> PacBayesKL:
    """Prop. 10: KL(A_L || P_L) of GP regression with the NNGP covariance Q_L (not the correlation), on n random
    points of the unit circle (R^2, Q_0 = sigma_w^2 x.x'/2) with targets t sin t (t the angle), noise sd sigma.

    Q_L comes from ``stable_resnet.kernels`` (direct P x P engine); the KL from :func:`gp_kl_logscale`.
    Returns :class:`PacBayesKL` (depths, n, noise, kl: {scaling: list}, log_scale: {scaling: list}).
    """
    depths = _depths_tuple(depths)
    X, y = _kl_data(V.integer("n", n, 1), seed)
    Q0 = sr.input_kernel_matrix(X, sigma_w2, sigma_b2)
    kls, log_scales = {}, {}
    for sc in scalings:
        kl, ls = [], []
        for L in depths:
            k = sr.kernels(Q0, L, sc, sigma_w2, sigma_b2)
            kl.append(gp_kl_logscale(k["Q_normalised"], k["log_scale"], y, noise))
            ls.append(float(k["log_scale"]))
        kls[sc], log_scales[sc] = kl, ls
    return PacBayesKL(depths=list(depths), n=int(n), noise=float(noise), kl=kls, log_scale=log_scales)


# --------------------------------------------------------------------------- figures
def _settings(quick: bool) -> dict:
    if quick:
        return {"fig1_uniform_depths": 15, "spectra_P": 300, "spectra_depths": (1, 10, 100, 1000),
                "gp_depths": (10, 100, 1000), "digits": {"n_train": 300, "n_val": 150, "n_test": 300}, "digits_runs": 1,
                "digits_depths": (50, 200, 1000), "kl_depths": (1, 3, 10, 30, 100, 300), "kl_n": 30}
    return {"fig1_uniform_depths": 40, "spectra_P": 1000, "spectra_depths": (1, 10, 100, 1000),
            "gp_depths": (10, 100, 1000), "digits": {"n_train": 1000, "n_val": 300, "n_test": None}, "digits_runs": 3,
            "digits_depths": (50, 200, 1000), "kl_depths": (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000), "kl_n": 50}


def _finish(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
    return path


def _fig1(path: Path, n_uniform: int, depth: int = 1000) -> Path:
    X = np.array([[1.0, 0.0]])
    Q0 = sr.input_kernel_matrix(X, 2.0, 0.0)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for sc in SCALINGS:
        if _depth_independent(sc, depth):
            k = sr.kernels(Q0, depth, sc, keep_layers=True)
            L = np.arange(depth + 1)
            q, t = k["log_Q_diag_layers"][:, 0], k["log_ntk_diag_layers"][:, 0]
        else:
            L = np.unique(np.geomspace(1, depth, n_uniform).round().astype(int))
            ks = [sr.kernels(Q0, int(d), sc) for d in L]
            q = np.array([kk["log_Q_diag"][0] for kk in ks])
            t = np.array([kk["log_ntk_diag"][0] for kk in ks])
        for ax, v in zip(axes, (q, t)):
            ax.plot(L, v, color=_COLOURS[sc], label=sc, marker="." if len(L) < 100 else None)
    axes[0].plot(np.arange(depth + 1), np.arange(depth + 1) * np.log(2.0), "k:", lw=1, label="L ln 2 (Lemma 1)")
    for ax, name in zip(axes, ("NNGP  ln Q_L(x, x)", "NTK  ln Theta_L(x, x)")):
        ax.set_xscale("symlog", linthresh=1)
        ax.set_yscale("symlog", linthresh=1)
        ax.set_xlabel("depth L")
        ax.set_ylabel(name)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle("Fig. 1: diagonal NNGP / NTK for ||x|| = 1, d = 2, sigma_w^2 = 2, sigma_b = 0")
    return _finish(fig, path)


def _fig2(path: Path, sp_: Spectra) -> Path:
    fig, axes = plt.subplots(3, 2, figsize=(10, 10), sharex=True)
    cmap = plt.get_cmap("viridis")
    idx = np.arange(1, sp_["k"] + 1)
    for i, sc in enumerate(SCALINGS):
        for j, kind in enumerate(("nngp", "ntk")):
            ax = axes[i, j]
            for n, L in enumerate(sp_["depths"]):
                ax.plot(idx, np.clip(sp_[kind][sc][n], 1e-18, None), marker="o", ms=3,
                        color=cmap(n / max(1, len(sp_["depths"]) - 1)), label=f"L = {L}")
            ax.set_yscale("log")
            ax.set_title(f"{sc}: {'NNGP correlation C_L' if kind == 'nngp' else 'normalised NTK'}", fontsize=10)
            ax.grid(alpha=0.3)
            if i == 2:
                ax.set_xlabel("eigenvalue index")
            if j == 0:
                ax.set_ylabel("eigenvalue / largest")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"Fig. 2: leading eigenvalues, P = {sp_['P']} random points on the circle")
    return _finish(fig, path)


def _fig3(path: Path, depths, seed: int) -> tuple[Path, dict]:
    fig, axes = plt.subplots(3, len(depths), figsize=(4 * len(depths), 9), sharex=True, sharey=True)
    axes = np.atleast_2d(axes)
    rmse: dict[str, list[float]] = {}
    for i, sc in enumerate(SCALINGS):
        rmse[sc] = []
        for j, L in enumerate(depths):
            r = gp_regression(L, sc, seed=seed)
            rmse[sc].append(r["rmse"])
            ax = axes[i, j]
            col = "C3" if sc == "unscaled" else "C0"
            ax.plot(r["x"], r["y_true"], "k--", lw=1, label="x sin x")
            ax.plot(r["x"], r["mean"], color=col, label="posterior mean")
            ax.fill_between(r["x"], r["lower"], r["upper"], color=col, alpha=0.25, label="95% predictive")
            ax.plot(r["x_train"], r["y_train"], "o", color="darkgreen", label="training")
            ax.set_title(f"{sc}, L = {L}", fontsize=10)
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("Fig. 3: NNGP regression with the correlation kernel C_L, sigma = 0.1, 5 training points")
    return _finish(fig, path), rmse


def _table2(png: Path, js: Path, res: DigitsTable) -> tuple[Path, Path]:
    js.write_text(json.dumps(res.to_dict(), indent=2))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1.3, 1]})
    depths = res["depths"]
    w = 0.8 / len(SCALINGS)
    for i, sc in enumerate(SCALINGS):
        axes[0].bar(np.arange(len(depths)) + (i - 1) * w, 100 * np.array(res["mean"][sc]), w,
                    yerr=100 * np.array(res["std"][sc]), color=_COLOURS[sc], label=sc, capsize=3)
    axes[0].axhline(10, color="k", ls=":", lw=1, label="chance")
    axes[0].set_xticks(np.arange(len(depths)), [f"L = {d}" for d in depths])
    axes[0].set_ylabel("test accuracy (%)")
    axes[0].set_ylim(0, 100)
    axes[0].legend(fontsize=8, loc="lower left")
    cells = [[f"{d}"] + [f"{100 * res['mean'][sc][n]:.2f} +- {100 * res['std'][sc][n]:.2f}" for sc in SCALINGS]
             for n, d in enumerate(depths)]
    axes[1].axis("off")
    tab = axes[1].table(cellText=cells, colLabels=["depth"] + list(SCALINGS), loc="center")
    tab.auto_set_font_size(False)
    tab.set_fontsize(8)
    tab.scale(1, 1.6)
    fig.suptitle(f"Table 2 (scikit-learn digits, 10 classes): NNGP posterior mean with C_L, N = {res['n_train']}, "
                 f"{res['n_test']} test, {len(res['seeds'])} split(s), mean +- sd (%)")
    return _finish(fig, png), js


def _fig_kl(path: Path, kl: PacBayesKL) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4.5))
    L = np.array(kl["depths"])
    for sc in SCALINGS:
        ax.plot(L, kl["kl"][sc], marker="o", color=_COLOURS[sc], label=sc)
    ax.plot(L, L, "k:", lw=1, label="KL = L (Prop. 10 bound)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("depth L")
    ax.set_ylabel("KL(posterior || prior)")
    ax.set_title(f"Prop. 10: GP regression KL with Q_L, N = {kl['n']}, sigma = {kl['noise']}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    return _finish(fig, path)


def make_stable_figures(out: Path, quick: bool = False, seed: int = 0) -> list[Path]:
    """Write the five figures of :data:`STABLE_FIGURE_NAMES` and ``stable_table2_digits.json`` into ``out``.

    Returns the written paths (the five PNGs in order, then the JSON).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = _settings(quick)
    with one_blas_thread():
        paths = [_fig1(out / STABLE_FIGURE_NAMES[0], cfg["fig1_uniform_depths"])]
        sp_ = spectra(cfg["spectra_depths"], P=cfg["spectra_P"], seed=seed)
        paths.append(_fig2(out / STABLE_FIGURE_NAMES[1], sp_))
        paths.append(_fig3(out / STABLE_FIGURE_NAMES[2], cfg["gp_depths"], seed)[0])
        dig = digits_table(cfg["digits_depths"], seeds=[seed + i for i in range(cfg["digits_runs"])],
                           **cfg["digits"])
        png, js = _table2(out / STABLE_FIGURE_NAMES[3], out / "stable_table2_digits.json", dig)
        paths.append(png)
        kl = pac_bayes_kl(cfg["kl_depths"], n=cfg["kl_n"], seed=seed)
        paths.append(_fig_kl(out / STABLE_FIGURE_NAMES[4], kl))
    paths.append(js)
    return paths
