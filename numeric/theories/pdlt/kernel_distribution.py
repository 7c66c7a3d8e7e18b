"""The kernel of an untrained width-n residual network against ``resprop.fluctuations`` (issue 27 item 4, "what
the correction buys"): its distribution at one width, and the width below which the O(1/n) theory stops being
accurate.

For the network of ``resprop.kernel`` (every hidden layer of width n) the empirical kernel K^_ab of the last layer
has, at fixed depth,

    E[K^_ab] = nngp_ab + mean_shift_ab / n + O(n^-2),       n Var[K^_ab] = variance_ab + O(1/n)

(`resprop.numeric.engine.fluctuations`), so one network's kernel is predicted to be nngp + mean_shift / n +-
sqrt(variance / n), where the infinite-width theory predicts the number nngp.  :func:`width_scan` simulates
explicit width-n networks (`fluctuation_mc.simulate_finite_width`, the reduced sampler) at a ladder of widths and
compares, per element a <= b, the simulated R_n = n Var[K^_ab] (jackknife standard error,
`fluctuation_mc.width_statistics`) with ``variance`` and the simulated m_n = n (E K^_ab - nngp_ab) with
``mean_shift``.  The mean is measured on the law kernel K_law, whose mean is exactly that of K^ (identity 2.1 of
docs/design/fluctuations-engine.md) and whose variance is smaller.

The breakdown rule (:data:`RULE`; the same for every configuration).  At width n an element is *accurate* when the
simulation shows, at N_SE = 2 standard errors, that the prediction is within REL_TOL = 10%:

    variance:  |R_n - variance| + 2 SE(R_n)  <= 10% |variance|,
    mean:      |m_n - mean_shift| + 2 SE(m_n) <= 10% sqrt(n R_n),

that is, the predicted standard deviation within ~5% and the predicted mean within 10% of the simulated standard
deviation of K^.  (The mean is measured against the fluctuation, not against mean_shift itself: the standard
error of m_n grows like sqrt(n), so "within 10% of mean_shift" cannot be resolved at large widths.)  A width is
accurate when every element is, in both.  The breakdown width n* is the smallest simulated width from which on
every simulated width is accurate: the O(1/n) theory holds to 10% for n >= n* and not at the next smaller width.
``None`` when the largest simulated width is not accurate (the breakdown lies beyond the range, or the simulation
cannot resolve 10% there); at the edge when every width is (the breakdown lies at or below the smallest).  A width
is *inaccurate* when the simulation shows the error to exceed 10% (|simulated - engine| - 2 SE > 10% of the
scale) and *unresolved* when it is neither accurate nor inaccurate; an unresolved width counts as not accurate,
so the rule is conservative: fewer samples move n* up, not down.  The same rule gives the breakdown width of the
infinite-width mean (mean_shift replaced by 0) and of PDLT App. B's closure (B.25/B.26: ``closure_variance``,
``closure_mean_shift``), to show what the correction buys.

Why not "4 SE + 10%": an allowance that grows with the standard error accepts the noisiest widths, and the
smallest widths of a deep ReLU network are the noisiest (heavy tails): with 3000 networks at width 8, depth 16,
n Var was 3-7.5 times the engine's value and still within 4 SE + 10%.

:data:`CASES` are the four configurations of the issue (ReLU and tanh at depth 4 and 16) with gamma = 1 and the
fixed branch scale 0.5, so that the deeper network fluctuates more (with 1/sqrt(depth) the relative fluctuation
n Var / K^2 tends to a depth-independent limit: the engine gives 5.2 and 6.0 for ReLU at depth 4 and 16, against
5.2 and 22 with 0.5), sigma_w2 = 1.5, sigma_b2 = 0.1, on three inputs of unequal norm.
examples/fluctuations_width.py prints the table; ``figures`` draws it (``pdlt_kernel_distribution.png``).
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord

__all__ = ["width_scan", "WidthScan", "accuracy_score", "breakdown_width", "case_seed", "Breakdown", "CASES", "INPUTS",
           "WIDTHS", "QUICK_WIDTHS", "HISTOGRAM_WIDTH", "HISTOGRAM_ELEMENT", "N_SE", "REL_TOL", "RULE", "SIGMA_W2",
           "SIGMA_B2", "GAMMA", "BRANCH_SCALE"]

#: three inputs of unequal norm (0.6, 1.41, 1.75) and angle (45 and 90 degrees from the first), d_in = 3
INPUTS = np.array([[0.6, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.9, 1.5]])
SIGMA_W2 = 1.5
SIGMA_B2 = 0.1
GAMMA = 1.0
BRANCH_SCALE = 0.5
#: (activation, depth) of the issue
CASES = (("relu", 4), ("relu", 16), ("tanh", 4), ("tanh", 16))
#: down to width 2: tanh's O(1/n) theory is still accurate at width 8
WIDTHS = (2, 4, 8, 16, 32, 64, 128, 256, 512)
QUICK_WIDTHS = (2, 4, 8, 16, 32, 64, 128, 256)
#: the width and the element (a, b) whose histogram is shown
HISTOGRAM_WIDTH = 64
HISTOGRAM_ELEMENT = (0, 1)
#: the breakdown rule: the prediction within REL_TOL, shown at N_SE standard errors
N_SE = 2.0
REL_TOL = 0.10
#: the engine's channel truncation target (its estimate is below 1e-4 of each value: far below the Monte Carlo's)
ENGINE_RTOL = 1e-4
RULE = (f"n* = the smallest simulated width from which on, at every simulated width, every element a <= b has "
        f"|n Var_sim - variance| + {N_SE:g} SE <= {REL_TOL:.0%} variance and |n (E K^ - nngp) - mean_shift| + "
        f"{N_SE:g} SE <= {REL_TOL:.0%} sqrt(n * n Var_sim) (the predicted mean within {REL_TOL:.0%} of the "
        f"simulated standard deviation)")


def accuracy_score(simulated, se, predicted, scale) -> np.ndarray:
    """(|simulated - predicted| + N_SE se) / (REL_TOL scale): <= 1 when the simulation shows the prediction to be
    within REL_TOL of ``scale`` (inf where the scale is 0)."""
    simulated, se, predicted, scale = (np.asarray(v, dtype=float) for v in (simulated, se, predicted, scale))
    tol = REL_TOL * np.abs(scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tol > 0, (np.abs(simulated - predicted) + N_SE * se) / tol, np.inf)


def breakdown_width(widths, accurate) -> tuple[int | None, bool]:
    """(n*, at_edge) of the rule in the module docstring from the ascending ``widths`` and one flag per width:
    n* the smallest width from which on every width is accurate (None when the largest is not); at_edge when
    every width is accurate (n* is then the smallest width and the breakdown lies at or below it)."""
    ws = [int(w) for w in widths]
    ok = [bool(a) for a in accurate]
    if len(ws) != len(ok) or not ws or ws != sorted(set(ws)):
        raise V.ParameterError("widths, accurate", f"need distinct ascending widths and one flag per width, got "
                                                   f"{ws} and {len(ok)} flags")
    if not ok[-1]:
        return None, False
    k = len(ok) - 1
    while k > 0 and ok[k - 1]:
        k -= 1
    return ws[k], k == 0


@dataclass(frozen=True)
class Breakdown(ResultRecord):
    """One prediction judged by the rule: per width and element the ``variance_score`` and ``mean_score`` (<= 1:
    accurate; the variance score is None for a prediction without a variance); per width ``accurate`` and
    ``inaccurate`` (some element shown to be off by more than REL_TOL at N_SE standard errors; a width that is
    neither is *unresolved*: the simulation's standard errors are too large to tell); the breakdown widths of both
    together (``width``), the variance alone and the mean alone, each with its at-edge flag (see
    :func:`breakdown_width`)."""

    variance_score: np.ndarray | None
    mean_score: np.ndarray
    accurate: np.ndarray
    inaccurate: np.ndarray
    width: int | None
    at_edge: bool
    variance_width: int | None
    variance_at_edge: bool
    mean_width: int | None
    mean_at_edge: bool

    def status(self, i: int) -> str:
        """The verdict at the i-th width: accurate, inaccurate or unresolved."""
        return "accurate" if self.accurate[i] else ("inaccurate" if self.inaccurate[i] else "unresolved")


def _judge(widths, R, R_se, shift, shift_se, variance, mean_shift) -> Breakdown:
    n = np.asarray(widths, dtype=float)[:, None]
    mean_scale = np.sqrt(n * np.maximum(R, 0.0))
    m_score = accuracy_score(shift, shift_se, mean_shift, mean_scale)
    m_off = np.any(np.abs(shift - mean_shift) - N_SE * shift_se > REL_TOL * mean_scale, axis=1)
    m_ok = np.all(m_score <= 1.0, axis=1)
    v_score: np.ndarray | None = None
    v_ok, v_off = np.ones_like(m_ok), np.zeros_like(m_ok)
    if variance is not None:
        v_score = accuracy_score(R, R_se, variance, variance)
        v_ok = np.all(v_score <= 1.0, axis=1)
        v_off = np.any(np.abs(R - variance) - N_SE * R_se > REL_TOL * np.abs(variance), axis=1)
    both = breakdown_width(widths, v_ok & m_ok)
    var = breakdown_width(widths, v_ok) if variance is not None else (None, False)
    mean = breakdown_width(widths, m_ok)
    return Breakdown(variance_score=v_score, mean_score=m_score, accurate=v_ok & m_ok, inaccurate=v_off | m_off,
                     width=both[0], at_edge=both[1], variance_width=var[0], variance_at_edge=var[1],
                     mean_width=mean[0], mean_at_edge=mean[1])


@dataclass(frozen=True)
class WidthScan(ResultRecord):
    """:func:`width_scan` for one configuration.  ``pairs`` (M, 2): the elements a <= b; the engine's ``nngp``,
    ``variance``, ``mean_shift``, ``closure_variance``, ``closure_mean_shift`` (P, P); per width (leading axis W)
    and element the simulated ``R`` = n Var[K^_ab] and ``R_se``, ``shift`` = n (E K^_ab - nngp_ab) and
    ``shift_se``; the rule's verdicts (:class:`Breakdown`) on the engine (``engine``), on the infinite-width mean
    nngp alone (``infinite_width``: mean only) and on PDLT App. B's closure (``closure``); the simulated K^
    (samples, P, P) at ``histogram_width`` (None when it is not among the widths)."""

    activation: str
    depth: int
    widths: tuple
    samples: int
    seed: int
    pairs: np.ndarray
    nngp: np.ndarray
    variance: np.ndarray
    mean_shift: np.ndarray
    closure_variance: np.ndarray
    closure_mean_shift: np.ndarray
    R: np.ndarray
    R_se: np.ndarray
    shift: np.ndarray
    shift_se: np.ndarray
    engine: Breakdown
    infinite_width: Breakdown
    closure: Breakdown
    histogram_width: int | None
    histogram_samples: np.ndarray | None

    @property
    def label(self) -> str:
        return f"{self.activation}, depth {self.depth}"

    @property
    def breakdown_width(self) -> int | None:
        """n* of the engine's O(1/n) prediction (variance and mean)."""
        return self.engine.width

    def _elements(self, matrix: np.ndarray) -> np.ndarray:
        return matrix[self.pairs[:, 0], self.pairs[:, 1]]

    def element(self, a: int, b: int) -> int:
        """The column of element (a, b) in ``pairs``."""
        a, b = min(a, b), max(a, b)
        hit = np.flatnonzero((self.pairs[:, 0] == a) & (self.pairs[:, 1] == b))
        if hit.size != 1:
            raise V.ParameterError("a, b", f"must index an element of the {self.nngp.shape[0]} inputs, got ({a}, {b})")
        return int(hit[0])

    def extrapolated_variance(self, min_width: int = 64) -> list:
        """Per element the simulated R_n over the widths >= ``min_width`` extrapolated to n -> infinity
        (`width_extrapolation.extrapolate`: WLS in 1/n, + b/n^2 when the a/n fit is rejected, with its
        systematic), to set against the engine's ``variance`` at leading order (needs >= 3 such widths)."""
        from resprop.numeric.engine.width_extrapolation import extrapolate

        keep = [i for i, n in enumerate(self.widths) if n >= min_width]
        if len(keep) < 3:
            raise V.ParameterError("min_width", f"leaves {len(keep)} of the widths {self.widths}; need at least 3")
        ws = [self.widths[i] for i in keep]
        return [extrapolate(ws, self.R[keep, k], self.R_se[keep, k]) for k in range(self.pairs.shape[0])]

    def histogram_summary(self, a: int, b: int) -> dict:
        """K^_ab at ``histogram_width`` against N(nngp + mean_shift / n, variance / n): the predicted and simulated
        mean and standard deviation, the sample skewness (0 for the Gaussian), the fraction of samples within the
        predicted +-1 and +-2 standard deviations (0.683 and 0.954 for the Gaussian) and the Kolmogorov-Smirnov
        distance to the predicted Gaussian."""
        from scipy import stats

        if self.histogram_samples is None or self.histogram_width is None:
            raise V.ParameterError("histogram_width", "no samples were kept (histogram_width not among the widths)")
        n = self.histogram_width
        x = self.histogram_samples[:, a, b]
        mu = float(self.nngp[a, b] + self.mean_shift[a, b] / n)
        sd = math.sqrt(max(float(self.variance[a, b]), 0.0) / n)
        z = (x - mu) / sd
        return {"width": n, "samples": int(x.size), "nngp": float(self.nngp[a, b]), "mean_predicted": mu,
                "mean_simulated": float(x.mean()), "mean_se": float(x.std(ddof=1) / math.sqrt(x.size)),
                "sd_predicted": sd, "sd_simulated": float(x.std(ddof=1)), "skewness": float(stats.skew(x)),
                "within_1sd": float(np.mean(np.abs(z) <= 1.0)), "within_2sd": float(np.mean(np.abs(z) <= 2.0)),
                "ks_distance": float(stats.kstest(z, "norm").statistic)}


def _widths(widths) -> tuple[int, ...]:
    if isinstance(widths, (str, bytes)) or np.ndim(widths) != 1 or len(widths) < 1:
        raise V.ParameterError("widths", f"must be a sequence of distinct ascending widths, got {V._brief(widths)}")
    ws = tuple(V.integer("widths", w, 1, 10**6) for w in widths)
    if list(ws) != sorted(set(ws)):
        raise V.ParameterError("widths", f"must be distinct and ascending, got {ws}")
    return ws


def case_seed(seed: int, activation: str, depth: int, width: int) -> np.random.SeedSequence:
    """The seed of one width of one configuration: SeedSequence([seed, crc32(activation), depth, width])."""
    return np.random.SeedSequence([int(seed), zlib.crc32(activation.encode()), int(depth), int(width)])


def width_scan(activation: str, depth: int, *, widths=WIDTHS, samples: int = 16000, seed: int = 0,
               histogram_width: int | None = HISTOGRAM_WIDTH, X=INPUTS, sigma_w2=SIGMA_W2, sigma_b2=SIGMA_B2,
               gamma=GAMMA, branch_scale=BRANCH_SCALE, progress=None) -> WidthScan:
    """Simulate ``samples`` networks at each of ``widths`` (ascending) and judge ``resprop.fluctuations`` by the
    rule of the module docstring (arguments as ``resprop.kernel``).  Width n uses ``case_seed(seed, activation,
    depth, n)``, so a configuration's numbers do not depend on which other configurations or widths are run.
    ``progress``: called with one line per width."""
    from resprop.numeric.engine.fluctuation_mc import simulate_finite_width, width_statistics
    from resprop.numeric.engine.fluctuations import fluctuations

    ws = _widths(widths)
    samples = V.integer("samples", samples, 40, 10**8)
    seed = V.integer("seed", seed, 0, 2**63 - 1)
    if histogram_width is not None and histogram_width not in ws:
        raise V.ParameterError("histogram_width", f"must be one of the widths {ws} or None, got {histogram_width!r}")
    fl = fluctuations(X, activation, depth, ws[0], sigma_w2, sigma_b2, gamma, branch_scale, rtol=ENGINE_RTOL,
                      progress=False)
    P = fl.nngp.shape[0]
    a, b = np.triu_indices(P)
    R, R_se, shift, shift_se = (np.empty((len(ws), a.size)) for _ in range(4))
    hist = None
    for i, n in enumerate(ws):
        sim = simulate_finite_width(X, activation, depth, n, sigma_w2, sigma_b2, gamma, branch_scale, samples=samples,
                                    seed=case_seed(seed, activation, depth, n))
        st = width_statistics(sim, fl.nngp)  # quadruples: (a, b, a, b) over the upper triangle, in triu order
        R[i], R_se[i] = st.R, st.R_se
        shift[i], shift_se[i] = st.mean_shift[a, b], st.mean_shift_se[a, b]
        if n == histogram_width:
            hist = sim.K_emp
        if progress is not None:
            progress(f"{activation}, depth {depth}: width {n} done")
    series = (ws, R, R_se, shift, shift_se)
    return WidthScan(activation=fl.activation, depth=fl.depth, widths=ws, samples=samples, seed=seed,
                     pairs=np.stack([a, b], axis=1), nngp=fl.nngp, variance=fl.variance, mean_shift=fl.mean_shift,
                     closure_variance=fl.closure_variance, closure_mean_shift=fl.closure_mean_shift, R=R, R_se=R_se,
                     shift=shift, shift_se=shift_se,
                     engine=_judge(*series, fl.variance[a, b], fl.mean_shift[a, b]),
                     infinite_width=_judge(*series, None, np.zeros(a.size)),
                     closure=_judge(*series, fl.closure_variance[a, b], fl.closure_mean_shift[a, b]),
                     histogram_width=histogram_width if hist is not None else None, histogram_samples=hist)
