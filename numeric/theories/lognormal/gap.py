"""Where the vanilla ResNet's Var[G] leaves Theorem 1 (Li, Nica & Roy 2021, eq. 7 with Prop. 2, eq. 8).

G = ln(||z^0||^2/n) + sum_{l=1}^d Y_l with Y_l = ln X_l, X_l = ||z^l||^2/||z^{l-1}||^2/(alpha^2 + lam^2)
(eq. 17).  Splitting Var[G] into its diagonal part D = Var ln(||z^0||^2/n) + sum_l Var Y_l and its
off-diagonal part O = Var[G] - D gives an exact identity for the gap to the prediction beta + c^2 I_total:

    Var[G] - beta - c^2 I_conj = (D - beta) + (O - c^2 I_meas) + c^2 (I_meas - I_conj),

with I_meas = sum_{l != l'} Cov(2||phi(zhat^l)||^2, 2||phi(zhat^l')||^2), eq. (3), measured on the same
networks, and I_conj its Conjecture-5 value, eq. (8).  The three terms are: the O(1/n) corrections to the
per-step variances that beta (eq. 5, leading order) drops; the part of the interlayer covariance of the Y_l
that is not c^2 times the covariance of the activation norms (the linearisation ln X ~ X - 1 of the proof,
Lemma 21, and the steps' own noise correlating with later activation norms); and the error of Conjecture 5's
I_total itself.

:func:`diagonal_expansion` derives the first of them for a step whose input direction is uniform on the sphere
(Conjecture 5): Var ln X = v1/n + v2/n^2 + O(n^-3) from the exact moments of X (Lemmas 9-10), and
Var ln(chi^2_n/n) = psi'(n/2) = 2/n + 2/n^2 + O(n^-3), so D = beta + (2 + d v2)/n^2 + O(d/n^3).

The third term, n c^2 (I_meas - I_conj), is split further by :func:`interlayer_excess` (measured, on
:func:`simulate_pairs`) into J2 at the mean overlap, the overlap's spread, the exact sphere correction
(:func:`uniform_pair_covariance`), a same-neuron and a cross-neuron part; :func:`interlayer_excess_derived` and
:func:`lag_excess_derived` derive all but the same-neuron part at leading order (with :func:`hypo_constant`,
:func:`overlap_moments`, :func:`cross_neuron_covariance`).  docs/lognormal-gap.md, "The excess of I_total, split".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.blas_threads import one_blas_thread
from resprop.numeric.engine.results import ResultRecord

__all__ = ["Increments", "simulate_increments", "GapDecomposition", "decompose", "diagonal_expansion",
           "predicted_diagonal", "LagCovariances", "lag_covariances", "Overlaps", "mean_overlaps", "overlap_lag1",
           "interlayer_total_at_overlaps", "j2_odd", "j2_odd_derivatives", "uniform_pair_covariance", "overlap_moments",
           "overlap_norm_covariance", "PairSums", "simulate_pairs", "InterlayerExcess", "interlayer_excess",
           "hypo_constant", "cross_neuron_covariance", "DerivedExcess", "interlayer_excess_derived", "LagExcessDerived",
           "lag_excess_derived"]


@dataclass(frozen=True)
class Increments(ResultRecord):
    """:func:`simulate_increments`: ``log_norm0`` = ln(||z^0||^2/n) (samples,), ``steps`` Y_l (samples, d) and
    ``act_sq`` = ||phi(zhat^l)||^2 feeding step l + 1 (samples, d)."""

    width: int
    depth: int
    alpha: float
    lam: float
    log_norm0: np.ndarray
    steps: np.ndarray
    act_sq: np.ndarray
    seed: int


def simulate_increments(width: int, depth: int, alpha: float, lam: float, samples: int, seed: int,
                        chunk: int = 2048) -> Increments:
    """The vanilla ResNet (eq. 1) by the exact reduction W phi =d ||phi|| g (eq. 14, 16), recording every step.

    Same law as :func:`resprop.numeric.engine.monte_carlo.simulate_log_gaussian` (G = log_norm0 +
    steps.sum(1)); this one keeps the per-step log-ratios Y_l that the decomposition needs."""
    n = V.integer("width", width, minimum=2)
    d = V.integer("depth", depth, minimum=1, maximum=100_000)
    a = float(V.scalar("alpha", alpha))
    lam_ = float(V.scalar("lam", lam, V.nonnegative))
    if a == 0.0 and lam_ == 0.0:
        raise V.ParameterError("alpha, lam", "need alpha^2 + lam^2 > 0")
    m_all = V.integer("samples", samples, minimum=2)
    seed = V.integer("seed", seed, minimum=0)
    chunk = V.integer("chunk", chunk, minimum=1)
    ss = np.random.SeedSequence(seed)
    L0, Y, A = np.empty(m_all), np.empty((m_all, d)), np.empty((m_all, d))
    growth, scale = math.log(a * a + lam_ * lam_), lam_ * math.sqrt(2.0 / n)
    for start, child in zip(range(0, m_all, chunk), ss.spawn((m_all + chunk - 1) // chunk)):
        rng = np.random.default_rng(child)
        m = min(chunk, m_all - start)
        z = rng.standard_normal((m, n))
        nrm2 = np.einsum("ij,ij->i", z, z)
        L0[start:start + m] = np.log(nrm2 / n)
        zhat = z / np.sqrt(nrm2)[:, None]
        for step in range(d):
            relu = np.maximum(zhat, 0.0)
            phi2 = np.einsum("ij,ij->i", relu, relu)
            A[start:start + m, step] = phi2
            z = rng.standard_normal((m, n))
            z *= scale * np.sqrt(phi2)[:, None]
            z += a * zhat
            nrm2 = np.einsum("ij,ij->i", z, z)
            Y[start:start + m, step] = np.log(nrm2) - growth
            zhat = z / np.sqrt(nrm2)[:, None]
    return Increments(width=n, depth=d, alpha=a, lam=lam_, log_norm0=L0, steps=Y, act_sq=A, seed=seed)


@dataclass(frozen=True)
class GapDecomposition(ResultRecord):
    """:func:`decompose`: each quantity with its block-jackknife SE (``*_se``).

    ``var_G`` simulated; ``predicted`` = beta + c^2 I_conj; ``gap`` = var_G - predicted;
    ``diagonal`` D and ``diagonal_excess`` = D - beta; ``diagonal_expected`` = beta + (2 + d v2)/n^2 (uniform-sphere
    steps, :func:`diagonal_expansion`); ``I_meas`` and ``I_conj``; ``I_excess`` = c^2 (I_meas - I_conj);
    ``nonlinear`` = O - c^2 I_meas."""

    width: int
    depth: int
    samples: int
    beta: float
    c: float
    I_conj: float
    predicted: float
    diagonal_expected: float
    var_G: float
    var_G_se: float
    gap: float
    gap_se: float
    diagonal: float
    diagonal_se: float
    diagonal_excess: float
    diagonal_excess_se: float
    I_meas: float
    I_meas_se: float
    I_excess: float
    I_excess_se: float
    nonlinear: float
    nonlinear_se: float


def _stats(L0: np.ndarray, Y: np.ndarray, A: np.ndarray) -> np.ndarray:
    """(Var G, D, I_meas, O) of one (sub)sample."""
    G = L0 + Y.sum(axis=1)
    var_G = G.var(ddof=1)
    D = L0.var(ddof=1) + Y.var(axis=0, ddof=1).sum()
    S = 2 * A
    I_meas = S.sum(axis=1).var(ddof=1) - S.var(axis=0, ddof=1).sum()
    return np.array([var_G, D, I_meas, var_G - D])


def decompose(inc: Increments, blocks: int = 40) -> GapDecomposition:
    """The exact split of Var[G] - (beta + c^2 I_conj) of the module docstring, with block-jackknife SEs."""
    from resprop.numeric.theories.lognormal import log_gaussian as LG

    th = LG.theory(inc.width, inc.depth, inc.alpha, inc.lam)
    c, beta, I_conj = float(th.c), float(th.beta), float(th.I_total)  # type: ignore[arg-type]
    m = inc.log_norm0.size
    b = V.integer("blocks", blocks, minimum=2, maximum=m)
    full = _stats(inc.log_norm0, inc.steps, inc.act_sq)
    edges = np.linspace(0, m, b + 1).astype(int)
    jack = np.empty((b, 4))
    for i in range(b):
        keep = np.r_[0:edges[i], edges[i + 1]:m]
        jack[i] = _stats(inc.log_norm0[keep], inc.steps[keep], inc.act_sq[keep])

    def se(f) -> float:
        vals = np.array([f(j) for j in jack])
        return float(np.sqrt((b - 1) / b * np.sum((vals - vals.mean()) ** 2)))

    pred = beta + c * c * I_conj
    var_G, D, I_meas, O = (float(x) for x in full)
    v2 = diagonal_expansion(inc.alpha, inc.lam)[1]
    return GapDecomposition(
        width=inc.width, depth=inc.depth, samples=m, beta=beta, c=c, I_conj=I_conj, predicted=pred,
        diagonal_expected=beta + (2 + inc.depth * v2) / inc.width**2,
        var_G=var_G, var_G_se=se(lambda j: j[0]), gap=var_G - pred, gap_se=se(lambda j: j[0]),
        diagonal=D, diagonal_se=se(lambda j: j[1]), diagonal_excess=D - beta, diagonal_excess_se=se(lambda j: j[1]),
        I_meas=I_meas, I_meas_se=se(lambda j: j[2]), I_excess=c * c * (I_meas - I_conj),
        I_excess_se=c * c * se(lambda j: j[2]), nonlinear=O - c * c * I_meas,
        nonlinear_se=se(lambda j: j[3] - c * c * j[2]))


@dataclass(frozen=True)
class LagCovariances(ResultRecord):
    """:func:`lag_covariances`: per lag k the summed covariances 2 sum_l Cov(2a_l, 2a_(l+k)) (``measured``, with
    block-jackknife ``measured_se``) and Prop. 2's 2(d - k)(J2(theta_k) - J2(pi - theta_k))/n (``conjectured``);
    ``decay_excess`` = n x the fitted slope of ln(measured/conjectured) in k (the per-step decay factor is
    alpha (1 + decay_excess/n) instead of Prop. 2's alpha), with its jackknife SE."""

    lags: np.ndarray
    measured: np.ndarray
    measured_se: np.ndarray
    conjectured: np.ndarray
    decay_excess: float
    decay_excess_se: float


def lag_covariances(inc: Increments, lags=range(1, 9), blocks: int = 40) -> LagCovariances:
    """The lag structure of I_total (eq. 3 vs eq. 8) measured on ``inc``."""
    from resprop.numeric.theories.lognormal import log_gaussian as LG

    ks = np.asarray(list(lags), dtype=int)
    if ks.size < 2 or ks.min() < 1 or ks.max() >= inc.depth:
        raise V.ParameterError("lags", f"need at least two lags in [1, depth - 1 = {inc.depth - 1}]")
    n, d = inc.width, inc.depth
    conj = np.array([2 * (d - k) * float(LG.j2bar_odd_part(np.arccos(LG.cos_theta_k(inc.alpha, inc.lam, k)))) / n
                     for k in ks])

    def measure(S: np.ndarray) -> np.ndarray:
        S = S - S.mean(axis=0)
        m = S.shape[0]
        return np.array([2 * np.sum(S[:, k:] * S[:, :-k]) / (m - 1) for k in ks])

    def slope(meas: np.ndarray) -> float:
        return float(np.polyfit(ks, np.log(meas / conj), 1)[0]) * n

    S = 2 * inc.act_sq
    m = S.shape[0]
    b = V.integer("blocks", blocks, minimum=2, maximum=m)
    full = measure(S)
    edges = np.linspace(0, m, b + 1).astype(int)
    jack = np.array([measure(np.concatenate([S[:edges[i]], S[edges[i + 1]:]])) for i in range(b)])
    jse = lambda vals: float(np.sqrt((b - 1) / b * np.sum((vals - vals.mean(axis=0)) ** 2, axis=0)))  # noqa: E731
    se = np.array([jse(jack[:, j]) for j in range(ks.size)])
    slopes = np.array([slope(j) for j in jack])
    return LagCovariances(lags=ks, measured=full, measured_se=se, conjectured=conj, decay_excess=slope(full),
                          decay_excess_se=jse(slopes))


@cache
def _a_moments() -> tuple:
    """E[A^p], p = 0..4, A = 2||relu(u)||^2 with u uniform on S^(n-1) (Lemma 10 to fourth order), rational in n.

    A ||g||^2 = 2||relu(g)||^2 with ||g|| and u independent, so E[A^p] = 2^p E[S^p] / E[||g||^(2p)] with
    S = sum_i relu(g_i)^2, whose cumulants are n times those of relu(g)^2 (E relu(g)^(2k) = (2k-1)!!/2)."""
    import sympy as sp

    n, y = sp.symbols("n y", positive=True)
    ymom = [sp.Integer(1)] + [sp.factorial2(2 * k - 1) / sp.Integer(2) for k in range(1, 5)]
    ser = sp.series(sp.log(sum(ymom[k] * y**k / sp.factorial(k) for k in range(5))), y, 0, 5).removeO()
    cum_gf = sum(n * sp.factorial(k) * ser.coeff(y, k) * y**k / sp.factorial(k) for k in range(1, 5))
    mom = sp.series(sp.exp(cum_gf), y, 0, 5).removeO()
    return n, [sp.Integer(1)] + [sp.cancel(2**p * sp.factorial(p) * mom.coeff(y, p) / _chi2_moment(n, p))
                                 for p in range(1, 5)]


def _chi2_moment(dof, p: int):
    import sympy as sp

    return sp.prod([dof + 2 * i for i in range(p)])


@cache
def step_central_moments(c: float) -> tuple:
    """E[(X - 1)^k], k = 2, 3, 4, as SymPy rational functions of n, for one step with c = lam^2/(alpha^2 + lam^2)
    and a uniform-sphere input: X - 1 = lam^2 (A R/n - 1) + 2 alpha lam sqrt(A/n) g1 with R = ||g||^2 =
    g1^2 + chi^2_(n-1) (alpha^2 + lam^2 = 1 after scaling; E X = 1 exactly)."""
    import sympy as sp

    n, EA = _a_moments()
    la2 = sp.nsimplify(c, rational=True) if isinstance(c, float) else sp.sympify(c)
    al2 = 1 - la2

    def eg1(k: int):
        return 0 if k % 2 else sp.factorial2(k - 1)

    def eg1_R(j: int, q: int):  # E[g1^j R^q]
        return sum(sp.binomial(q, i) * eg1(j + 2 * i) * _chi2_moment(n - 1, q - i) for i in range(q + 1))

    def central(k: int):
        total = sp.Integer(0)
        for j in range(0, k + 1, 2):  # odd powers of g1 vanish
            rest = k - j
            for q in range(rest + 1):
                total += (sp.binomial(k, j) * sp.binomial(rest, q) * (-1) ** (rest - q) * la2**rest
                          * (4 * al2 * la2) ** (j // 2) * EA[q + j // 2] * eg1_R(j, q) / n ** (q + j // 2))
        return sp.cancel(total)

    return n, central(2), central(3), central(4)


def diagonal_expansion(alpha: float, lam: float) -> tuple[float, float]:
    """(v1, v2) with Var ln X = v1/n + v2/n^2 + O(n^-3) for one step X = ||alpha e_1 + lam sqrt(2/n) ||phi(u)|| g||^2
    / (alpha^2 + lam^2), u uniform on the sphere (Conjecture 5) and g ~ N(0, I_n) (eq. 17).

    From the exact moments m_k = E[(X - 1)^k] (:func:`step_central_moments`) and the series of ln(1 + Y):
    Var ln X = m2 - m3 + (11/12) m4 - m2^2/4 + O(n^-3); v1 = (5 lam^4 + 4 alpha^2 lam^2)/(alpha^2 + lam^2)^2
    reproduces beta (eq. 5).  At alpha = lam, v2 = -11/32.  The O(n^-3) rest has large coefficients (m3 = 13/n^2
    there), so the expansion is an asymptotic statement, not a finite-n value at n ~ 10."""
    import sympy as sp

    a, lm = float(V.scalar("alpha", alpha)), float(V.scalar("lam", lam, V.nonnegative))
    s = a * a + lm * lm
    if s <= 0:
        raise V.ParameterError("alpha, lam", "need alpha^2 + lam^2 > 0")
    n, m2, m3, m4 = step_central_moments(lm * lm / s)
    e = sp.Symbol("e", positive=True)
    var_log = (m2 - m3 + sp.Rational(11, 12) * m4 - m2**2 / 4).subs(n, 1 / e)
    ser = sp.series(var_log, e, 0, 3).removeO()
    return float(ser.coeff(e, 1)), float(ser.coeff(e, 2))


def predicted_diagonal(width: int, depth: int, alpha: float, lam: float) -> float:
    """D to O(d/n^2): psi'(n/2) + d (v1/n + v2/n^2) (uniform-sphere steps)."""
    from scipy.special import polygamma

    n = V.integer("width", width, minimum=2)
    d = V.integer("depth", depth, minimum=1)
    v1, v2 = diagonal_expansion(alpha, lam)
    return float(polygamma(1, n / 2)) + d * (v1 / n + v2 / n**2)


@dataclass(frozen=True)
class Overlaps(ResultRecord):
    """:func:`mean_overlaps`: E<zhat^l0, zhat^(l0+k)> (``mean``, ``se``) for k = ``lags``, l0 = depth // 2."""

    width: int
    lags: np.ndarray
    mean: np.ndarray
    se: np.ndarray


def mean_overlaps(width: int, depth: int, alpha: float, lam: float, samples: int, seed: int,
                  max_lag: int = 12) -> Overlaps:
    """Mean overlap of the directions zhat^l0 and zhat^(l0+k), l0 = depth // 2, in the vanilla chain (eq. 1, reduced
    as in :func:`simulate_increments`).  Prop. 2 takes it to be cos(theta_k) = alpha^k/(alpha^2 + lam^2)^(k/2)."""
    n = V.integer("width", width, minimum=2)
    d = V.integer("depth", depth, minimum=2, maximum=100_000)
    a, lm = float(V.scalar("alpha", alpha)), float(V.scalar("lam", lam, V.nonnegative))
    m = V.integer("samples", samples, minimum=2)
    l0 = d // 2
    K = V.integer("max_lag", max_lag, minimum=1, maximum=d - l0)
    rng = np.random.default_rng(V.integer("seed", seed, minimum=0))
    zhat = rng.standard_normal((m, n))
    zhat /= np.linalg.norm(zhat, axis=1, keepdims=True)
    ref = zhat
    ov = np.empty((K, m))
    for step in range(l0 + K):
        if step == l0:
            ref = zhat
        phi2 = np.sum(np.maximum(zhat, 0.0) ** 2, axis=1)
        z = a * zhat + lm * math.sqrt(2.0 / n) * np.sqrt(phi2)[:, None] * rng.standard_normal((m, n))
        zhat = z / np.linalg.norm(z, axis=1, keepdims=True)
        if step >= l0:
            ov[step - l0] = np.einsum("ij,ij->i", ref, zhat)
    return Overlaps(width=n, lags=np.arange(1, K + 1), mean=ov.mean(axis=1), se=ov.std(axis=1, ddof=1) / math.sqrt(m))


def overlap_lag1(width: int, alpha: float, lam: float, hypo_constant: float) -> float:
    """E<zhat^l, zhat^(l+1)> to O(1/n) for alpha^2 + lam^2 = 1, derived from eq. (17):

    overlap = (alpha + lam s g1)/sqrt(X), X = 1 + u, u = 2 alpha lam s g1 + lam^2 (s^2 ||g||^2 - 1), s^2 = A/n,
    E A = 1 + 2 h_l with h_l = C_{alpha,lambda}/n (Prop. 2).  Expanding 1/sqrt(X) = 1 - u/2 + 3u^2/8:
    E[overlap]/alpha = 1 + (-lam^2 C + (3/8)(5 lam^4 + 4 alpha^2 lam^2) - lam^2)/n + O(n^-2)
    (hypoactivation, Jensen on 1/sqrt(X) with Var X of Lemmas 9-10, and the g1 cross term)."""
    n = V.integer("width", width, minimum=2)
    a, lm = float(V.scalar("alpha", alpha)), float(V.scalar("lam", lam, V.nonnegative))
    if not math.isclose(a * a + lm * lm, 1.0, rel_tol=1e-9):
        raise V.ParameterError("alpha, lam", f"need alpha^2 + lam^2 = 1, got {a * a + lm * lm}")
    C = float(V.scalar("hypo_constant", hypo_constant))
    l2 = lm * lm
    return a * (1 + (-l2 * C + 3 / 8 * (5 * l2 * l2 + 4 * a * a * l2) - l2) / n)


def interlayer_total_at_overlaps(width: int, depth: int, alpha: float, lam: float, overlaps: np.ndarray) -> float:
    """Eq. (8) with cos(theta_k) replaced by given overlaps for k = 1..len(overlaps); beyond, the last measured
    ratio overlap/cos(theta_k) is continued geometrically (per-step factor from the last lag)."""
    from resprop.numeric.theories.lognormal import log_gaussian as LG

    n, d = V.integer("width", width, minimum=2), V.integer("depth", depth, minimum=2)
    ov = np.asarray(V.real("overlaps", overlaps), dtype=float)
    k = np.arange(1, d, dtype=float)
    cos = np.asarray(LG.cos_theta_k(alpha, lam, k), dtype=float)
    K = min(ov.size, d - 1)
    per_step = (ov[K - 1] / cos[K - 1]) ** (1.0 / K)
    cos_eff = cos * per_step ** k
    cos_eff[:K] = ov[:K]
    theta = np.arccos(np.clip(cos_eff, -1.0, 1.0))
    return float(np.sum(2 * (d - k) * LG.j2bar_odd_part(theta)) / n)


# ---------------------------------------------------------------------------------------------------------------
# Issue 27 item 5: the part of I_total's excess beyond J2 at the mean overlap.
#
# Notation: A_l = 2||phi(zhat^l)||^2, psi(x) = x|x| = phi(x)^2 - phi(-x)^2, so A_l - 1 = sum_i psi(zhat^l_i) exactly
# (||zhat|| = 1); rho_{l,l'} = <zhat^l, zhat^l'>; f(rho) = J2(theta) - J2(pi - theta) with cos(theta) = rho
# (Lemma 16) = E[psi(Z) psi(rho Z + sqrt(1 - rho^2) W)] (Mehler), so Prop. 2's lag-k covariance is f(alpha^k)/n.
# ---------------------------------------------------------------------------------------------------------------

def j2_odd(rho):
    """f(rho) = J2(theta) - J2(pi - theta) at cos(theta) = rho (Lemma 16 with eq. 23), in closed form in rho:
    f = (6 rho sqrt(1 - rho^2) + 2 (1 + 2 rho^2) arcsin(rho))/pi; f(1) = 3, f(rho) = 8 rho/pi + O(rho^3)."""
    r = np.clip(np.asarray(rho, dtype=float), -1.0, 1.0)
    return (6 * r * np.sqrt(1 - r * r) + 2 * (1 + 2 * r * r) * np.arcsin(r)) / np.pi


def j2_odd_derivatives(rho) -> tuple:
    """(f'(rho), f''(rho)) of :func:`j2_odd`:
    f' = (8/pi)(sqrt(1 - rho^2) + rho arcsin(rho)), f'' = (8/pi) arcsin(rho)."""
    r = np.clip(np.asarray(rho, dtype=float), -1.0, 1.0)
    return 8 / np.pi * (np.sqrt(1 - r * r) + r * np.arcsin(r)), 8 / np.pi * np.arcsin(r)


def uniform_pair_covariance(width: int, rho):
    """Cov(2||phi(u)||^2, 2||phi(v)||^2) = f(rho)/(n + 2) EXACTLY for (u, v) uniform on the pairs of unit vectors
    with <u, v> = rho (any n >= 2), so for any O(n)-invariant joint law of two directions it is E[f(rho)]/(n + 2).

    Proof: A - 1 = sum_i psi(u_i); flipping the sign of coordinate 1 of both vectors keeps the law and odd psi, so
    the cross-coordinate terms E[psi(u_1) psi(v_2)] vanish and E[A] = 1; (u_1, v_1) = (r_1, rho r_1 + sqrt(1 -
    rho^2) r_2) with r uniform, and psi is 2-homogeneous, so n E[psi(u_1) psi(v_1)] = n f(rho)/E||g||^4 =
    f(rho)/(n + 2).  Lemma 16's f(theta)/n is its leading order: the exact sphere value is lower by 2 f/n^2."""
    n = V.integer("width", width, minimum=2)
    return j2_odd(rho) / (n + 2)


def _unit(alpha: float, lam: float) -> tuple[float, float]:
    """(alpha, lam)/sqrt(alpha^2 + lam^2): the direction chain zhat^l depends on them only through this ratio."""
    a, lm = float(V.scalar("alpha", alpha)), float(V.scalar("lam", lam, V.nonnegative))
    s = a * a + lm * lm
    if s <= 0:
        raise V.ParameterError("alpha, lam", "need alpha^2 + lam^2 > 0")
    return a / math.sqrt(s), lm / math.sqrt(s)


def _lags(lags) -> np.ndarray:
    ks = np.atleast_1d(np.asarray(lags))
    if ks.size == 0 or not np.issubdtype(ks.dtype, np.integer) or ks.min() < 1:
        raise V.ParameterError("lags", "need integers >= 1")
    return ks.astype(int)


def overlap_moments(width: int, alpha: float, lam: float, lags, hypo_constant: float) -> tuple[np.ndarray, np.ndarray]:
    """(E rho_k, Var rho_k) of the overlap rho_k = <zhat^l, zhat^(l+k)> in the stationary vanilla chain, derived from
    eq. (16)-(17) to O(1/n) (alpha, lam scaled to alpha^2 + lam^2 = 1; h_l = C/n as in Prop. 2).

    Exact representation: with ||z^l|| = 1, z^(l+k) = alpha^k zhat^l + (lam/sqrt n) sum_j alpha^(k-j) sqrt(A_(j-1))
    N_(j-1) xi^j, the xi^j iid N(0, I_n) independent of the past (eq. 14), N_m = ||z^(l+m)||, N_k^2 = prod X_j.
    So rho_k = P_k/N_k with E P_k = alpha^k exactly.  To second order (X_j - 1 = lam^2 (A_(j-1) - 1) +
    lam^2 (|xi^j|^2/n - 1) + 2 alpha lam g1_j/sqrt n; Lemmas 7, 9-10, 19):

        E rho_k / alpha^k = 1 + [k kappa_1 + (lam^4/4) sum_{m=1}^{k-1} (k - m) f(alpha^m)]/n,
        kappa_1 = -lam^2 C + (3/8)(5 lam^4 + 4 alpha^2 lam^2) - lam^2     (k = 1: :func:`overlap_lag1`),

    the extra term being the interlayer covariance of the X_j inside 1/N_k.  For the variance the first-order
    fluctuation is, per coordinate (x^m = sqrt n zhat^(l+m) ~ a stationary Gaussian AR(1) with coefficient alpha,
    psi(x) = x|x| standing for A - 1), Q_k = x^0 (x^k - alpha^k x^0) - (alpha^k/2) sum_j [lam^2 psi(x^(j-1)) +
    lam^2 ((xi^j)^2 - 1) + 2 alpha lam x^(j-1) xi^j]; psi is odd and the other terms even, so

        n Var rho_k = 1 - alpha^(2k) [1 + k lam^2 (1 + lam^2/2) - (lam^4/4)(3k + 2 sum_{m=1}^{k-1} (k - m) f(alpha^m))]

    (9/32 at k = 1, alpha = lam; -> 1, two independent directions, as k grows).  The f-terms are the hypoactivation
    mechanism: a large A_m makes the step larger and the overlap smaller (:func:`overlap_norm_covariance`)."""
    n = V.integer("width", width, minimum=2)
    a, lm = _unit(alpha, lam)
    C = float(V.scalar("hypo_constant", hypo_constant))
    ks = _lags(lags)
    l2, l4 = lm * lm, lm**4
    kappa1 = -l2 * C + 3 / 8 * (5 * l4 + 4 * a * a * l2) - l2
    mean, var = np.empty(ks.size), np.empty(ks.size)
    for i, k in enumerate(ks):
        m = np.arange(1, k)
        s = float(np.sum((k - m) * j2_odd(a**m)))
        mean[i] = a**k * (1 + (k * kappa1 + l4 / 4 * s) / n)
        var[i] = (1 - a ** (2 * k) * (1 + k * l2 * (1 + l2 / 2) - l4 / 4 * (3 * k + 2 * s))) / n
    return mean, var


def overlap_norm_covariance(width: int, alpha: float, lam: float, lags) -> tuple[np.ndarray, np.ndarray]:
    """(Cov(A_l, rho_k), Cov(A_(l+k), rho_k)), rho_k = <zhat^l, zhat^(l+k)>, to leading order O(1/n):

        Cov(A_l, rho_k) = -(alpha^k lam^2 / 2n) sum_{j=0}^{k-1} f(alpha^j),
        Cov(A_(l+k), rho_k) = -(alpha^k lam^2 / 2n) sum_{j=1}^{k} f(alpha^j)

    (alpha^2 + lam^2 = 1 after scaling; from the psi-term of :func:`overlap_moments`' Q_k; f(1) = 3).  In
    Conjecture 5's picture (an O(n)-invariant pair law) both vanish: the overlap is independent of the norms.
    They do not, at leading order, so conditioning the covariance on the overlap moves O(1/n) between
    E[Cov(.|rho)] and Cov(E[.|rho], E[.|rho]); :func:`interlayer_excess` splits by neurons instead."""
    n = V.integer("width", width, minimum=2)
    a, lm = _unit(alpha, lam)
    ks = _lags(lags)
    first = np.array([-(a**k) * lm * lm / (2 * n) * float(np.sum(j2_odd(a ** np.arange(0, k)))) for k in ks])
    last = np.array([-(a**k) * lm * lm / (2 * n) * float(np.sum(j2_odd(a ** np.arange(1, k + 1)))) for k in ks])
    return first, last


_MODELS = ("chain", "invariant", "mean_field")


@dataclass(frozen=True)
class PairSums(ResultRecord):
    """:func:`simulate_pairs`: per block of networks (first axis) the sums over its networks of A_l (``A``,
    (blocks, d)), A_l A_l' (``AA``), rho_{ll'} (``R``), rho^2 (``R2``), f(rho) (``fR``), the same-neuron sum
    sum_i psi(zhat^l_i) psi(zhat^l'_i) (``D``), and A_l rho_{ll'} (``AR``, row index l of A), each (blocks, d, d),
    for l, l' = 0..d-1; ``count`` networks per block; ``model`` as in :func:`simulate_pairs`."""

    width: int
    depth: int
    alpha: float
    lam: float
    samples: int
    seed: int
    model: str
    count: np.ndarray
    A: np.ndarray
    AA: np.ndarray
    R: np.ndarray
    R2: np.ndarray
    fR: np.ndarray
    D: np.ndarray
    AR: np.ndarray




def simulate_pairs(width: int, depth: int, alpha: float, lam: float, samples: int, seed: int, blocks: int = 40,
                   model: str = "chain", chunk: int = 1024) -> PairSums:
    """Directions zhat^0..zhat^(d-1) of ``samples`` networks, recording for every pair of layers (l, l') the sums
    that :func:`interlayer_excess` needs, accumulated per block for the jackknife; zhat^0 uniform (z^0 Gaussian).

    ``model``: "chain" the vanilla ResNet (eq. 16, reduced as in :func:`simulate_increments`; A_l are 2 x its
    act_sq); "invariant" the same with the noise amplitude lam sqrt(2/n)||phi(zhat)|| replaced by lam/sqrt(n),
    an O(n)-invariant chain (Conjecture 5's picture: exactly uniform marginals, no hypoactivation);
    "mean_field" n independent neurons y_i' = c y_i + sqrt(1 - c^2) xi_i coupled only through the common
    c = alpha/sqrt(alpha^2 + lam^2 A), A = 2||phi(y)||^2/||y||^2 (the model behind :func:`hypo_constant` and
    :func:`cross_neuron_covariance`; zhat = y/||y||).  Cost ~ samples d^2 n; runs with one BLAS thread (batched
    small products are many times slower with threads on a shared machine)."""
    n = V.integer("width", width, minimum=2)
    d = V.integer("depth", depth, minimum=2, maximum=4096)
    a = float(V.scalar("alpha", alpha))
    lm = float(V.scalar("lam", lam, V.nonnegative))
    if a == 0.0 and lm == 0.0:
        raise V.ParameterError("alpha, lam", "need alpha^2 + lam^2 > 0")
    m_all = V.integer("samples", samples, minimum=2)
    seed = V.integer("seed", seed, minimum=0)
    b = V.integer("blocks", blocks, minimum=2, maximum=m_all)
    chunk = V.integer("chunk", chunk, minimum=1)
    if model not in _MODELS:
        raise V.ParameterError("model", f"must be one of {_MODELS}, got {model!r}")
    edges = np.linspace(0, m_all, b + 1).astype(int)
    pieces = [(i, s, min(s + chunk, edges[i + 1])) for i in range(b) for s in range(edges[i], edges[i + 1], chunk)]
    ss = np.random.SeedSequence(seed)
    out = {k: np.zeros((b, d, d)) for k in ("AA", "R", "R2", "fR", "D", "AR")}
    Asum = np.zeros((b, d))
    au, lu = _unit(a, lm)
    scale = lm * math.sqrt(2.0 / n) if model == "chain" else lm / math.sqrt(n)
    with one_blas_thread():
        for (blk, s, e), child in zip(pieces, ss.spawn(len(pieces))):
            rng = np.random.default_rng(child)
            m = e - s
            Z = np.empty((m, d, n))
            y = rng.standard_normal((m, n))
            for step in range(d):
                zhat = y / np.linalg.norm(y, axis=1, keepdims=True)
                Z[:, step] = zhat
                if step == d - 1:
                    break
                if model == "mean_field":
                    A = 2 * np.sum(np.maximum(zhat, 0.0) ** 2, axis=1)
                    c = au / np.sqrt(au * au + lu * lu * A)
                    y = c[:, None] * y + np.sqrt(1 - c * c)[:, None] * rng.standard_normal((m, n))
                else:
                    amp = scale * np.sqrt(np.sum(np.maximum(zhat, 0.0) ** 2, axis=1)) if model == "chain" \
                        else np.full(m, scale)
                    y = a * zhat + amp[:, None] * rng.standard_normal((m, n))
            P = Z * np.abs(Z)
            A = 1.0 + P.sum(axis=2)
            R = np.matmul(Z, Z.transpose(0, 2, 1))
            Asum[blk] += A.sum(axis=0)
            out["AA"][blk] += A.T @ A
            out["R"][blk] += R.sum(axis=0)
            out["R2"][blk] += np.einsum("mij,mij->ij", R, R)
            out["fR"][blk] += j2_odd(R).sum(axis=0)
            out["D"][blk] += np.matmul(P, P.transpose(0, 2, 1)).sum(axis=0)
            out["AR"][blk] += np.einsum("mi,mij->ij", A, R)
    return PairSums(width=n, depth=d, alpha=a, lam=lm, samples=m_all, seed=seed, model=model,
                    count=np.diff(edges).astype(float), A=Asum, **out)


_PARTS = ("total", "mean_overlap", "overlap_spread", "sphere", "same_neuron", "cross_neuron")


@dataclass(frozen=True)
class InterlayerExcess(ResultRecord):
    """:func:`interlayer_excess`: n c^2 (I_meas - I_conj) and its exact five-way split (each with ``*_se``, a
    block-jackknife SE; ``total`` = the sum of the five parts identically):

    ``mean_overlap`` (a) n c^2 sum_{l != l'} [f(E rho) - f(cos theta_k)]/n: J2 at the measured mean overlaps;
    ``overlap_spread`` (b) n c^2 sum [E f(rho) - f(E rho)]/n: the overlap is random (Jensen);
    ``sphere`` n c^2 sum E f(rho) [1/(n + 2) - 1/n]: exact value for an O(n)-invariant pair law
    (:func:`uniform_pair_covariance`) minus Lemma 16's leading order;
    ``same_neuron`` n c^2 sum [D - E f(rho)/(n + 2)], D = n Cov(psi(zhat^l_1), psi(zhat^l'_1)) (same neuron);
    ``cross_neuron`` n c^2 sum [Cov(A_l, A_l') - D] = n c^2 sum n(n - 1) Cov(psi(zhat^l_1), psi(zhat^l'_2)).
    The last two vanish for any O(n)-invariant pair law (Conjecture 5's picture); they are the chain's
    non-invariance (hypoactivation: ReLU's sign asymmetry modulating the noise amplitude).

    ``I_meas`` = sum_{l != l'} Cov(A_l, A_l') (eq. 3, measured) and ``I_conj`` (eq. 8).  Per lag k = ``lags``:
    ``lag_parts`` (6, K) = the same six quantities restricted to |l - l'| = k (rows in the order of the fields
    above, total first), ``lag_parts_se`` their SEs; layer averages over l >= d/4 (away from the uniform start)
    of ``overlap_mean``, ``overlap_var``, ``norm_overlap_first`` = Cov(A_l, rho_{l,l+k}) and ``norm_overlap_last`` =
    Cov(A_(l+k), rho_{l,l+k}), each with ``*_se``; ``var_A`` = Var A_l averaged over l >= d/4 (3/(n + 2) on the
    sphere)."""

    width: int
    depth: int
    samples: int
    model: str
    c: float
    I_conj: float
    I_meas: float
    I_meas_se: float
    total: float
    total_se: float
    mean_overlap: float
    mean_overlap_se: float
    overlap_spread: float
    overlap_spread_se: float
    sphere: float
    sphere_se: float
    same_neuron: float
    same_neuron_se: float
    cross_neuron: float
    cross_neuron_se: float
    lags: np.ndarray
    lag_parts: np.ndarray
    lag_parts_se: np.ndarray
    overlap_mean: np.ndarray
    overlap_mean_se: np.ndarray
    overlap_var: np.ndarray
    overlap_var_se: np.ndarray
    norm_overlap_first: np.ndarray
    norm_overlap_first_se: np.ndarray
    norm_overlap_last: np.ndarray
    norm_overlap_last_se: np.ndarray
    var_A: float
    var_A_se: float


def _excess_stats(ps: PairSums, keep: np.ndarray, c2: float, conj: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """All estimates of :func:`interlayer_excess` from the blocks ``keep``, as one flat vector."""
    n, d = ps.width, ps.depth
    M = ps.count[keep].sum()
    S = {k: getattr(ps, k)[keep].sum(axis=0) for k in ("A", "AA", "R", "R2", "fR", "D", "AR")}
    EA = S["A"] / M
    cov = (S["AA"] - M * np.outer(EA, EA)) / (M - 1)
    rbar = S["R"] / M
    rvar = (S["R2"] - M * rbar**2) / (M - 1)
    Ef = S["fR"] / M
    D = S["D"] / M - np.outer(EA - 1, EA - 1) / n
    cov_AR = S["AR"] / M - EA[:, None] * rbar           # [l, l']: Cov(A_l, rho_{l,l'})
    off = ~np.eye(d, dtype=bool)
    lagmat = np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    parts = np.stack([cov - conj / n, (j2_odd(rbar) - conj) / n, (Ef - j2_odd(rbar)) / n,
                      Ef * (1 / (n + 2) - 1 / n), D - Ef / (n + 2), cov - D]) * (n * c2)
    tot = parts[:, off].sum(axis=1)
    lag = np.array([[p[lagmat == k].sum() for k in ks] for p in parts]).ravel()
    burn = d // 4

    def layer_avg(mat: np.ndarray, k: int) -> float:
        ls = np.arange(burn, d - k)
        return float(mat[ls, ls + k].mean())

    avg = np.array([[layer_avg(x, k) for k in ks] for x in (rbar, rvar, cov_AR, cov_AR.T)]).ravel()
    I_meas = cov[off].sum()
    var_A = float(np.diag(cov)[burn:].mean())
    return np.concatenate([[I_meas, var_A], tot, lag, avg])


def interlayer_excess(ps: PairSums, lags=range(1, 9)) -> InterlayerExcess:
    """Split n c^2 (I_meas - I_conj) of :func:`decompose` into the five parts of :class:`InterlayerExcess`
    (identity), with 40-block (the blocks of ``ps``) jackknife SEs.  c, I_conj from Theorem 1 / Prop. 2."""
    from resprop.numeric.theories.lognormal import log_gaussian as LG

    ks = _lags(list(lags))
    if ks.max() >= ps.depth:
        raise V.ParameterError("lags", f"need lags <= depth - 1 = {ps.depth - 1}")
    n, d = ps.width, ps.depth
    th = LG.theory(n, d, ps.alpha, ps.lam)
    c = float(th.c)  # type: ignore[arg-type]
    lagmat = np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    cos = np.where(lagmat > 0, LG.cos_theta_k(ps.alpha, ps.lam, np.maximum(lagmat, 1)), 1.0)
    conj = j2_odd(cos)
    b = ps.count.size
    full = _excess_stats(ps, np.ones(b, dtype=bool), c * c, conj, ks)
    jack = np.array([_excess_stats(ps, np.arange(b) != i, c * c, conj, ks) for i in range(b)])
    se = np.sqrt((b - 1) / b * np.sum((jack - jack.mean(axis=0)) ** 2, axis=0))
    K = ks.size
    tot, tot_se = full[2:8], se[2:8]
    lag, lag_se = full[8:8 + 6 * K].reshape(6, K), se[8:8 + 6 * K].reshape(6, K)
    avg, avg_se = full[8 + 6 * K:].reshape(4, K), se[8 + 6 * K:].reshape(4, K)
    fields = {name: float(tot[i]) for i, name in enumerate(_PARTS)}
    fields.update({name + "_se": float(tot_se[i]) for i, name in enumerate(_PARTS)})
    return InterlayerExcess(
        width=n, depth=d, samples=int(ps.count.sum()), model=ps.model, c=c,
        I_conj=float(th.I_total), I_meas=float(full[0]), I_meas_se=float(se[0]),  # type: ignore[arg-type]
        lags=ks, lag_parts=lag, lag_parts_se=lag_se, overlap_mean=avg[0], overlap_mean_se=avg_se[0], overlap_var=avg[1],
        overlap_var_se=avg_se[1], norm_overlap_first=avg[2], norm_overlap_first_se=avg_se[2],
        norm_overlap_last=avg[3], norm_overlap_last_se=avg_se[3], var_A=float(full[1]), var_A_se=float(se[1]),
        **fields)


def _psi_weights(terms: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Odd j = 1, 3, ... (``terms`` of them) and w_j = psi_j^2/j!, psi_j = E[psi(Z) He_j(Z)], psi(x) = x|x|.

    Z^2 He_j = He_(j+2) + (2j + 1) He_j + j (j - 1) He_(j-2) and E[He_i(Z) 1(Z > 0)] = He_(i-1)(0)/sqrt(2 pi) give
    psi_j = 2 (He_(j+1)(0) + (2j + 1) He_(j-1)(0) + j (j - 1) He_(j-3)(0))/sqrt(2 pi) (= +-4/sqrt(2 pi) for j <= 5);
    sum_j w_j alpha^(jk)... = f (Mehler), sum_j w_j = f(1) = 3."""
    J = np.arange(1, 2 * terms, 2)
    top = int(J[-1]) + 2
    he0 = np.zeros(top + 1)  # He_i(0): He_(i+1)(0) = -i He_(i-1)(0)
    he0[0] = 1.0
    for i in range(1, top):
        he0[i + 1] = -i * he0[i - 1]
    logw = np.empty(J.size)
    for i, j in enumerate(J):
        v = he0[j + 1] + (2 * j + 1) * he0[j - 1] + (j * (j - 1) * he0[j - 3] if j >= 3 else 0.0)
        logw[i] = 2 * math.log(2 * abs(v) / math.sqrt(2 * math.pi)) - math.lgamma(j + 1)
    return J, np.exp(logw)


def hypo_constant(alpha: float, lam: float, layer: int | None = None) -> float:
    """Prop. 2's hypoactivation constant C_{alpha,lambda} = n h, h = (E 2||phi(zhat)||^2 - 1)/2, derived to leading
    order (the paper estimates it by Monte Carlo: -0.876 at alpha = lam, n = d = 150):

        C = -(lam^2/4) sum_{j odd} alpha^j psi_j^2 / ((j - 1)! (1 - alpha^j))     (alpha^2 + lam^2 = 1),

    times (1 - alpha^(j m)) in the j-th term at layer m when zhat^0 is uniform (``layer`` = m; None: stationary).
    -0.8589 at alpha = lam.  Derivation (mean field): with y = sqrt(n) zhat^l, one step is per coordinate
    y' = c y + s xi with c = alpha/sqrt(alpha^2 + lam^2 A_l) (X concentrates), c^2 + s^2 = 1, so the Hermite
    modes M_j = (1/n) sum_i He_j(y_i) obey E[M_j' | past] = c^j M_j (Mehler) and A - 1 = sum_j psi_j M_j/j!.
    c^j = alpha^j (1 - j lam^2 (A - 1)/2 + ...): a large A (more active ReLUs) makes the step larger and the
    odd modes decay faster, so at stationarity E M_j (1 - alpha^j) = -(j lam^2 alpha^j/2) Cov(A, M_j) with
    Cov(A, M_j) = psi_j/n; summing psi_j E M_j/j! gives E A - 1 = 2C/n.  This is the paper's "walk that slows
    down where ||phi|| is small" (Section 4), in closed form."""
    a, lm = _unit(alpha, lam)
    m = None if layer is None else V.integer("layer", layer, minimum=0)
    if lm == 0.0 or abs(a) >= 1.0:
        return 0.0  # no residual branch: zhat never moves
    J, w = _psi_weights()
    fac = np.ones(J.size) if m is None else 1 - a ** (J * m)
    return float(-lm * lm / 4 * np.sum(J * w * a**J * fac / (1 - a**J)))


def cross_neuron_covariance(width: int, depth: int, alpha: float, lam: float) -> np.ndarray:
    """The cross-neuron part Cov(A_l, A_l') - D_ll' = n(n - 1) Cov(psi(zhat^l_1), psi(zhat^l'_2)), (d, d), for
    layers 0..d-1 from a uniform zhat^0, derived to leading order O(1/n^2) (mean field, as :func:`hypo_constant`).

    Neurons couple only through A_m, the common noise amplitude of eq. (16): neuron i's share psi(y^m_i)/n of
    A_m - 1 changes every neuron's step m through c_m = alpha (1 + lam^2 (A_m - 1))^(-1/2).  To first order in
    one neuron's share, with y^t ~ N(0, 1), corr(y^s, y^t) = prod c (OU/Mehler) and G(s) = sum_j w_j (j lam^2/2)
    alpha^(js) (minus the derivative of f(prod c) in one step's A over an s-step span), four terms remain
    (l <= l'; each vanishes for an O(n)-invariant pair law):

    (i)   neuron 1 (layer l) drives neuron 2 (layer l') through A_m, m < l': (1/n) sum_m f(alpha^|l-m|)
          E[d psi(y^l')/d A_m], where the response of a symmetric neuron averages to zero and what survives is its
          own share of the A's: E[d psi(y^t)/d A_m] = (lam^4/4n) sum_j w_j alpha^(j(t-m)) [j^2 alpha^j (1 -
          alpha^(jm))/(1 - alpha^j) + j(j + 2)] (its hypoactivation mean E M_j at layer m, and the curvature
          j(j+2) lam^4/8 of c^j in A times 2 Cov(A_m, M_j));
    (ii)  the same with the roles swapped, neuron 2's share at m < l driving neuron 1;
    (iii) a round trip 2 -> 1 -> 2: neuron 2's share at p modulates neuron 1's step p, which moves neuron 1's
          share at t (correlated with psi(y^l_1) through neuron 1's own innovation), which drives neuron 2:
          (1/n^2) sum_{l <= p < t < l'} G(t - l) G(l' - p);
    (iv)  both shares at one step q < l act on each other: (1/n^2) sum_{q < l} G(l - q) G(l' - q).

    Check (docs/lognormal-gap.md): in a one-mode toy (A - 1 replaced by psi_1 times the mean of y, so the mean is a
    scalar Markov chain), the covariance from its discretised transfer operator at n = 4096-16384 matches (i)-(iv)
    plus the same-neuron terms: n(n C_k/alpha^k - 1) - (k = 0 value) within 0.02 for k <= 8, and the k = 0 value
    1.91 against 1.88; without (iii) the k = 8 difference is 24% low, without (iv) the k = 0 value is 1.72.
    The diagonal (l = l') is the equal-time excess Var A - D (n^2 x it -> 6.21 at alpha = lam, stationary)."""
    n = V.integer("width", width, minimum=2)
    d = V.integer("depth", depth, minimum=1, maximum=4096)
    a, lm = _unit(alpha, lam)
    if lm == 0.0 or abs(a) >= 1.0:
        return np.zeros((d, d))
    J, w = _psi_weights()
    idx = np.arange(d)
    F = j2_odd(a ** np.abs(np.subtract.outer(idx, idx)))
    dt = np.subtract.outer(idx, idx)  # t - m
    resp = np.zeros((d, d))           # resp[t, m] = n E[d psi(y^t)/d A_m], m < t
    for j, wj in zip(J, w):
        coef = j * j * a**j * (1 - a ** (j * idx)) / (1 - a**j) + j * (j + 2)   # over m
        resp += wj * np.where(dt > 0, a ** (j * np.maximum(dt, 0)), 0.0) * coef[None, :]
    resp *= lm**4 / 4
    M = (F @ resp.T + resp @ F) / n**2   # [l, l']: first term neuron 1 (layer l) drives neuron 2 (layer l')
    # G(s) = -d f(prod c)/dA over an s-step span (one step's A): sum_j w_j (j lam^2/2) alpha^(js)
    g = np.array([float(np.sum(w * J * lm * lm / 2 * a ** (J * s))) for s in range(d)])
    g[0] = 0.0
    T = np.cumsum(g)
    # (iii) round trip 2 -> 1 -> 2, l <= p < t < l': depends on k = l' - l only
    rt = np.array([float(np.sum(g[1:k] * (T[k] - T[k - np.arange(1, k)]))) for k in range(d)])
    M += np.where(dt < 0, rt[np.abs(dt)], 0.0) / n**2
    # (iv) mutual modulation at one step q < min(l, l'), q >= 0
    Gm = np.where(dt > 0, g[np.maximum(dt, 0)], 0.0)     # Gm[l, q] = G(l - q), q < l
    M += (Gm @ Gm.T) / n**2
    return np.triu(M) + np.triu(M, 1).T


@dataclass(frozen=True)
class DerivedExcess(ResultRecord):
    """:func:`interlayer_excess_derived`: the parts of n c^2 (I_total - I_conj) derived to leading order (O(1) at
    d/n = 1), in the units and names of :class:`InterlayerExcess`; ``total`` is the sum of these four;
    ``same_neuron`` is not derived (measured: a few tenths, about 1% of the total); ``hypo`` = C at the last
    layer (the profile used)."""

    width: int
    depth: int
    mean_overlap: float
    overlap_spread: float
    sphere: float
    cross_neuron: float
    total: float
    hypo: float


def interlayer_excess_derived(width: int, depth: int, alpha: float, lam: float,
                              hypo: float | None = None) -> DerivedExcess:
    """Each pair of layers (l, l + k), zhat^0 uniform, summed as eq. (3), times n c^2:
    (a) f(E rho) - f(alpha^k), E rho from :func:`overlap_moments` with the layer profile C_m of
    :func:`hypo_constant` (or a fixed ``hypo`` = C at every layer, as :func:`overlap_lag1` uses -0.876);
    (b) (1/2) f''(alpha^k) Var rho, f'' = (8/pi) arcsin, Var rho of :func:`overlap_moments`;
    sphere: -2 f(alpha^k)/(n(n + 2)) (:func:`uniform_pair_covariance`); cross: :func:`cross_neuron_covariance`."""
    from resprop.numeric.theories.lognormal import log_gaussian as LG

    n = V.integer("width", width, minimum=2)
    d = V.integer("depth", depth, minimum=2, maximum=4096)
    a, lm = _unit(alpha, lam)
    c2 = float(LG.theory(n, d, a, lm).c) ** 2  # type: ignore[arg-type]
    l2, l4 = lm * lm, lm**4
    Cm = (np.full(d, float(V.scalar("hypo", hypo))) if hypo is not None
          else np.array([hypo_constant(a, lm, layer=m) for m in range(d)]))
    base = 3 / 8 * (5 * l4 + 4 * a * a * l2) - l2
    ks = np.arange(1, d)
    _, var = overlap_moments(n, a, lm, ks, 0.0)
    fk = j2_odd(a**ks)
    part_a = part_b = part_s = 0.0
    cumC = np.concatenate([[0.0], np.cumsum(Cm)])
    for k, vk, f0 in zip(ks, var, fk):
        m = np.arange(1, k)
        extra = k * base + l4 / 4 * float(np.sum((k - m) * j2_odd(a**m)))
        ls = np.arange(0, d - k)
        mean = a**k * (1 + (-l2 * (cumC[ls + k] - cumC[ls]) + extra) / n)
        part_a += 2 * float(np.sum(j2_odd(mean) - f0)) / n
        part_b += 2 * (d - k) * 0.5 * float(j2_odd_derivatives(a**k)[1]) * vk / n
        part_s += 2 * (d - k) * (-2 * f0 / (n * (n + 2)))
    X = cross_neuron_covariance(n, d, a, lm)
    cross = float(X.sum() - np.trace(X))
    parts = [n * c2 * p for p in (part_a, part_b, part_s, cross)]
    return DerivedExcess(width=n, depth=d, mean_overlap=parts[0], overlap_spread=parts[1], sphere=parts[2],
                         cross_neuron=parts[3], total=float(sum(parts)), hypo=float(Cm[-1]))


@dataclass(frozen=True)
class LagExcessDerived(ResultRecord):
    """:func:`lag_excess_derived`: per lag k = ``lags`` the leading-order relative excess of the stationary lag-k
    covariance over Prop. 2's, n (Cov(A_l, A_(l+k)) - f(cos theta_k)/n)/(f(cos theta_k)/n), split as
    :class:`InterlayerExcess` (``parts`` rows: mean_overlap, overlap_spread, sphere, cross_neuron; ``total`` their
    sum); ``decay_excess`` = the least-squares slope of ``total`` in k, the derived counterpart of
    :attr:`LagCovariances.decay_excess` (the per-step factor alpha (1 + kappa/n))."""

    lags: np.ndarray
    parts: np.ndarray
    total: np.ndarray
    decay_excess: float


def lag_excess_derived(alpha: float, lam: float, lags=range(1, 9), hypo: float | None = None) -> LagExcessDerived:
    """Stationary per-lag excess at leading order (independent of n): (a) f'(alpha^k) alpha^k s_k/f with
    s_k = n (E rho_k/alpha^k - 1) of :func:`overlap_moments` (C from :func:`hypo_constant` unless ``hypo``);
    (b) f''(alpha^k) n Var rho_k/(2 f); sphere -2; cross n^2 x :func:`cross_neuron_covariance` at a layer far from the
    start, over f.  At alpha = lam the total grows by 2.3 per lag (kappa = 2.29 over k = 1..8): the measured
    kappa = 2.5 +- 0.1 of docs/lognormal-gap.md, derived."""
    a, lm = _unit(alpha, lam)
    ks = _lags(list(lags))
    if ks.size < 2:
        raise V.ParameterError("lags", "need at least two lags")
    C = hypo_constant(a, lm) if hypo is None else float(V.scalar("hypo", hypo))
    big = 1_000_000
    mean, var = overlap_moments(big, a, lm, ks, C)
    f0 = j2_odd(a**ks)
    d1, d2 = j2_odd_derivatives(a**ks)
    l0 = 80
    X = cross_neuron_covariance(big, l0 + int(ks.max()) + 1, a, lm)
    parts = np.stack([d1 * a**ks * big * (mean / a**ks - 1) / f0, 0.5 * d2 * big * var / f0,
                      np.full(ks.size, -2.0), big**2 * X[l0, l0 + ks] / f0])
    total = parts.sum(axis=0)
    return LagExcessDerived(lags=ks, parts=parts, total=total, decay_excess=float(np.polyfit(ks, total, 1)[0]))
