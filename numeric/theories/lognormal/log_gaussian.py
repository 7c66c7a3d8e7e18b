"""Numeric driver for Li, Nica & Roy (2021): theory of G, output moments and the density of ln ||z_out||^2.

Every formula is a generated kernel of this theory's `generated.lognormal` (derived in `derive/theories/lognormal.py`);
this module only validates inputs, sums over layer pairs and convolves densities.

G is the paper's §5 variable: ln(||z^d||^2/n) - sum_l ln(alpha_l^2 + lam_l^2) for an input with
||x||^2 = n_in.  Layers are counted as the d steps l = 1..d; step l reads the direction zhat^{l-1}, so the
interlayer covariance sums over the d(d-1) ordered pairs of steps (Prop. 2 writes 1 < l != l' < d, which
differs by O(1/n), inside the stated O(d/n^2) error).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.signal import fftconvolve

import resprop.numeric.theories.lognormal.generated.lognormal as lg
from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord
from resprop.numeric.engine.validation import ParameterError

__all__ = ["j2bar", "j2bar_odd_part", "cos_theta_k", "interlayer_total", "theory", "theory_layerwise",
           "conjecture5_theory", "output_moments_theory", "log_output_density", "infinite_width_log_density",
           "check_architecture", "LogGaussianTheory", "Conjecture5Theory", "OutputMomentsTheory"]

#: the largest number of residual layers d accepted (the interlayer sums are O(d) arrays)
MAX_LAYERS = 10**7


def check_architecture(width, depth, alpha, lam) -> tuple[int, int, np.ndarray, np.ndarray]:
    """Validate (width n, depth d, alpha, lam); alpha and lam may be scalars or length-d sequences (Prop. 6).
    Returns (n, d, alpha, lam) with alpha and lam as length-d float arrays."""
    n = V.integer("width", width, minimum=2)
    d = V.integer("depth", depth, minimum=1, maximum=MAX_LAYERS)
    a = np.broadcast_to(V.real("alpha", alpha), (d,)) if np.ndim(alpha) == 0 else V.real("alpha", alpha)
    l = np.broadcast_to(V.nonnegative("lam", lam), (d,)) if np.ndim(lam) == 0 else V.nonnegative("lam", lam)
    for name, arr in (("alpha", a), ("lam", l)):
        if arr.shape != (d,):
            raise ParameterError(name, f"must be a scalar or a sequence of length depth = {d}, got shape {arr.shape}")
    V.skip_and_branch(a, l)
    return n, d, np.asarray(a, float), np.asarray(l, float)


def j2bar(theta):
    """J2-bar(theta) of eq. (23), theta in [0, pi]."""
    th = V.real("theta", theta)
    if np.any((th < 0) | (th > np.pi)):
        raise ParameterError("theta", f"must lie in [0, pi], got {th[(th < 0) | (th > np.pi)]}")
    return lg.j2bar(th)


def j2bar_odd_part(theta):
    """J2-bar(theta) - J2-bar(pi - theta) (Lemma 16)."""
    j2bar(theta)  # validation
    return lg.j2bar_odd_part(np.asarray(theta, float))


def cos_theta_k(alpha, lam, k):
    """cos(theta_k) = alpha^k / (alpha^2 + lam^2)^{k/2}; k >= 1 may be an array.  The generated kernel checks
    the domain (lam >= 0, k >= 1, alpha^2 + lam^2 > 0) and raises ParameterError naming the parameter."""
    return lg.cos_theta_k(alpha, lam, k)


def interlayer_total(width: int, depth: int, alpha: float, lam: float) -> float:
    """I_total of eq. (8): sum over lags k of 2 (d - k) (J2(theta_k) - J2(pi - theta_k)) / n (n = width, d = depth)."""
    n, d, a, l = check_architecture(width, depth, V.scalar("alpha", alpha), V.scalar("lam", lam, V.nonnegative))
    alpha, lam = float(a[0]), float(l[0])
    if d < 2:
        return 0.0
    k = np.arange(1, d, dtype=float)
    theta_k = np.arccos(np.clip(cos_theta_k(alpha, lam, k), -1.0, 1.0))
    return float(np.sum(lg.interlayer_cov_term(d, k, lg.j2bar_odd_part(theta_k), n)))


@dataclass(frozen=True)
class LogGaussianTheory(ResultRecord):
    """:func:`theory` and :func:`theory_layerwise`: E[G] (``mean_G``), Var[G] (``var_G``) and their parts for
    width n and depth d.  ``mean_G`` and ``h_total`` are None for a vanilla network without hypo_constant;
    alpha, lam, c, I_total and hypo_constant are None for the layer-dependent form (Prop. 6)."""

    width: int
    depth: int
    balanced: bool
    beta: float
    mean_G: float | None
    var_G: float
    alpha: float | None = None
    lam: float | None = None
    c: float | None = None
    I_total: float | None = None
    h_total: float | None = None
    hypo_constant: float | None = None


def theory(width, depth, alpha, lam, *, balanced: bool = False,
           hypo_constant: float | None = None) -> LogGaussianTheory:
    """E[G], Var[G] of Theorem 1 (vanilla, eq. 7 with Prop. 2) or Theorem 4 (balanced, eq. 9).

    The vanilla mean needs the hypoactivation constant C_{alpha,lambda} (Prop. 2), which the paper
    estimates by Monte Carlo; without it ``mean_G`` is None.
    """
    n, d, a, l = check_architecture(width, depth, alpha, lam)
    balanced = V.flag("balanced", balanced)
    if np.ptp(a) or np.ptp(l):
        return theory_layerwise(n, a, l, balanced=balanced)
    a0, l0 = float(a[0]), float(l[0])
    beta = float(lg.beta(n, d, a0, l0))
    c = float(lg.c_coefficient(a0, l0))
    out: dict[str, Any] = {"width": n, "depth": d, "alpha": a0, "lam": l0, "balanced": balanced, "beta": beta, "c": c}
    if balanced:
        out.update(mean_G=float(lg.mean_G_balanced(beta)), var_G=float(lg.var_G_balanced(beta)),
                   I_total=0.0, h_total=0.0)
        return _finite(out)
    I = interlayer_total(n, d, a0, l0)
    out.update(I_total=I, var_G=float(lg.var_G(beta, c, I)), hypo_constant=hypo_constant)
    if hypo_constant is None:
        out.update(h_total=None, mean_G=None)
    else:
        h = float(lg.hypoactivation_total(V.scalar("hypo_constant", hypo_constant), d, n))
        out.update(h_total=h, mean_G=float(lg.mean_G(beta, c, h)))
    return _finite(out)


def _finite(out: dict) -> LogGaussianTheory:
    for key in ("beta", "c", "I_total", "h_total", "mean_G", "var_G"):
        if out.get(key) is not None:
            V.finite_result("width, depth, alpha, lam, hypo_constant", out[key], key)
    return LogGaussianTheory(**out)


def theory_layerwise(width, alpha, lam, *, h=None, balanced: bool = False) -> LogGaussianTheory:
    """Prop. 6 with its two typos corrected: E[G] (20) and Var[G] (21) for per-layer alpha_l, lam_l.

    cos(theta_{l,l'}) = prod_{i=l}^{l'-1} alpha_i / sqrt(alpha_i^2 + lam_i^2) and the pair (l, l') is
    weighted by c_l c_l'.  ``h`` are per-step hypoactivations h_{l-1} (length d; zeros when omitted).
    """
    a = V.real("alpha", alpha)
    n, d, a, l = check_architecture(width, a.size, a, lam)
    balanced = V.flag("balanced", balanced)
    c = lg.c_coefficient(a, l)
    beta = 2.0 / n + float(np.sum(lg.layer_beta_term(a, l))) / n
    hh = np.zeros(d) if h is None else V.real("h", h)
    if hh.shape not in ((), (d,)):
        raise ParameterError("h", f"must be a scalar or a sequence of length depth = {d}, got shape {hh.shape}")
    mean = -beta / 2 + (0.0 if balanced else float(np.sum(2 * c * hh)))
    var = beta
    if not balanced and d > 1:
        log_factor = np.log(np.abs(lg.layer_cos_factor(a, l)) + 1e-300)
        sign = np.sign(lg.layer_cos_factor(a, l))
        cum = np.concatenate([[0.0], np.cumsum(log_factor)])
        sgn = np.concatenate([[1.0], np.cumprod(sign)])
        i, j = np.triu_indices(d, k=1)  # steps i < j: cos = prod_{m=i}^{j-1} factor_m
        cos_ij = sgn[j] / sgn[i] * np.exp(cum[j] - cum[i])
        theta_ij = np.arccos(np.clip(cos_ij, -1, 1))
        var += float(np.sum(2 * c[i] * c[j] * lg.j2bar_odd_part(theta_ij))) / n
    return _finite({"width": n, "depth": d, "balanced": balanced, "beta": beta, "mean_G": mean, "var_G": var})


@dataclass(frozen=True)
class Conjecture5Theory(ResultRecord):
    """:func:`conjecture5_theory`: uniform-sphere mean and variance of ||relu(zhat)||^2 and the lag-k
    covariances ``cov[k]``."""

    mean: float
    var: float
    cov: dict[int, float]


@dataclass(frozen=True)
class OutputMomentsTheory(ResultRecord):
    """:func:`output_moments_theory`: E and Var of (z_i^out)^2 and Corr((z_i^out)^2, (z_j^out)^2)."""

    mean_sq: float
    var_sq: float
    corr_sq: float


def conjecture5_theory(width, alpha, lam, lags=(1, 2)) -> Conjecture5Theory:
    """Right-hand sides of eqs (11)-(13) for ||relu(zhat)||^2: uniform-sphere mean, variance (Lemma 10) and
    lag-k covariance (Lemma 16 / Cor. 17, divided by 4 for ||.||^2 instead of 2||.||^2)."""
    n = V.integer("width", width, minimum=2)
    cov = {int(k): float(lg.j2bar_odd_part(np.arccos(np.clip(cos_theta_k(alpha, lam, k), -1, 1)))) / (4 * n)
           for k in lags}
    return Conjecture5Theory(mean=0.5, var=3.0 / (4.0 * (n + 2)), cov=cov)


def output_moments_theory(depth, alpha, lam, mean_G, var_G) -> OutputMomentsTheory:
    """§3.1-3.2: E and Var of (z_i^out)^2 and Corr((z_i^out)^2, (z_j^out)^2) for ||x||^2 = n_in."""
    s2 = float(alpha) ** 2 + float(lam) ** 2
    return OutputMomentsTheory(mean_sq=float(lg.output_mean_sq(s2, depth, mean_G, var_G)),
                               var_sq=float(lg.output_var_sq(s2, depth, mean_G, var_G)),
                               corr_sq=float(lg.output_corr_sq(var_G)))


def _grid(y) -> np.ndarray:
    y = V.real("y", y)
    if y.ndim != 1 or y.size < 3 or not np.allclose(np.diff(y), y[1] - y[0], rtol=1e-9, atol=0) or y[1] <= y[0]:
        raise ParameterError("y", "must be an increasing, uniformly spaced grid of at least 3 points")
    return y


def log_output_density(y, *, n_out: int, mean_G: float, var_G: float, shift: float = 0.0) -> np.ndarray:
    """Density of ln ||z_out||^2 = shift + G + ln chi^2(n_out), G ~ N(mean_G, var_G) (App. C.3).

    ``shift`` = ln(||x||^2/n_in) + d ln(alpha^2 + lam^2) (zero for ||x||^2 = n_in and alpha^2 + lam^2 = 1;
    the paper's Fig. 1 uses ||x|| = 1, i.e. shift = -ln n_in).  The convolution is numerical (FFT on the
    uniform grid ``y``, padded so that both densities are fully resolved).
    """
    y = _grid(y)
    n_out = V.integer("n_out", n_out, minimum=1)
    var_G = float(V.nonnegative("var_G", var_G))
    h = y[1] - y[0]
    sd = np.sqrt(var_G)
    lo = min(y[0], -40.0) - 10 * sd
    hi = max(y[-1], 10.0) + 10 * sd
    m = int(np.ceil((hi - lo) / h))
    t = lo + h * np.arange(m)
    chi = lg.log_chi2_density(t, n_out)
    if sd < h:  # degenerate Gaussian: a shift
        return np.interp(y, t + shift + mean_G, chi, left=0.0, right=0.0)
    half = int(np.ceil(10 * sd / h))
    s = h * np.arange(-half, half + 1)
    gauss = np.exp(-s**2 / (2 * var_G)) / np.sqrt(2 * np.pi * var_G)
    conv = fftconvolve(chi, gauss, mode="full") * h
    t_conv = t[0] + s[0] + h * np.arange(conv.size)
    return np.interp(y, t_conv + shift + mean_G, conv, left=0.0, right=0.0)


def infinite_width_log_density(y, *, n_out: int, shift: float = 0.0) -> np.ndarray:
    """The Gaussian (infinite-width) prediction: ||z_out||^2 = e^shift chi^2(n_out) (App. C.3)."""
    y = _grid(y)
    return lg.log_chi2_density(y - shift, V.integer("n_out", n_out, minimum=1))
