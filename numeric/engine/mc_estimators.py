"""Estimators with standard errors for the Monte Carlo samples of :mod:`resprop.numeric.engine.monte_carlo`.

Error model
-----------
Samples (independent network initialisations) are iid.

* Plain per-sample statistics (means of a per-sample quantity, e.g. E[G],
  E[act_sq_l], h_total from the per-sample sum over layers) use the sample
  standard error ``std(ddof=1) / sqrt(N)``.
* Nonlinear functions of moments (variances, covariances, correlations,
  ratios such as the normalised four-point vertex) use a **delete-one-batch
  jackknife over B = min(50, N) contiguous batches** of near-equal size: the
  statistic is recomputed on the moment means with one batch left out, and
  ``se^2 = (B-1)/B * sum_b (f_b - mean_b f_b)^2``.  Point estimates are the
  plain plug-in values on all samples (sample variances with the N/(N-1)
  factor).  Data are centred by their sample mean before forming moments,
  which leaves every reported statistic unchanged but avoids cancellation.

No theory formulas live here; these functions only measure.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord

if TYPE_CHECKING:  # pragma: no cover
    from resprop.numeric.engine.monte_carlo import LogGaussianSamples, ResidualMLPSamples

__all__ = [
    "mean_se",
    "jackknife",
    "variance_se",
    "g_moments",
    "hypoactivation",
    "conjecture5",
    "output_moments",
    "four_point_vertex",
    "log_norm_moments",
    "block_correlators",
    "GMoments",
    "Hypoactivation",
    "Conjecture5",
    "OutputMoments",
    "FourPointVertex",
    "LogNormMoments",
    "BlockCorrelators",
]

N_BATCHES = 50


# ---------------------------------------------------------------------------
# Result records (attribute access, res["field"], .to_dict(); see resprop.numeric.engine.results)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GMoments(ResultRecord):
    """:func:`g_moments`: E[G], Var[G] and their standard errors."""

    mean_G: float
    mean_G_se: float
    var_G: float
    var_G_se: float


@dataclass(frozen=True)
class Hypoactivation(ResultRecord):
    """:func:`hypoactivation`: per-layer h (l = 0..d-1), h_total and C_hat, each with its standard error."""

    h: np.ndarray
    h_se: np.ndarray
    h_total: float
    h_total_se: float
    C_hat: float
    C_hat_se: float


@dataclass(frozen=True)
class Conjecture5(ResultRecord):
    """:func:`conjecture5`: per-layer mean/var of act_sq, their layer averages, and per lag k the covariances
    ``cov[k]``, ``cov_se[k]`` (arrays over layers) and ``cov_avg[k]``, ``cov_avg_se[k]`` (floats)."""

    layers: np.ndarray
    lags: tuple[int, ...]
    mean: np.ndarray
    mean_se: np.ndarray
    var: np.ndarray
    var_se: np.ndarray
    mean_avg: float
    mean_avg_se: float
    var_avg: float
    var_avg_se: float
    cov: dict[int, np.ndarray]
    cov_se: dict[int, np.ndarray]
    cov_avg: dict[int, float]
    cov_avg_se: dict[int, float]


@dataclass(frozen=True)
class OutputMoments(ResultRecord):
    """:func:`output_moments`: mean, variance and correlation of the squared outputs, with standard errors."""

    mean_sq: float
    mean_sq_se: float
    var_sq: float
    var_sq_se: float
    corr_sq: float
    corr_sq_se: float
    n_out: int


@dataclass(frozen=True)
class FourPointVertex(ResultRecord):
    """:func:`four_point_vertex`: per layer l = 1..L the kernel K, V/(nK^2) and V, each with standard errors."""

    K: np.ndarray
    K_se: np.ndarray
    V_over_nK2: np.ndarray
    V_over_nK2_se: np.ndarray
    V: np.ndarray
    V_se: np.ndarray


@dataclass(frozen=True)
class LogNormMoments(ResultRecord):
    """:func:`log_norm_moments`: per-layer mean and variance of ln S2, with standard errors."""

    mean: np.ndarray
    mean_se: np.ndarray
    var: np.ndarray
    var_se: np.ndarray


@dataclass(frozen=True)
class BlockCorrelators(ResultRecord):
    """:func:`block_correlators`: per-block means of G_RR, G_Rz, G_zz, with standard errors."""

    G_RR: np.ndarray
    G_RR_se: np.ndarray
    G_Rz: np.ndarray
    G_Rz_se: np.ndarray
    G_zz: np.ndarray
    G_zz_se: np.ndarray


# ---------------------------------------------------------------------------
# Generic helpers
# ---------------------------------------------------------------------------


def mean_se(a, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sample mean along ``axis`` and its standard error std(ddof=1)/sqrt(N)."""
    a = np.asarray(a, dtype=np.float64)
    N = a.shape[axis]
    if N < 2:
        raise V.ParameterError("samples", f"need at least 2 samples for a standard error, got {N}")
    return a.mean(axis=axis), a.std(axis=axis, ddof=1) / math.sqrt(N)


