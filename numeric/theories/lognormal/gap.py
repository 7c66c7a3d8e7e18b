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
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord

__all__ = ["Increments", "simulate_increments", "GapDecomposition", "decompose", "diagonal_expansion",
           "predicted_diagonal", "LagCovariances", "lag_covariances", "Overlaps", "mean_overlaps", "overlap_lag1",
           "interlayer_total_at_overlaps"]


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
