"""What the O(1/width) correction buys: the kernel of an untrained width-n network against ``resprop.fluctuations``.

Run from anywhere (resprop installed)::

    python examples/fluctuations_width.py            # widths 2..512, 16000 networks per width (a few minutes)
    python examples/fluctuations_width.py --quick    # widths 2..256, 5000 networks per width (under a minute)

The infinite-width theory (``resprop.kernel``) says the kernel of the last layer is the number nngp.  At width n the
empirical kernel K^_ab = h(x_a) . h(x_b) / n of one network is random; ``resprop.fluctuations`` gives its first
correction,

    E[K^_ab] = nngp_ab + mean_shift_ab / n,      Var[K^_ab] = variance_ab / n      (+ O(1/n^2)),

so the prediction for one network is nngp + mean_shift / n +- sqrt(variance / n).  For ReLU and tanh residual
networks (gamma = 1, branch scale 0.5, sigma_w2 = 1.5, sigma_b2 = 0.1) at depth 4 and 16, on three inputs of
unequal norm, this script simulates explicit width-n networks and prints

(a) the distribution of K^_ab at width 64 against the Gaussian N(nngp + mean_shift / n, variance / n): simulated
    and predicted mean and standard deviation, skewness, the fraction of networks inside the predicted +-1 and
    +-2 standard deviations, and the Kolmogorov-Smirnov distance;
(b) per width, the simulated n Var[K^_ab] over the engine's ``variance``, and the error of the predicted mean
    nngp + mean_shift / n (and of nngp alone) in units of the simulated standard deviation of K^;
(c) the breakdown width n* per configuration, by one rule applied to all four (``kernel_distribution.RULE``):

    at width n an element a <= b is accurate when the simulation shows, at 2 standard errors, the variance within
    10% (|n Var_sim - variance| + 2 SE <= 10% variance) and the predicted mean within 10% of the simulated
    standard deviation (|n (E K^ - nngp) - mean_shift| + 2 SE <= 10% sqrt(n * n Var_sim)); n* is the smallest
    simulated width from which on every element is accurate at every simulated width.

A width is "inaccurate" when the simulation shows the error to exceed 10% (at 2 SE) and "unresolved" when the
standard errors are too large to tell either way; unresolved counts as not accurate, so fewer networks (--quick)
can only move n* up.  "<= 2" means every simulated width is accurate; "> 512" that the largest is not.  The
columns "nngp mean" and "closure" apply the same rule to the infinite-width mean (mean_shift = 0) and to PDLT
App. B's closure (B.25/B.26, which drops the same-neuron cross-layer terms).  "extrap. z" checks the engine at
leading order: the largest |R_inf - variance| / SE over the elements, R_inf the simulated n Var extrapolated from
the widths >= 64 (R_inf + a/n, or + b/n^2 when that fit is rejected; SE with the extrapolation systematic).

The computation lives in ``resprop.numeric.theories.pdlt.kernel_distribution`` (``width_scan``); the report's
figure ``pdlt_kernel_distribution.png`` (``resprop figures --only pdlt``) draws the same scans.  The core calls are::

    import resprop
    from resprop.numeric.engine.fluctuation_mc import simulate_finite_width

    fl = resprop.fluctuations(X, "relu", 4, 64, 1.5, 0.1, 1.0, 0.5)         # nngp, mean_shift, variance
    sim = simulate_finite_width(X, "relu", 4, 64, 1.5, 0.1, 1.0, 0.5, samples=16000, seed=0)
    sim.K_emp                                                               # (16000, 3, 3) simulated K^
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from resprop.numeric.theories.pdlt import kernel_distribution as kd


def run(quick: bool = False, seed: int = 0, samples: int | None = None, cases=kd.CASES, out=sys.stdout) -> list:
    """Scan every configuration of ``cases`` and print sections (a)-(c); returns the ``WidthScan`` results."""
    widths = kd.QUICK_WIDTHS if quick else kd.WIDTHS
    samples = samples or (5000 if quick else 16000)

    def say(line: str = "") -> None:
        print(line, file=out, flush=True)

    say(f"resprop.fluctuations vs simulation: gamma = {kd.GAMMA:g}, branch scale {kd.BRANCH_SCALE:g}, "
        f"sigma_w2 = {kd.SIGMA_W2:g}, sigma_b2 = {kd.SIGMA_B2:g}")
    say(f"inputs (norms {', '.join(f'{v:.2f}' for v in np.linalg.norm(kd.INPUTS, axis=1))}): "
        f"{kd.INPUTS.tolist()}")
    say(f"widths {widths}, {samples} networks per width, seed {seed}")
    scans = []
    t0 = time.perf_counter()
    for activation, depth in cases:
        scan = kd.width_scan(activation, depth, widths=widths, samples=samples, seed=seed)
        scans.append(scan)
        say()
        say(f"=== {scan.label} ({time.perf_counter() - t0:.0f} s)")
        say(f"(a) K^_ab at width {scan.histogram_width} vs N(nngp + mean_shift/n, variance/n)")
        say(f"    {'ab':>3} {'nngp':>8} {'mean pred':>9} {'mean sim':>9} {'sd pred':>8} {'sd sim':>8} "
            f"{'skew':>6} {'in 1sd':>6} {'in 2sd':>6} {'KS':>6}")
        for a, b in scan.pairs:
            h = scan.histogram_summary(int(a), int(b))
            say(f"    {a}{b:>2} {h['nngp']:8.4g} {h['mean_predicted']:9.4g} {h['mean_simulated']:9.4g} "
                f"{h['sd_predicted']:8.4g} {h['sd_simulated']:8.4g} {h['skewness']:6.2f} {h['within_1sd']:6.3f} "
                f"{h['within_2sd']:6.3f} {h['ks_distance']:6.3f}")
        say("    (Gaussian: skew 0, in 1sd 0.683, in 2sd 0.954)")
        say("(b) per width, over the elements: n Var_sim / variance; the mean's error in units of the simulated sd, "
            "|E K^ - prediction| / sd, for nngp + mean_shift/n and for nngp alone; the rule's worst scores (<= 1: "
            "accurate)")
        say(f"    {'n':>5} {'n Var/variance':>16} {'mean err/sd':>11} {'nngp alone':>10} {'score var':>9} "
            f"{'score mean':>10} {'verdict':>10}")
        V, M = kd_elements(scan, scan.variance), kd_elements(scan, scan.mean_shift)
        for i, n in enumerate(scan.widths):
            rv = scan.R[i] / V
            sd_n = np.sqrt(n * scan.R[i])  # n * the simulated standard deviation of K^
            say(f"    {n:5d} {rv.min():7.3f}..{rv.max():<7.3f} {np.max(np.abs(scan.shift[i] - M) / sd_n):11.3f} "
                f"{np.max(np.abs(scan.shift[i]) / sd_n):10.3f} {scan.engine.variance_score[i].max():9.2f} "
                f"{scan.engine.mean_score[i].max():10.2f} {scan.engine.status(i):>10}")
    say()
    say("(c) " + kd.RULE + "; '<= w': every simulated width is accurate; '> w': the largest is not")
    say(table(scans))
    say(f"({time.perf_counter() - t0:.0f} s)")
    return scans


def kd_elements(scan, matrix: np.ndarray) -> np.ndarray:
    """The elements a <= b of a P x P matrix, in the order of ``scan.pairs``."""
    return matrix[scan.pairs[:, 0], scan.pairs[:, 1]]


def _nstar(n, edge: bool, widths) -> str:
    if n is None:
        return f"> {widths[-1]}"
    return f"<= {n}" if edge else str(n)


def table(scans) -> str:
    """The summary table: per configuration the breakdown widths of the O(1/n) prediction (variance and mean; each
    alone), of the mean nngp alone and of PDLT's closure (B.25/B.26), the worst n Var_sim / variance at the
    largest width, at n* and at the width below n*, the closure's variance over the engine's, and the largest
    |z| of the width-extrapolated n Var against the engine's variance."""
    head = (f"{'configuration':<15} {'nngp diag':>13} {'var/K^2':>7} {'n*':>6} {'n* var':>6} {'n* mean':>7} "
            f"{'nngp mean':>9} {'closure':>7} {'nVar/var: max n':>15} {'at n*':>6} {'below':>6} "
            f"{'closure var/var':>15} {'extrap. z':>9}")
    lines = [head, "-" * len(head)]
    for s in scans:
        V = kd_elements(s, s.variance)
        diag = np.diagonal(s.nngp)
        e = s.engine

        def worst(n):
            if n is None:
                return "-"
            r = s.R[s.widths.index(n)] / V
            return f"{r[np.argmax(np.abs(r - 1))]:.3f}"

        below = "-"
        if e.width is not None and not e.at_edge:
            below = worst(s.widths[s.widths.index(e.width) - 1])
        cv = kd_elements(s, s.closure_variance) / V
        rel = np.max(np.diagonal(s.variance) / diag**2)  # n Var / K^2 of the diagonals: the relative spread
        ex = s.extrapolated_variance(64)
        z = max(abs(x.value - v) / math.hypot(x.se, x.systematic or 0.0) for x, v in zip(ex, V))
        lines.append(f"{s.label:<15} {diag.min():5.3g}..{diag.max():<6.3g} {rel:7.3g} "
                     f"{_nstar(e.width, e.at_edge, s.widths):>6} "
                     f"{_nstar(e.variance_width, e.variance_at_edge, s.widths):>6} "
                     f"{_nstar(e.mean_width, e.mean_at_edge, s.widths):>7} "
                     f"{_nstar(s.infinite_width.mean_width, s.infinite_width.mean_at_edge, s.widths):>9} "
                     f"{_nstar(s.closure.width, s.closure.at_edge, s.widths):>7} {worst(s.widths[-1]):>15} "
                     f"{worst(e.width):>6} {below:>6} {cv.min():6.3f}..{cv.max():<7.3f} {z:9.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="widths 2..256 and 5000 networks per width (under a minute); default: widths 2..512, "
                             "16000 networks")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulation, an integer >= 0; default: 0")
    parser.add_argument("--samples", type=int, default=None,
                        help="networks per width, an integer >= 40; default: 16000 (5000 with --quick)")
    args = parser.parse_args(argv)
    run(quick=args.quick, seed=args.seed, samples=args.samples)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