def jackknife(stat: Callable[..., np.ndarray], arrays: Sequence[np.ndarray],
              n_batches: int = N_BATCHES) -> tuple[np.ndarray, np.ndarray]:
    """Plug-in estimate ``stat(*means)`` and its delete-one-batch jackknife standard error.

    ``arrays`` are per-sample quantities of shape (N, ...) (same N); ``stat`` receives their
    means (shape (...)) -- or, for the replicates, leave-one-batch-out means with a leading
    batch axis (B, ...) -- and must broadcast over that leading axis.
    """
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    N = arrays[0].shape[0]
    B = min(n_batches, N)
    if B < 2:
        raise V.ParameterError("samples", f"need at least 2 samples for a jackknife, got {N}")
    edges = np.linspace(0, N, B + 1).round().astype(int)
    counts = np.diff(edges).astype(np.float64)
    full_means, loo_means = [], []
    for a in arrays:
        sums = np.add.reduceat(a, edges[:-1], axis=0)
        total = sums.sum(axis=0)
        full_means.append(total / N)
        loo_means.append((total - sums) / (N - counts).reshape((B,) + (1,) * (a.ndim - 1)))
    estimate = np.asarray(stat(*full_means), dtype=np.float64)
    reps = np.asarray(stat(*loo_means), dtype=np.float64)
    se = np.sqrt((B - 1) / B * ((reps - reps.mean(axis=0)) ** 2).sum(axis=0))
    return estimate, se


