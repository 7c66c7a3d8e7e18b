"""Monte Carlo of explicit finite-width residual networks: the reference data of the fluctuation engine (issue 27).

The network is exactly the one of ``resprop.kernel`` (`resprop.numeric.engine.kernel`; docs/design/
fluctuations-engine.md section 1), with every hidden layer of width n, for P inputs ``X`` of shape (P, d_in):

    h^(0) = W_in x + b_in,                               W_in ~ N(0, sigma_w2 / d_in),  b_in ~ N(0, sigma_b2),
    h^(l) = gamma h^(l-1) + lambda_l (W^(l) phi(h^(l-1)) + b^(l)),  W^(l) ~ N(0, sigma_w2 / n) (n x n),
                                                                    b^(l) ~ N(0, sigma_b2),   l = 1..depth,

one bias vector per layer shared by all P inputs; ``gamma`` any real number (its sign is kept; 0 is the plain
MLP), ``lambda_l`` from ``kernel.branch_scales(branch_scale, depth)`` (a number, an array of length depth or a
SymPy expression in l and L), ``activation`` any name or SymPy expression in x that ``resprop.kernel`` accepts.
Per network ("sample") two P x P kernels of the last layer are recorded:

* ``K_emp`` = h^(L)^T h^(L) / n, the empirical kernel K-hat of the issue;
* ``K_law`` = gamma^(2L) K^(0) + sum_{k<L} gamma^(2(L-k-1)) lambda_(k+1)^2 (sigma_w2 Phi_k^T Phi_k / n + sigma_b2),
  Phi_k = phi(h^(k)), the law kernel K-tilde (section 2): the conditional mean of K_emp given the post-activations,
  so E[K_law] = E[K_emp] exactly (identity 2.1) with a smaller variance.  K^(0) = ``kernel.input_kernel``.

Sampling paths.  ``method="reduced"`` (default) never forms a weight matrix: given Phi (n x P), the rows of
W Phi + b 1^T are iid N(0, Sigma-hat), Sigma-hat = sigma_w2 Phi^T Phi / n + sigma_b2 J (the idea of
`resprop.numeric.engine.simulate`), drawn as G R with G an n x P standard normal matrix and R^T R = Sigma-hat; the
read-in rows likewise with K^(0).  R is the symmetric-eigenvalue factor diag(sqrt(max(w, 0))) V^T of the P x P
matrix (exact for a singular Sigma-hat such as collinear inputs or dead ReLUs; ~100x cheaper than simulate's QR of
the n x P matrix at n = 1024), so one sample costs O(n P^2) per layer.  ``method="dense"`` draws W_in, b_in,
every W^(l) and b^(l) explicitly (O(n^2 P) per layer; for checking the reduction, ``width`` <= DENSE_MAX_WIDTH).

Randomness.  Sample i of a run seeded by ``seed`` (an integer or a SeedSequence S) draws from its own Generator,
seeded by SeedSequence(S.entropy, spawn_key=S.spawn_key + (i,)) -- the i-th child of S.  Samples are simulated in
chunks of ``chunk_size`` (memory only): the results do not depend on ``chunk_size`` (the arithmetic of a sample
is the same in every chunk; tests/test_fluctuation_mc.py checks bit-identity), and the first m samples of a run
are the m samples of a run with ``samples=m``.  The reduced and dense paths consume different draws.

Campaign (section 7.1).  :func:`width_statistics` turns one width's samples into R_n = n Cov[K-hat_ab, K-hat_cd]
per quadruple (a, b, c, d) (the sample covariance; its standard error by a delete-one-block jackknife over 40
contiguous blocks, `mc_estimators.jackknife`) and the mean shift m_n = n (mean K_law - K^(L)) with K^(L) =
``resprop.kernel`` (standard error n std(K_law) / sqrt(S)).  :func:`fluctuation_campaign` runs it at every width,
each width seeded by SeedSequence([seed, width]), and extrapolates each series to n -> infinity with
`resprop.numeric.engine.width_extrapolation.extrapolate` (WLS in 1/n, the quadratic model when the linear one's
chi^2 p-value is < 0.01, and the systematic |X_inf(a/n) - X_inf(a/n + b/n^2)| when both are acceptable).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import sympy as sp
from scipy.special import erf, expit, ndtr

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.width_extrapolation import WidthExtrapolation, extrapolate

__all__ = ["simulate_finite_width", "width_statistics", "fluctuation_campaign", "activation_function",
           "FiniteWidthKernels", "WidthStatistics", "FluctuationCampaign", "WidthExtrapolation", "METHODS", "WIDTHS",
           "JACKKNIFE_BLOCKS"]

Activation = Callable[[np.ndarray], np.ndarray]

METHODS = ("reduced", "dense")
#: the campaign's default widths (fixed depth, growing width)
WIDTHS = (64, 128, 256, 512, 1024)
#: contiguous blocks of the delete-one-block jackknife of R_n
JACKKNIFE_BLOCKS = 40
#: limits: depth as resprop.kernel; width and samples so that one sample's arrays and the results stay allocatable
MAX_DEPTH = 10**6
MAX_WIDTH = 10**7
MAX_SAMPLES = 10**9
#: the dense path draws an n x n matrix per sample and layer
DENSE_MAX_WIDTH = 4096
#: the result arrays (K_emp, K_law: samples x P x P float64) may not exceed this
MAX_RESULT_BYTES = 4 * 2**30
#: the automatic chunk size aims at about this many bytes per chunk work array
_CHUNK_BYTES = 2**24
#: the inputs named when the simulated kernels leave the float64 range
_RANGE_NAMES = "X, sigma_w2, sigma_b2, gamma, branch_scale, depth"


# --------------------------------------------------------------------------------------------- the activation
def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def _linear(x: np.ndarray) -> np.ndarray:
    return np.array(x, dtype=float, copy=True)


def _gelu(x: np.ndarray) -> np.ndarray:
    return x * ndtr(x)


def _silu(x: np.ndarray) -> np.ndarray:
    return x * expit(x)


#: fast NumPy forms of the built-in names (the same functions as their SymPy expressions in
#: resprop.derive.activations.BUILTIN_EXPRESSIONS, to round-off)
_NAMED: dict[str, Activation] = {"erf": erf, "tanh": np.tanh, "relu": _relu, "linear": _linear, "gelu": _gelu,
                                 "silu": _silu}


def _lambdified(expr: sp.Expr) -> Activation:
    from resprop.derive.activations import x as X

    raw = sp.lambdify(X, expr, modules=["scipy", "numpy"])

    def fn(z: np.ndarray) -> np.ndarray:
        out = np.asarray(raw(z), dtype=float)
        return out if out.shape == np.shape(z) else np.broadcast_to(out, np.shape(z)).copy()

    return fn


def activation_function(activation) -> Activation:
    """phi as a vectorised NumPy function for anything ``resprop.kernel`` accepts: a built-in name (erf, tanh, relu,
    gelu, silu, linear) or a SymPy expression in x (text or expression).  An expression is checked by
    `activation_check.check_activation` (ParameterError naming ``activation``); a smooth one is compiled by
    `dual_tables.activation` (which also evaluates overflowing forms such as log(1 + exp(x)) by their series at
    +-inf), a piecewise one (abs, Max, sign, floor, Piecewise) by ``sympy.lambdify`` of its Piecewise form."""
    if isinstance(activation, str) and activation.strip() in _NAMED:
        return _NAMED[activation.strip()]
    if not isinstance(activation, (str, sp.Basic)):
        raise V.ParameterError("activation", f"must be a name ({', '.join(_NAMED)}) or a SymPy expression in x, "
                                             f"got {activation!r}")
    from resprop.numeric.engine.activation_check import check_activation

    checked = check_activation(activation)
    if checked.relu:
        return _relu
    if checked.piecewise:
        return _lambdified(checked.pw)
    from resprop.numeric.engine import dual_tables

    try:
        return dual_tables.activation(checked.expr).phi
    except V.ParameterError:  # e.g. too oscillatory for the tables, yet a closed form for resprop.kernel
        return _lambdified(checked.expr)


# --------------------------------------------------------------------------------------------- validation
@dataclass(frozen=True)
class _Net:
    X: np.ndarray
    K0: np.ndarray
    phi: Activation
    depth: int
    width: int
    sw: float
    sb: float
    gamma: float
    lam: np.ndarray


def _check_int(name: str, value, minimum: int, maximum: int) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise V.ParameterError(name, f"must be an integer >= {minimum}, got {value!r}")
    return V.integer(name, value, minimum, maximum)


def _net(X, activation, depth, width, sigma_w2, sigma_b2, gamma, branch_scale) -> _Net:
    from resprop.numeric.engine.inputs import check_inputs
    from resprop.numeric.engine.kernel import branch_scales, input_kernel

    X = check_inputs(X, check_memory=False)
    depth = _check_int("depth", depth, 0, MAX_DEPTH)
    width = _check_int("width", width, 1, MAX_WIDTH)
    sw = V.scalar("sigma_w2", sigma_w2, V.positive)
    sb = V.scalar("sigma_b2", sigma_b2, V.nonnegative)
    g = V.scalar("gamma", gamma, V.real)
    lam = branch_scales(branch_scale, depth)
    with np.errstate(all="ignore"):
        K0 = input_kernel(X, sw, sb)
    if not np.all(np.isfinite(K0)):
        raise V.ParameterError("X, sigma_w2", "K^(0) = sigma_w2 X X^T / d_in + sigma_b2 is not finite in float64")
    if np.any(np.diagonal(K0) <= 0):
        raise V.ParameterError("X", "every input needs K^(0)_aa > 0 (a zero input with sigma_b2 = 0 has no "
                                    "correlation)")
    return _Net(X=X, K0=K0, phi=activation_function(activation), depth=depth, width=width, sw=sw, sb=sb, gamma=g,
                lam=lam)


def _seed_sequence(seed) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    return np.random.SeedSequence(_check_int("seed", seed, 0, 2**128 - 1))


def _sample_rngs(ss: np.random.SeedSequence, start: int, stop: int) -> list[np.random.Generator]:
    """The Generators of samples start..stop-1: sample i uses the i-th child of ``ss`` (as ``ss.spawn`` numbers
    them, without changing ``ss``)."""
    return [np.random.default_rng(np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (i,),
                                                         pool_size=ss.pool_size))
            for i in range(start, stop)]


# --------------------------------------------------------------------------------------------- sampling
def _gram(a: np.ndarray) -> np.ndarray:
    """a^T a over the neuron axis of a stack (S, n, P), symmetrised -> (S, P, P)."""
    g = np.matmul(a.swapaxes(-1, -2), a)
    return 0.5 * (g + g.swapaxes(-1, -2))


def _factor(S: np.ndarray) -> np.ndarray:
    """R (..., P, P) with R^T R = S for symmetric positive semi-definite S (round-off negative eigenvalues -> 0)."""
    w, vec = np.linalg.eigh(S)
    return np.sqrt(np.clip(w, 0.0, None))[..., :, None] * vec.swapaxes(-1, -2)


def _draw(rngs: list[np.random.Generator], out: np.ndarray) -> np.ndarray:
    for rng, o in zip(rngs, out):
        rng.standard_normal(out=o)
    return out


def _chunk_reduced(net: _Net, rngs: list[np.random.Generator]) -> tuple[np.ndarray, np.ndarray]:
    m, n, P = len(rngs), net.width, net.X.shape[0]
    G = np.empty((m, n, P))
    h = _draw(rngs, G) @ _factor(net.K0)
    K_law = np.broadcast_to(net.K0, (m, P, P)).copy()
    g2 = net.gamma * net.gamma
    for lam in net.lam:
        phi = net.phi(h)
        Sigma = net.sw / n * _gram(phi) + net.sb
        K_law *= g2
        K_law += lam * lam * Sigma
        xi = _draw(rngs, G) @ _factor(Sigma)
        h *= net.gamma
        h += lam * xi
    return _gram(h) / n, K_law


def _chunk_dense(net: _Net, rngs: list[np.random.Generator]) -> tuple[np.ndarray, np.ndarray]:
    m, n, (P, d) = len(rngs), net.width, net.X.shape
    sw, sb = math.sqrt(net.sw), math.sqrt(net.sb)
    W_in = np.stack([r.standard_normal((n, d)) for r in rngs]) * (sw / math.sqrt(d))
    b_in = np.stack([r.standard_normal((n, 1)) for r in rngs]) * sb
    h = W_in @ net.X.T + b_in
    K_law = np.broadcast_to(net.K0, (m, P, P)).copy()
    g2 = net.gamma * net.gamma
    W = np.empty((m, n, n))
    b = np.empty((m, n, 1))
    for lam in net.lam:
        phi = net.phi(h)
        K_law *= g2
        K_law += lam * lam * (net.sw / n * _gram(phi) + net.sb)
        for r, Wi, bi in zip(rngs, W, b):
            r.standard_normal(out=Wi)
            r.standard_normal(out=bi)
        xi = (W @ phi) * (sw / math.sqrt(n)) + b * sb
        h *= net.gamma
        h += lam * xi
    return _gram(h) / n, K_law


_PATHS = {"reduced": _chunk_reduced, "dense": _chunk_dense}


def _auto_chunk(net: _Net, method: str) -> int:
    n, (P, d) = net.width, net.X.shape
    per_sample = 8 * n * (max(n, d, P) if method == "dense" else P)
    return max(1, _CHUNK_BYTES // per_sample)


@dataclass(frozen=True)
class FiniteWidthKernels(ResultRecord):
    """:func:`simulate_finite_width`: per sample the last layer's empirical kernel ``K_emp`` = h^T h / n and law
    kernel ``K_law`` (both (samples, P, P)), and the ``input_kernel`` K^(0) (P, P)."""

    width: int
    depth: int
    method: str
    input_kernel: np.ndarray
    K_emp: np.ndarray
    K_law: np.ndarray

    @property
    def samples(self) -> int:
        return int(self.K_emp.shape[0])


def simulate_finite_width(X, activation, depth: int, width: int, sigma_w2, sigma_b2, gamma=1.0, branch_scale=1.0,
                          *, samples: int, seed, method: str = "reduced",
                          chunk_size: int | None = None) -> FiniteWidthKernels:
    """Simulate ``samples`` independent networks of width ``width`` of ``resprop.kernel``'s architecture (the module
    docstring) and return the last layer's empirical and law kernels (:class:`FiniteWidthKernels`).

    Parameters as ``resprop.kernel(X, activation, depth, sigma_w2, sigma_b2, gamma, branch_scale)``; ``width`` >= 1
    (every hidden layer); ``samples`` >= 1; ``seed``: an integer >= 0 or a numpy SeedSequence (sample i uses its
    i-th child); ``method``: "reduced" (exact in law, no weight matrices) or "dense" (explicit weights, ``width``
    <= DENSE_MAX_WIDTH); ``chunk_size``: samples simulated at once (memory only: the results do not depend on it;
    None chooses about 16 MiB per work array).  Raises ParameterError naming the parameter for bad input, and
    naming the inputs when the kernels leave the float64 range.
    """
    net = _net(X, activation, depth, width, sigma_w2, sigma_b2, gamma, branch_scale)
    samples = _check_int("samples", samples, 1, MAX_SAMPLES)
    if not isinstance(method, str) or method not in METHODS:
        raise V.ParameterError("method", f"must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    if method == "dense" and net.width > DENSE_MAX_WIDTH:
        raise V.ParameterError("width", f"the dense path draws width^2 weights per sample and layer: width must be "
                                        f"<= {DENSE_MAX_WIDTH} there, got {net.width}; use method='reduced'")
    P = net.X.shape[0]
    need = 2 * samples * P * P * 8
    if need > MAX_RESULT_BYTES:
        raise V.ParameterError("samples", f"the results (2 x samples x P x P float64) would need "
                               f"{need / 2**30:.3g} GiB (limit {MAX_RESULT_BYTES / 2**30:g} GiB); use fewer samples")
    size = _auto_chunk(net, method) if chunk_size is None else _check_int("chunk_size", chunk_size, 1, MAX_SAMPLES)
    size = min(size, samples)
    ss = _seed_sequence(seed)
    K_emp = np.empty((samples, P, P))
    K_law = np.empty((samples, P, P))
    run = _PATHS[method]
    try:
        with np.errstate(all="ignore"):  # overflow is reported below, naming the inputs
            for start in range(0, samples, size):
                stop = min(start + size, samples)
                K_emp[start:stop], K_law[start:stop] = run(net, _sample_rngs(ss, start, stop))
    except (np.linalg.LinAlgError, OverflowError, FloatingPointError):  # eigh of a non-finite matrix
        K_emp[...] = np.nan
    if not (np.all(np.isfinite(K_emp)) and np.all(np.isfinite(K_law))):
        raise V.ParameterError(_RANGE_NAMES, "the simulated kernels leave the float64 range (overflow); use values "
                                             "of moderate size")
    return FiniteWidthKernels(width=net.width, depth=net.depth, method=method, input_kernel=net.K0, K_emp=K_emp,
                              K_law=K_law)


# --------------------------------------------------------------------------------------------- estimators
def _quadruples(quadruples, P: int) -> np.ndarray:
    """(M, 4) int array of indices in [0, P); None: the variances (a, b, a, b) of the upper triangle."""
    if quadruples is None:
        a, b = np.triu_indices(P)
        return np.stack([a, b, a, b], axis=1)
    try:
        q = np.asarray(quadruples)
    except (TypeError, ValueError):
        q = np.asarray([[None]])
    if q.dtype.kind == "f" and q.size and np.all(np.isfinite(q)) and np.all(q == np.round(q)):
        q = q.astype(np.int64)
    if q.ndim == 1 and q.size == 4:
        q = q[None]
    if q.dtype.kind not in "iu" or q.ndim != 2 or q.shape[1] != 4 or q.shape[0] < 1:
        raise V.ParameterError("quadruples", f"must be an (M, 4) integer array of input indices (a, b, c, d), M >= 1, "
                                             f"got {V._brief(quadruples)}")
    if np.any(q < 0) or np.any(q >= P):
        raise V.ParameterError("quadruples", f"indices must lie in [0, P - 1] = [0, {P - 1}]")
    return q.astype(np.int64)


@dataclass(frozen=True)
class WidthStatistics(ResultRecord):
    """:func:`width_statistics` at one width: ``R`` (M,) = n x the sample covariance of K-hat_ab and K-hat_cd per
    quadruple and its jackknife standard error ``R_se``; ``mean_shift`` (P, P) = n (mean K_law - K^(L)) and its
    standard error ``mean_shift_se``; the mean and its standard error of K_emp and K_law."""

    width: int
    samples: int
    quadruples: np.ndarray
    R: np.ndarray
    R_se: np.ndarray
    mean_shift: np.ndarray
    mean_shift_se: np.ndarray
    mean_K_emp: np.ndarray
    mean_K_emp_se: np.ndarray
    mean_K_law: np.ndarray
    mean_K_law_se: np.ndarray


def width_statistics(sim: FiniteWidthKernels, nngp, quadruples=None, *,
                     blocks: int = JACKKNIFE_BLOCKS) -> WidthStatistics:
    """R_n per quadruple (jackknife over ``blocks`` contiguous blocks of samples) and the mean shift against the
    infinite-width kernel ``nngp`` (P, P) from one :func:`simulate_finite_width` result (needs >= 2 samples)."""
    from resprop.numeric.engine.mc_estimators import jackknife

    if not isinstance(sim, FiniteWidthKernels):
        raise V.ParameterError("sim", f"must be a FiniteWidthKernels result, got {type(sim).__name__}")
    S, P = sim.K_emp.shape[0], sim.K_emp.shape[1]
    if S < 2:
        raise V.ParameterError("samples", f"need at least 2 samples for a covariance, got {S}")
    K = V.real("nngp", nngp)
    if K.shape != (P, P):
        raise V.ParameterError("nngp", f"must have shape (P, P) = ({P}, {P}), got {K.shape}")
    q = _quadruples(quadruples, P)
    blocks = _check_int("blocks", blocks, 2, 10**6)
    n = sim.width
    x = sim.K_emp[:, q[:, 0], q[:, 1]]
    y = sim.K_emp[:, q[:, 2], q[:, 3]]
    cx, cy = x - x.mean(axis=0), y - y.mean(axis=0)  # centred: the statistic is unchanged, round-off is not

    def cov(mx, my, mxy):
        return n * (mxy - mx * my) * (S / (S - 1))

    root = math.sqrt(S)
    with np.errstate(all="ignore"):  # overflow (kernels near the float64 limit) is reported below
        R, R_se = jackknife(cov, [cx, cy, cx * cy], n_batches=blocks)
        mean_emp, sd_emp = sim.K_emp.mean(axis=0), sim.K_emp.std(axis=0, ddof=1)
        mean_law, sd_law = sim.K_law.mean(axis=0), sim.K_law.std(axis=0, ddof=1)
        constant = np.all(sim.K_law == sim.K_law[0], axis=0)  # depth 0 or branch_scale 0: K_law = gamma^(2L) K^(0)
        mean_law, sd_law = np.where(constant, sim.K_law[0], mean_law), np.where(constant, 0.0, sd_law)
        out = WidthStatistics(width=n, samples=S, quadruples=q, R=np.asarray(R), R_se=np.asarray(R_se),
                              mean_shift=n * (mean_law - K), mean_shift_se=n * sd_law / root,
                              mean_K_emp=mean_emp, mean_K_emp_se=sd_emp / root, mean_K_law=mean_law,
                              mean_K_law_se=sd_law / root)
    if not all(np.all(np.isfinite(getattr(out, f))) for f in ("R", "R_se", "mean_shift", "mean_shift_se",
                                                              "mean_K_emp_se", "mean_K_law_se")):
        raise V.ParameterError(_RANGE_NAMES + ", nngp", "the covariances or mean shifts of these kernels leave "
                                                        "the float64 range (overflow); use values of moderate size")
    return out


@dataclass(frozen=True)
class FluctuationCampaign(ResultRecord):
    """:func:`fluctuation_campaign`.  Per width (leading axis W, in the order of ``widths``) the statistics of
    :func:`width_statistics`: ``R_n`` (W, M) and ``R_n_se``, ``mean_shift_n`` (W, P, P) and ``mean_shift_n_se``,
    ``mean_K_emp_n`` (W, P, P) and ``mean_K_emp_n_se``; the infinite-width ``nngp`` K^(L); and the width
    extrapolations: ``covariance`` one :class:`WidthExtrapolation` of R_n per quadruple (the limit of
    n Cov[K-hat_ab, K-hat_cd], to compare with the engine's ``covariance``) and ``mean_shift`` one per upper-triangle
    pair (``mean_shift_pairs``, to compare with ``.mean_shift[a, b]``), None where K_law is deterministic (depth 0,
    or branch_scale 0: K_law = gamma^(2L) K^(0) and the shift is exactly 0)."""

    widths: tuple
    samples: tuple
    quadruples: np.ndarray
    nngp: np.ndarray
    R_n: np.ndarray
    R_n_se: np.ndarray
    mean_shift_n: np.ndarray
    mean_shift_n_se: np.ndarray
    mean_K_emp_n: np.ndarray
    mean_K_emp_n_se: np.ndarray
    covariance: tuple
    mean_shift_pairs: np.ndarray
    mean_shift: tuple

    @property
    def R_inf(self) -> np.ndarray:
        """The extrapolated n Cov per quadruple, (M,)."""
        return np.array([e.value for e in self.covariance])

    @property
    def R_inf_se(self) -> np.ndarray:
        return np.array([e.se for e in self.covariance])


def _per_width_samples(samples, count: int) -> tuple[int, ...]:
    if isinstance(samples, (list, tuple, np.ndarray)):
        values = list(np.asarray(samples, dtype=object).ravel()) if np.ndim(samples) == 1 else None
        if values is None or len(values) != count:
            raise V.ParameterError("samples", f"must be an integer or one integer per width ({count}), got "
                                              f"{V._brief(samples)}")
        return tuple(_check_int("samples", s, JACKKNIFE_BLOCKS, MAX_SAMPLES) for s in values)
    return (_check_int("samples", samples, JACKKNIFE_BLOCKS, MAX_SAMPLES),) * count


def fluctuation_campaign(X, activation, depth: int, sigma_w2, sigma_b2, gamma=1.0, branch_scale=1.0, *,
                         widths=WIDTHS, samples, seed, quadruples=None, method: str = "reduced",
                         chunk_size: int | None = None, progress: Callable[[str], None] | None = None
                         ) -> FluctuationCampaign:
    """The fixed-depth, growing-width campaign of docs/design/fluctuations-engine.md section 7.1 for one
    configuration: at each width n of ``widths`` (at least 3 distinct), ``samples`` networks (an integer >= 40, or
    one per width) seeded by SeedSequence([seed, n]); R_n and the mean shift by :func:`width_statistics`; each
    series extrapolated by `width_extrapolation.extrapolate`.  ``quadruples``: (M, 4) indices (a, b, c, d), default
    the variances (a, b, a, b), a <= b.  K^(L) is ``resprop.kernel(X, activation, depth, sigma_w2, sigma_b2, gamma,
    branch_scale)``.  ``progress``: called with one line per width."""
    from resprop.numeric.engine.kernel import kernel

    if isinstance(widths, (str, bytes)) or np.ndim(widths) != 1:
        raise V.ParameterError("widths", f"must be a sequence of at least 3 distinct widths, got {V._brief(widths)}")
    ws = tuple(_check_int("widths", w, 1, MAX_WIDTH) for w in np.asarray(widths, dtype=object).ravel())
    if len(set(ws)) < 3 or len(set(ws)) != len(ws):
        raise V.ParameterError("widths", f"must be at least 3 distinct widths, got {ws}")
    counts = _per_width_samples(samples, len(ws))
    seed = _check_int("seed", seed, 0, 2**63 - 1)
    net = _net(X, activation, depth, ws[0], sigma_w2, sigma_b2, gamma, branch_scale)  # validates before the work
    q = _quadruples(quadruples, net.X.shape[0])
    K = kernel(net.X, activation, net.depth, net.sw, net.sb, net.gamma, branch_scale)
    t0 = time.perf_counter()
    stats: list[WidthStatistics] = []
    for n, S in zip(ws, counts):
        sim = simulate_finite_width(net.X, activation, net.depth, n, net.sw, net.sb, net.gamma, branch_scale, samples=S,
                                    seed=np.random.SeedSequence([seed, n]), method=method, chunk_size=chunk_size)
        stats.append(width_statistics(sim, K, q))
        if progress is not None:
            progress(f"width {n}: {S} samples, {time.perf_counter() - t0:.1f} s")
    R, R_se = np.array([s.R for s in stats]), np.array([s.R_se for s in stats])
    shift, shift_se = np.array([s.mean_shift for s in stats]), np.array([s.mean_shift_se for s in stats])
    covariance = tuple(extrapolate(ws, R[:, j], R_se[:, j]) for j in range(q.shape[0]))
    a, b = np.triu_indices(net.X.shape[0])
    mean_shift = tuple(None if np.any(shift_se[:, i, j] == 0) else extrapolate(ws, shift[:, i, j], shift_se[:, i, j])
                       for i, j in zip(a, b))
    return FluctuationCampaign(widths=ws, samples=counts, quadruples=q, nngp=K, R_n=R, R_n_se=R_se,
                               mean_shift_n=shift, mean_shift_n_se=shift_se,
                               mean_K_emp_n=np.array([s.mean_K_emp for s in stats]),
                               mean_K_emp_n_se=np.array([s.mean_K_emp_se for s in stats]),
                               covariance=covariance, mean_shift_pairs=np.stack([a, b], axis=1),
                               mean_shift=mean_shift)
