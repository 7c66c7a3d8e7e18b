"""Li-Nica-Roy (2021) reproduction figures (PNG).

``lognormal_fig1_density.png``
    Li, Nica & Roy (2021) Fig. 1: density of ln||z_out||^2 (||x|| = 1, n_out = n_in = 10) for vanilla and
    balanced ResNets, n = 100, alpha = lam = 1/sqrt(2), three depths.  Monte Carlo histogram vs. the
    log-Gaussian theory (Theorem 1 / Theorem 4 with App. C.3) and the infinite-width (Gaussian) curve.
    The vanilla mean uses the simulation's own hypoactivation constant C_hat (Prop. 2).
``lognormal_fig2_moments_vs_width.png``
    Li, Nica & Roy (2021) Fig. 2: E[G] and Var[G] vs width at d/n = 1, simulation (95% error bars) vs
    theory, and |simulation - theory| vs n on log-log axes with a 1/n reference slope.

The figures only plot what :mod:`resprop.numeric.engine.monte_carlo` and
:mod:`resprop.numeric.theories.lognormal.log_gaussian` compute; no formula lives here.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from resprop.numeric.engine import monte_carlo as mc  # noqa: E402
from resprop.numeric.report.plotting import finish as _finish  # noqa: E402
from resprop.numeric.report.plotting import histogram_density
from resprop.numeric.theories.lognormal import log_gaussian as lgt  # noqa: E402

__all__ = ["make_figures", "histogram_density", "log_output_norm_sq", "FIGURE_NAMES", "PAPER_HYPO_CONSTANT"]

FIGURE_NAMES = ("lognormal_fig1_density.png", "lognormal_fig2_moments_vs_width.png")

#: Li-Nica-Roy alpha = lam = 1/sqrt(2) (alpha^2 + lam^2 = 1, so no depth-dependent shift).
ALPHA = LAM = 1.0 / math.sqrt(2.0)
#: Fig. 1: n_in = n_out = 10, width 100.
N_IN = N_OUT = 10
FIG1_WIDTH = 100
#: The paper's Monte Carlo estimate of C_{alpha,lambda} for alpha = lam = 1/sqrt(2) (shown for reference only).
PAPER_HYPO_CONSTANT = -0.876

def _settings(quick: bool) -> dict:
    if quick:
        return {"fig1_depths": (10, 30, 100), "fig1_samples": 3000, "fig2_widths": (16, 32, 64), "fig2_samples": 3000}
    return {"fig1_depths": (25, 100, 300), "fig1_samples": 20000, "fig2_widths": (16, 32, 64, 128),
            "fig2_samples": 40000}


def log_output_norm_sq(s: mc.LogGaussianSamples, n_in: int = N_IN) -> np.ndarray:
    """ln||z_out||^2 for an input with ||x|| = 1.

    The engine starts from z^0 ~ N(0, I_n), i.e. ||x||^2 = n_in (eq. (15)); rescaling to ||x|| = 1
    divides ||z_out||^2 by n_in.
    """
    if s.z_out is None:
        raise ValueError("samples were simulated without read-out (n_out = 0)")
    return np.log(np.einsum("ij,ij->i", s.z_out, s.z_out)) - math.log(n_in)


# ---------------------------------------------------------------------------
# Li-Nica-Roy Fig. 1
# ---------------------------------------------------------------------------


def _fig_lnr_density(path: Path, depths, samples: int, seed: int) -> tuple[Path, dict]:
    n = FIG1_WIDTH
    shift = -math.log(N_IN)
    fig, axes = plt.subplots(2, len(depths), figsize=(4.2 * len(depths), 7.4), squeeze=False)
    notes = {}
    k = 0
    for row, balanced in enumerate((False, True)):
        for col, d in enumerate(depths):
            ax = axes[row, col]
            s = mc.simulate_log_gaussian(width=n, depth=d, alpha=ALPHA, lam=LAM, balanced=balanced, samples=samples,
                                         seed=seed + k, n_out=N_OUT)
            k += 1
            y_mc = log_output_norm_sq(s, N_IN)
            centres, dens, edges = histogram_density(y_mc, bins=70)
            if balanced:
                C = None
                th = lgt.theory(n, d, ALPHA, LAM, balanced=True)
            else:
                C = mc.hypoactivation(s)["C_hat"]
                th = lgt.theory(n, d, ALPHA, LAM, balanced=False, hypo_constant=C)
            lo, hi = edges[0], edges[-1]
            pad = 0.15 * (hi - lo)
            y = np.linspace(lo - pad, hi + pad, 1201)
            p_th = lgt.log_output_density(y, n_out=N_OUT, mean_G=th["mean_G"], var_G=th["var_G"], shift=shift)
            p_inf = lgt.infinite_width_log_density(y, n_out=N_OUT, shift=shift)
            ax.hist(y_mc, bins=edges, density=True, color="0.7", edgecolor="0.55", linewidth=0.4,
                    label=f"Monte Carlo ({samples} nets)")
            ax.plot(y, p_th, "C3-", lw=1.8, label="log-Gaussian theory")
            ax.plot(y, p_inf, "C0--", lw=1.4, label=r"infinite width ($\chi^2_{10}$)")
            ax.set_xlim(y[0], y[-1])
            ax.set_xlabel(r"$\ln\|z_{\mathrm{out}}\|^2$")
            ax.set_ylabel("density")
            kind = "vanilla" if not balanced else "balanced"
            extra = f", $\\hat C$={C:.3f}" if C is not None else ""
            ax.set_title(f"{kind}, d={d} (d/n={d / n:g})\nE[G]={th['mean_G']:.2f}, Var[G]={th['var_G']:.2f}{extra}",
                         fontsize=9)
            ax.legend(fontsize=7, loc="upper left")
            g = mc.g_moments(s)
            notes[(kind, d)] = {"theory_mean_G": th["mean_G"], "theory_var_G": th["var_G"], "mc": g, "C_hat": C}
    fig.suptitle("Li, Nica & Roy (2021), Fig. 1: density of ln||z_out||^2, vanilla (top) vs balanced (bottom) "
                 f"ResNet\nn={n}, n_in=n_out={N_IN}, ||x||=1, alpha=lam=1/sqrt(2); vanilla theory uses the "
                 f"simulation's C_hat (paper: C={PAPER_HYPO_CONSTANT})", fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 0.955))
    caption = (f"Monte Carlo: reduced engine, {samples} samples per panel, seeds {seed}..{seed + k - 1}. "
               "Theory: G ~ N(E[G], Var[G]) (Thm 1 / Thm 4) convolved with ln chi^2(n_out), shift -ln n_in.")
    return _finish(fig, path, caption), notes


# ---------------------------------------------------------------------------
# Li-Nica-Roy Fig. 2
# ---------------------------------------------------------------------------


def _fig_lnr_moments(path: Path, widths, samples: int, seed: int) -> tuple[Path, dict]:
    widths = tuple(int(w) for w in widths)
    kinds = (("vanilla", False, "C3"), ("balanced", True, "C0"))
    res = {}
    k = 0
    for kind, balanced, _ in kinds:
        rows = []
        for n in widths:
            s = mc.simulate_log_gaussian(width=n, depth=n, alpha=ALPHA, lam=LAM, balanced=balanced, samples=samples,
                                         seed=seed + 100 + k)
            k += 1
            g = mc.g_moments(s)
            C = None if balanced else mc.hypoactivation(s)["C_hat"]
            th = lgt.theory(n, n, ALPHA, LAM, balanced=balanced, hypo_constant=C)
            rows.append({"n": n, "C_hat": C, **g.to_dict(), "th_mean": th["mean_G"], "th_var": th["var_G"]})
        res[kind] = rows

    fine = np.unique(np.geomspace(widths[0], widths[-1], 40).round().astype(int))
    fig, (ax_m, ax_v, ax_e) = plt.subplots(1, 3, figsize=(15, 4.9))
    for kind, balanced, color in kinds:
        rows = res[kind]
        n_arr = np.array([r["n"] for r in rows], float)
        m = np.array([r["mean_G"] for r in rows])
        m_se = np.array([r["mean_G_se"] for r in rows])
        v = np.array([r["var_G"] for r in rows])
        v_se = np.array([r["var_G_se"] for r in rows])
        thm = np.array([r["th_mean"] for r in rows])
        thv = np.array([r["th_var"] for r in rows])
        ax_m.errorbar(n_arr, m, yerr=1.96 * m_se, fmt="o", color=color, capsize=3, label=f"{kind}: Monte Carlo")
        ax_v.errorbar(n_arr, v, yerr=1.96 * v_se, fmt="o", color=color, capsize=3, label=f"{kind}: Monte Carlo")
        fine_th = [lgt.theory(int(nn), int(nn), ALPHA, LAM, balanced=balanced,
                              hypo_constant=None if balanced else PAPER_HYPO_CONSTANT) for nn in fine]
        ax_v.plot(fine, [t["var_G"] for t in fine_th], "-", color=color, label=f"{kind}: theory")
        if balanced:
            ax_m.plot(fine, [t["mean_G"] for t in fine_th], "-", color=color, label=f"{kind}: theory")
        else:
            ax_m.plot(n_arr, thm, "-", color=color, label=f"{kind}: theory with C_hat(n)")
            ax_m.plot(fine, [t["mean_G"] for t in fine_th], ":", color=color,
                      label=f"{kind}: theory with paper C={PAPER_HYPO_CONSTANT}")
        for diff, se, marker, label in ((np.abs(m - thm), m_se, "o", "E[G]"), (np.abs(v - thv), v_se, "s", "Var[G]")):
            ax_e.plot(n_arr, np.maximum(diff, 1e-6), marker, color=color, ls="-",
                      mfc=color if marker == "s" else "none", label=f"{kind}: |sim - theory| {label}")
            ax_e.plot(n_arr, 1.96 * se, marker, color=color, ls=":", ms=3, alpha=0.6)
        if not balanced:
            ref_anchor = float(np.abs(v - thv)[0])
    n_arr = np.array(widths, float)
    ax_e.plot(n_arr, ref_anchor * n_arr[0] / n_arr, "k--", lw=1, label=r"reference slope $\propto 1/n$")
    ax_e.plot([], [], "k:", ms=3, label="1.96 SE (noise floor)")
    for ax, ylabel, title in ((ax_m, "E[G]", "mean of G"), (ax_v, "Var[G]", "variance of G")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(n_arr)
        ax.set_xticklabels([str(w) for w in widths])
        ax.set_xlabel("width n (depth d = n)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    ax_e.set_xscale("log", base=2)
    ax_e.set_yscale("log")
    ax_e.set_xticks(n_arr)
    ax_e.set_xticklabels([str(w) for w in widths])
    ax_e.set_xlabel("width n (depth d = n)")
    ax_e.set_ylabel("|simulation - theory|")
    ax_e.set_title("finite-width error (dotted: 1.96 SE)", fontsize=10)
    ax_e.legend(fontsize=6.5, ncol=1)
    fig.suptitle("Li, Nica & Roy (2021), Fig. 2: E[G] and Var[G] vs width at d/n = 1, "
                 "alpha=lam=1/sqrt(2)", fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 0.965))
    caption = (f"Monte Carlo: reduced engine, {samples} samples per point, error bars 1.96 SE (mean: sample SE, "
               f"variance: jackknife), seeds {seed + 100}..{seed + 100 + k - 1}. Vanilla theory mean uses the "
               "simulation's hypoactivation constant C_hat at each n (Prop. 2); variances need no C.")
    return _finish(fig, path, caption), res



def make_figures(out: Path, *, quick: bool = False, seed: int = 0, data=None, progress: bool = False) -> list[Path]:
    """Write the two Li-Nica-Roy PNGs into ``out`` and return their paths.

    ``quick`` uses smaller depths/widths and 3000 Monte Carlo samples (a few seconds); the full run uses the
    paper's setting (d = 25, 100, 300; n up to 128) with 20000-40000 samples.  Simulation seeds are
    ``seed + k`` for fixed offsets k, so the output is deterministic given ``seed``.  ``data`` is unused (the
    figures simulate their own networks).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"seed: must be >= 0, got {seed}")
    cfg = _settings(bool(quick))
    t0 = time.perf_counter()
    paths = []
    for p in (_fig_lnr_density(out / FIGURE_NAMES[0], cfg["fig1_depths"], cfg["fig1_samples"], seed)[0],
              _fig_lnr_moments(out / FIGURE_NAMES[1], cfg["fig2_widths"], cfg["fig2_samples"], seed)[0]):
        paths.append(p)
        if progress:
            print(f"[figures] wrote {p} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return paths