def _variance(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sample variance (ddof=1) along axis 0 with jackknife SE."""
    N = x.shape[0]
    c = x - x.mean(axis=0)
    return jackknife(lambda m1, m2: (m2 - m1**2) * (N / (N - 1)), [c, c * c])


def variance_se(x) -> tuple[np.ndarray, np.ndarray]:
    """Sample variance (ddof=1) along axis 0 and its jackknife standard error."""
    return _variance(np.asarray(x, dtype=np.float64))


def _covariance(x: np.ndarray, y: np.ndarray, reduce: Callable | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sample covariance (ddof=1) of x and y along axis 0, optionally reduced (e.g. averaged) over the last axis."""
    N = x.shape[0]
    cx, cy = x - x.mean(axis=0), y - y.mean(axis=0)

    def stat(mx, my, mxy):
        cov = (mxy - mx * my) * (N / (N - 1))
        return cov if reduce is None else reduce(cov)

    return jackknife(stat, [cx, cy, cx * cy])


def _finite(name: str, a: np.ndarray) -> None:
    if not np.all(np.isfinite(a)):
        raise V.ParameterError(name, "contains non-finite values (a network died: alpha_l = 0 with all ReLUs off); "
                               "drop those samples or increase n")


# ---------------------------------------------------------------------------
# Li-Nica-Roy ResNets
# ---------------------------------------------------------------------------


def g_moments(s: LogGaussianSamples) -> GMoments:
    """Mean and variance of G (Theorem 1 eq. (7), Theorem 4 eq. (9), Prop. 6 eq. (20)-(21)).

    mean_G_se is the sample SE; var_G_se is the jackknife SE (module docstring).
    """
    _finite("s.G", s.G)
    mean, mean_se_ = mean_se(s.G)
    var, var_se = _variance(s.G)
    return GMoments(mean_G=float(mean), mean_G_se=float(mean_se_), var_G=float(var), var_G_se=float(var_se))


def hypoactivation(s: LogGaussianSamples) -> Hypoactivation:
    """Hypoactivation h_l = E||phi(zhat^l)||^2 - 1/2 (eq. (2)) for l = 0..d-1, h_total and C_hat.

    The layers are those feeding the d residual steps (act_sq columns l = 0..d-1;
    h_0 = 0 exactly since z^0 is Gaussian).  ``h_total = sum_l h_l`` with the SE of the
    per-sample sum; ``C_hat = h_total n / d`` estimates Prop. 2's C_{alpha,lambda}.
    """
    _finite("s.act_sq", s.act_sq)
    h, h_se = mean_se(s.act_sq)
    tot, tot_se = mean_se(s.act_sq.sum(axis=1) - 0.5 * s.depth)
    k = s.width / s.depth
    return Hypoactivation(h=h - 0.5, h_se=h_se, h_total=float(tot), h_total_se=float(tot_se),
                          C_hat=float(tot * k), C_hat_se=float(tot_se * k))


def conjecture5(s: LogGaussianSamples, layers=None, lags: Sequence[int] = (1, 2)) -> Conjecture5:
    """Measured quantities of Conjecture 5, eqs. (11)-(13) / Fig. 4, with standard errors.

    Per layer l = 0..d-1 (act_sq_l = ||phi(zhat^l)||^2):

    * ``mean[l]`` = E act_sq_l (sample SE), ``var[l]`` = Var act_sq_l (jackknife SE);
    * ``cov[k][l]`` = Cov(act_sq_l, act_sq_{l-k}) for each lag k (jackknife SE; NaN for l < k).

    ``*_avg`` are the same quantities averaged over ``layers`` (default: the second half,
    ``range(d // 2, d)``, where the chain is near stationary; for lag k only layers >= k
    enter).  The averaged mean is a per-sample statistic (sample SE); the averaged
    variance and covariances are jackknifed as a whole.  Uniform-sphere references
    (Lemma 10): E = 1/2, Var = 3/(4(n+2)).
    """
    A = s.act_sq
    _finite("s.act_sq", A)
    d = s.depth
    if layers is None:
        layers = np.arange(d // 2, d)
    layers = np.unique(np.asarray(layers, dtype=int))
    if layers.size == 0 or layers.min() < 0 or layers.max() >= d:
        raise V.ParameterError("layers", f"must be layer indices in [0, {d - 1}], got {layers.tolist()}")
    lags = tuple(int(k) for k in lags)
    if any(k < 1 or k >= d for k in lags):
        raise V.ParameterError("lags", f"must be integers in [1, {d - 1}], got {lags}")

    mean, mean_se_ = mean_se(A)
    var, var_se = _variance(A)
    mean_avg, mean_avg_se = mean_se(A[:, layers].mean(axis=1))
    var_avg, var_avg_se = _covariance(A[:, layers], A[:, layers], reduce=lambda v: v.mean(axis=-1))
    cov_d: dict[int, np.ndarray] = {}
    cov_se_d: dict[int, np.ndarray] = {}
    cov_avg_d: dict[int, float] = {}
    cov_avg_se_d: dict[int, float] = {}
    avg: np.ndarray | float
    avg_se: np.ndarray | float
    for k in lags:
        cov = np.full(d, np.nan)
        cov_se = np.full(d, np.nan)
        cov[k:], cov_se[k:] = _covariance(A[:, k:], A[:, :-k])
        sel = layers[layers >= k]
        if sel.size:
            avg, avg_se = _covariance(A[:, sel], A[:, sel - k], reduce=lambda v: v.mean(axis=-1))
        else:
            avg, avg_se = np.nan, np.nan
        cov_d[k], cov_se_d[k] = cov, cov_se
        cov_avg_d[k], cov_avg_se_d[k] = float(avg), float(avg_se)
    return Conjecture5(layers=layers, lags=lags, mean=mean, mean_se=mean_se_, var=var, var_se=var_se,
                       mean_avg=float(mean_avg), mean_avg_se=float(mean_avg_se),
                       var_avg=float(var_avg), var_avg_se=float(var_avg_se),
                       cov=cov_d, cov_se=cov_se_d, cov_avg=cov_avg_d, cov_avg_se=cov_avg_se_d)


def output_moments(s: LogGaussianSamples) -> OutputMoments:
    """E[(z_i^out)^2], Var[(z_i^out)^2] and Corr((z_i^out)^2, (z_j^out)^2), i != j (section 3, Fig. 3).

    Pooled over the (exchangeable) output neurons: with q_i = (z_i^out)^2 the per-sample
    averages m1 = mean_i q_i, m2 = mean_i q_i^2 and mij = mean_{i != j} q_i q_j enter
    ``Var = E m2 - (E m1)^2`` and ``Corr = (E mij - (E m1)^2) / Var``.  The mean has the
    sample SE; Var and Corr are jackknifed (module docstring).  Requires n_out >= 2.
    """
    if s.z_out is None or s.z_out.shape[1] < 2:
        raise V.ParameterError("n_out", "output_moments needs samples simulated with n_out >= 2")
    _finite("s.z_out", s.z_out)
    q = s.z_out**2
    k = q.shape[1]
    N = q.shape[0]
    m1 = q.mean(axis=1)
    m2 = (q * q).mean(axis=1)
    mij = (q.sum(axis=1) ** 2 - (q * q).sum(axis=1)) / (k * (k - 1))
    mean, mean_se_ = mean_se(m1)
    # the variance of q_i about its mean; the shift c keeps the moments O(Var) without changing the statistics
    c = mean
    var, var_se = jackknife(lambda a, b: (b - a * a) * (N / (N - 1)), [m1 - c, m2 - 2 * c * m1 + c * c])

    def corr(a, b, ab):
        return (ab - a * a) / (b - a * a)

    cr, cr_se = jackknife(corr, [m1 - c, m2 - 2 * c * m1 + c * c, mij - 2 * c * m1 + c * c])
    return OutputMoments(mean_sq=float(mean), mean_sq_se=float(mean_se_), var_sq=float(var), var_sq_se=float(var_se),
                         corr_sq=float(cr), corr_sq_se=float(cr_se), n_out=int(k))


# ---------------------------------------------------------------------------
# PDLT residual MLP
# ---------------------------------------------------------------------------


def four_point_vertex(s: ResidualMLPSamples) -> FourPointVertex:
    """Per layer l = 0..depth (0 the input): kernel K_hat = E[S2] and the normalised four-point vertex (B.22)-(B.23).

    For i != j, ``E[z_i^2 z_j^2] - E[z_i^2] E[z_j^2] = V/n`` (B.23), so
    ``V/(n K^2) = (E[P] - E[S2]^2) / E[S2]^2`` with P the off-diagonal pair average.
    E[S2]^2 is estimated without bias as mean(S2)^2 - var(S2)/N.  K_hat has the sample SE;
    V/(nK^2) and V_hat = n (E[P] - E[S2]^2) are jackknifed.
    """
    K, K_se = mean_se(s.S2)
    N = s.S2.shape[0]
    c = K  # centring: x = S2 - c, p = P - c^2, so E[P] = c^2 + E p and E[S2] = c + E x
    x, p = s.S2 - c, s.P - c * c

    def k_sq(mx, mxx):
        """Unbiased E[S2]^2: (c + mean x)^2 - Var(x)/N."""
        return (c + mx) ** 2 - (mxx - mx * mx) / (N - 1)

    def connected(mx, mxx, mp):
        return c * c + mp - k_sq(mx, mxx)

    def ratio(mx, mxx, mp):
        return connected(mx, mxx, mp) / k_sq(mx, mxx)

    conn, conn_se = jackknife(connected, [x, x * x, p])
    r, r_se = jackknife(ratio, [x, x * x, p])
    return FourPointVertex(K=K, K_se=K_se, V_over_nK2=r, V_over_nK2_se=r_se, V=s.width * conn,
                           V_se=s.width * conn_se)


def log_norm_moments(s: ResidualMLPSamples) -> LogNormMoments:
    """Per layer mean (sample SE) and variance (jackknife SE) of ln S2 = ln(||z^(l)||^2/n)."""
    x = np.log(s.S2)
    m, m_se = mean_se(x)
    v, v_se = _variance(x)
    return LogNormMoments(mean=m, mean_se=m_se, var=v, var_se=v_se)


def block_correlators(s: ResidualMLPSamples) -> BlockCorrelators:
    """Per residual layer l = 0..depth-1 (the block fed by z^(l)): means (sample SE) of G_RR^(l+1), G_Rz^(l+0.5),
    G_zz^(l) (PDLT B.42-B.43, whose layer labels are these plus one).

    These enter the xi recipe (B.45): (1 - gamma^2) G_zz = xi^2 G_RR + 2 gamma xi G_Rz.
    """
    if s.G_RR is None:
        raise V.ParameterError("record_block", "block_correlators needs samples simulated with record_block=True")
    out: dict[str, np.ndarray] = {}
    for key in ("G_RR", "G_Rz", "G_zz"):
        out[key], out[key + "_se"] = mean_se(getattr(s, key))
    return BlockCorrelators(**out)
