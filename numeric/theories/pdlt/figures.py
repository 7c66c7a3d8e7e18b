"""PDLT (Roberts, Yaida & Hanin) App. B reproduction figures (PNG).

``pdlt_nu_gamma.png``
    nu(gamma) of (B.29)/(B.35) vs the per-layer slope of V/K^2 obtained by iterating the kernel and
    four-point-vertex recursions (B.12), (B.26).
``pdlt_r_star_gamma.png``
    optimal aspect ratio r*(gamma) (B.36) and its inverse gamma*(r), with the large-r asymptotes
    1 - gamma*^2 ~ 1/((20 + 3 n_L) r) (scale-invariant) and 3/((20 + 3 n_L) r) (K* = 0).
``pdlt_finite_width.png``
    R(d) = lim n Var[||z^d||^2/n]/E^2 at fixed depth by the corrected recursion and by B.26 (gamma^2 = 1/2, four
    activations), and the corrected deep slope nu(gamma) against B.29 for the scale-invariant class.
``pdlt_kernel_distribution.png``
    The kernel of untrained width-n residual networks (ReLU and tanh, depth 4 and 16) against
    ``resprop.fluctuations``: the histogram of K^_01 at width 64 with the predicted Gaussian
    N(nngp + mean_shift/n, variance/n) and the infinite-width nngp; n Var[K^_ab] / variance against width with the
    breakdown width n* of :mod:`resprop.numeric.theories.pdlt.kernel_distribution` (Monte Carlo, seeded by
    ``seed``).

The first three figures only plot what :mod:`resprop.numeric.theories.pdlt.residual_mlp` and
:mod:`resprop.numeric.theories.pdlt.corrected` compute (the Monte Carlo check is in the report's rows and in
docs/data/pdlt_finite_width_campaign.md); the fourth plots :func:`kernel_distribution.width_scan`.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import ticker as _ticker  # noqa: E402

from resprop.numeric.report.plotting import finish as _finish  # noqa: E402
from resprop.numeric.report.plotting import histogram_density  # noqa: E402
from resprop.numeric.theories.pdlt import residual_mlp as rm  # noqa: E402

__all__ = ["make_figures", "kernel_distribution_figure", "FIGURE_NAMES"]

FIGURE_NAMES = ("pdlt_nu_gamma.png", "pdlt_r_star_gamma.png", "pdlt_finite_width.png",
                "pdlt_kernel_distribution.png")
#: activations of the finite-width figure (gamma^2 = 1/2)
FINITE_WIDTH_ACTIVATIONS = ("relu", "leaky_relu:0.5", "tanh", "gelu")
#: the top of the n Var / variance panels of pdlt_kernel_distribution.png (larger ratios: triangles at the edge)
CLIP = 4.0
#: PDLT activations shown in figures 3 and 4.
PDLT_ACTIVATIONS = ("relu", "linear", "leaky_relu:0.1", "tanh", "erf")
_STYLE = {"relu": ("C0", "-"), "linear": ("C1", "-"), "leaky_relu:0.1": ("C2", "--"),
          "tanh": ("C3", "-"), "erf": ("C4", ":")}

def _settings(quick: bool) -> dict:
    if quick:
        return {"rec_gammas": (0.0, 0.5, 0.9), "rec_depth": 399, "kd_widths": (8, 16, 32, 64, 128),
                "kd_samples": 3000}
    # kd_*: the scans of examples/fluctuations_width.py (kernel_distribution.WIDTHS, the same networks and seeds:
    # the same numbers)
    return {"rec_gammas": (0.0, 0.3, 0.6, 0.8, 0.9, 0.95), "rec_depth": 399,  # residual layers (PDLT's L = 400)
            "kd_widths": None, "kd_samples": 16000}


# ---------------------------------------------------------------------------
# PDLT App. B
# ---------------------------------------------------------------------------


def _fig_nu(path: Path, gammas, depth: int) -> tuple[Path, dict]:
    grid = np.linspace(0.0, 0.995, 400)
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    rec = {}
    for act in PDLT_ACTIVATIONS:
        color, ls = _STYLE[act]
        ax.plot(grid, rm.nu(grid, act), ls, color=color, lw=1.6, label=f"{act}: closed form")
        slopes = []
        for g in gammas:
            tr = rm.vertex_trajectory(act, gamma=float(g), depth=depth)
            slopes.append(float(np.diff(tr["V_over_K2"])[-1]))
        rec[act] = slopes
        ax.plot(gammas, slopes, "o" if act != "erf" else "x", color=color, mfc="none", ms=7,
                label=f"{act}: recursion, slope at depth {depth}")
    ax.set_yscale("log")
    ax.set_xlabel(r"residual weight $\gamma$")
    ax.set_ylabel(r"$\nu(\gamma)$  (growth of $V/(nK^2)$ per layer, times n)")
    ax.set_xlim(0, 1)
    ax.legend(fontsize=7, ncol=2, loc="lower left")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(r"PDLT App. B (B.29, B.35): $\nu(\gamma)$ at criticality, closed form vs recursion"
                 f"\nC_W = C_W(gamma), C_b = 0, K1 = 1; markers: last increment of V/K^2 after {depth} residual layers "
                 "of (B.12), (B.26)", fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    caption = "tanh and erf share nu(gamma) (K* = 0 class); markers for erf are crosses."
    return _finish(fig, path, caption), rec


def _fig_r_star(path: Path, n_out: int = 1) -> Path:
    grid = np.linspace(0.0, 0.999, 500)
    r = np.geomspace(1e-2, 1e4, 400)
    a = 20 + 3 * n_out
    fig, (ax_r, ax_g, ax_a) = plt.subplots(1, 3, figsize=(15.5, 4.9))
    for act in PDLT_ACTIVATIONS:
        color, ls = _STYLE[act]
        ax_r.plot(grid, rm.r_star(grid, act, n_out), ls, color=color, lw=1.6, label=act)
        gs = rm.gamma_star(r, act, n_out)
        ax_g.plot(r, gs, ls, color=color, lw=1.6, label=act)
        ax_a.plot(r, 1 - gs**2, ls, color=color, lw=1.6, label=act)
    ax_a.plot(r, 1 / (a * r), "k--", lw=1, label="1/((20+3n_L) r) (scale-invariant)")
    ax_a.plot(r, 3 / (a * r), "--", color="0.5", lw=1, label="3/((20+3n_L) r) (K* = 0)")
    ax_r.set_yscale("log")
    ax_r.set_xlabel(r"$\gamma$")
    ax_r.set_ylabel(r"$r^*(\gamma) = 4/((20+3n_L)\,\nu(\gamma))$")
    ax_r.set_title("optimal aspect ratio r* = L/n (B.36)", fontsize=10)
    ax_g.set_xscale("log")
    ax_g.set_xlabel("aspect ratio r = L/n")
    ax_g.set_ylabel(r"$\gamma^*(r)$")
    ax_g.set_title(r"inverse $\gamma^*(r)$ (0 for $r \leq r^*(0)$)", fontsize=10)
    ax_a.set_xscale("log")
    ax_a.set_yscale("log")
    ax_a.set_ylim(1e-6, 2)
    ax_a.set_xlabel("aspect ratio r = L/n")
    ax_a.set_ylabel(r"$1 - \gamma^{*2}$")
    ax_a.set_title("large-r asymptotes (dashed)", fontsize=10)
    for ax in (ax_r, ax_g, ax_a):
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(f"PDLT App. B: optimal aspect ratio r*(gamma) and gamma*(r) of residual MLPs, n_L = {n_out}, "
                 "critical C_W(gamma), C_b = 0", fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 0.965))
    caption = (f"20 + 3 n_L = {a}. Scale-invariant: relu, linear, leaky_relu:0.1; K* = 0: tanh, erf "
               "(identical curves).")
    return _finish(fig, path, caption)



def _fig_finite_width(path: Path, depth: int = 16, gamma2: float = 0.5) -> Path:
    from resprop.numeric.theories.pdlt import corrected as C

    fig, (ax_r, ax_n) = plt.subplots(1, 2, figsize=(13, 4.9))
    d = np.arange(0, depth + 1)
    for i, act in enumerate(FINITE_WIDTH_ACTIVATIONS):
        tr = C.corrected_trajectory(act, gamma2, depth)
        ax_r.plot(d[1:], tr.ratio_corrected[1:], "-o", color=f"C{i}", ms=3, lw=1.6, label=f"{act}: corrected")
        ax_r.plot(d[1:], tr.ratio_b26[1:], "--", color=f"C{i}", lw=1.2, label=f"{act}: B.26")
    ax_r.set_yscale("log")
    ax_r.set_xlabel("depth d (residual layers)")
    ax_r.set_ylabel(r"$R(d) = \lim_n\, n\,\mathrm{Var}[\|z^{(d)}\|^2/n] / E^2$")
    ax_r.set_title(rf"fixed depth, $n \to \infty$, $\gamma^2 = {gamma2:g}$, critical $C_W$, $K^{{(0)}} = 1$",
                   fontsize=10)
    grid = np.linspace(0.0, 0.95, 96)
    for i, act in enumerate(("relu", "leaky_relu:0.5")):
        ax_n.plot(grid, [C.nu_corrected(act, g * g) for g in grid], "-", color=f"C{i}", lw=1.6,
                  label=f"{act}: corrected")
        ax_n.plot(grid, rm.nu(grid, act), "--", color=f"C{i}", lw=1.2, label=f"{act}: B.29")
    ax_n.set_yscale("log")
    ax_n.set_xlabel(r"residual weight $\gamma$")
    ax_n.set_ylabel(r"deep slope $\nu(\gamma)$ of $R(d)$")
    ax_n.set_title("scale-invariant class: corrected nu vs B.29", fontsize=10)
    for ax in (ax_r, ax_n):
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both")
    fig.suptitle("PDLT App. B: B.26 drops the same-neuron cross-layer source; the corrected O(1/n) recursion keeps it",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    caption = ("Both curves agree at d = 1 and at gamma = 0. Against simulation (n = 128..4096 extrapolated) the "
               "corrected R(d) is within 2.4 SE of all 64 campaign rows (docs/data).")
    return _finish(fig, path, caption)


def kernel_distribution_figure(path: Path, *, quick: bool = False, seed: int = 0, scans=None) -> Path:
    """``pdlt_kernel_distribution.png``: for each configuration of ``kernel_distribution.CASES`` (columns) the
    histogram of the simulated K^_ab (``HISTOGRAM_ELEMENT``) at ``HISTOGRAM_WIDTH`` with the predicted Gaussian and
    the infinite-width nngp (top), and n Var[K^_ab] / variance against width for every element a <= b with the
    10% band, the closure's ratio and the breakdown width n* (bottom).  ``scans``: the ``width_scan`` results to
    draw (one per case, in order); by default they are simulated here (quick: widths 8..128, 3000 networks per
    width; full: 2..512, 16000, as examples/fluctuations_width.py), seeded by ``seed``."""
    from resprop.numeric.theories.pdlt import kernel_distribution as kd

    cfg = _settings(bool(quick))
    if scans is None:
        widths = cfg["kd_widths"] or kd.WIDTHS
        scans = [kd.width_scan(act, depth, widths=widths, samples=cfg["kd_samples"], seed=seed)
                 for act, depth in kd.CASES]
    a, b = kd.HISTOGRAM_ELEMENT
    fig, axes = plt.subplots(2, len(scans), figsize=(4.4 * len(scans), 8.4), squeeze=False)
    for j, s in enumerate(scans):
        ax_h, ax_v = axes[0, j], axes[1, j]
        col = s.element(a, b)
        # top: the distribution of K^_ab at one width
        if s.histogram_samples is not None:
            n = s.histogram_width
            x = s.histogram_samples[:, a, b]
            h = s.histogram_summary(a, b)
            _, dens, edges = histogram_density(x, bins=50)
            ax_h.stairs(dens, edges, fill=True, color="0.75", label=f"simulated ({x.size} networks)")
            grid = np.linspace(edges[0], edges[-1], 400)
            mu, sd = h["mean_predicted"], h["sd_predicted"]
            ax_h.plot(grid, np.exp(-0.5 * ((grid - mu) / sd) ** 2) / (sd * np.sqrt(2 * np.pi)), "C0-", lw=1.8,
                      label=r"$N(K + M/n,\ V/n)$ predicted")
            ax_h.axvline(h["nngp"], color="k", ls="--", lw=1.2, label="infinite width: nngp")
            ax_h.axvline(h["mean_simulated"], color="C3", ls=":", lw=1.4, label="simulated mean")
            ax_h.text(0.98, 0.97, f"sd: sim {h['sd_simulated']:.3g}, pred {sd:.3g}\nskewness {h['skewness']:.2f}\n"
                                  f"within pred. 1 sd: {h['within_1sd']:.3f}\nKS distance {h['ks_distance']:.3f}",
                      transform=ax_h.transAxes, ha="right", va="top", fontsize=7.5,
                      bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})
            ax_h.set_xlabel(rf"$\hat K_{{{a}{b}}}$ at width n = {n}")
            ax_h.set_ylim(0, 1.6 * float(np.max(dens)))
            if j == 0:
                ax_h.legend(fontsize=6.5, loc="upper left")
        ax_h.set_title(f"{s.activation}, depth {s.depth}", fontsize=10)
        ax_h.set_ylabel("density")
        # bottom: n Var / variance against width
        ws = np.asarray(s.widths, dtype=float)
        V = s.variance[s.pairs[:, 0], s.pairs[:, 1]]
        ax_v.axhspan(1 - kd.REL_TOL, 1 + kd.REL_TOL, color="C2", alpha=0.15, lw=0,
                     label=f"engine +-{kd.REL_TOL:.0%}")
        ax_v.axhline(1.0, color="C2", lw=1.2)
        other = (col + 1) % len(V)
        closure = s.closure_variance[a, b] / s.variance[a, b]
        bottom = min(0.5, closure * 0.9)
        top = min(max(1.3, float(np.nanmax(s.R / V[None, :])) * 1.15), CLIP)
        edge = top / 1.04
        for k in range(len(V)):
            jitter = 2 ** (0.06 * (k - (len(V) - 1) / 2))
            hl = k == col
            label = f"{a}{b} (histogram), 2 SE" if hl else ("other elements" if k == other else None)
            ratio, err = s.R[:, k] / V[k], 2 * s.R_se[:, k] / V[k]
            out = ratio > edge  # off the scale: a triangle at the top edge
            lower = np.minimum(err, np.maximum(ratio - bottom, 0.0))  # a log axis: bars end at its bottom
            color = "C0" if hl else "0.55"
            ax_v.errorbar((ws * jitter)[~out], ratio[~out], yerr=np.stack([lower, err])[:, ~out],
                          fmt="o" if hl else ".", ms=5 if hl else 3, color=color, lw=1, capsize=2 if hl else 0,
                          label=label)
            ax_v.plot((ws * jitter)[out], np.full(int(out.sum()), edge), "^", color=color, ms=5 if hl else 3)
        ax_v.axhline(closure, color="C1", ls=":", lw=1.4, label=f"PDLT closure (B.25/26), element {a}{b}")
        e = s.engine
        if e.width is not None:
            ax_v.axvline(e.width, color="k", ls="--", lw=1.0)

        def nstar(width, at_edge, name="n*"):
            return f"{name} > {s.widths[-1]}" if width is None else f"{name} {'<=' if at_edge else '='} {width}"

        star = (f"{nstar(e.width, e.at_edge)} ({nstar(e.variance_width, e.variance_at_edge, 'variance')}, "
                f"{nstar(e.mean_width, e.mean_at_edge, 'mean')})")
        if e.width is None:
            star += f"\nwidth {s.widths[-1]}: {e.status(len(s.widths) - 1)} at {s.samples} networks"
        elif not e.at_edge:
            i = s.widths.index(e.width) - 1
            star += f"\nwidth {s.widths[i]}: {e.status(i)} at {s.samples} networks"
        ax_v.set_xscale("log", base=2)
        ax_v.set_yscale("log")
        ax_v.set_ylim(bottom, top)
        ticks = [t for t in (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0) if bottom <= t <= top]
        ax_v.yaxis.set_major_locator(_ticker.FixedLocator(ticks))
        ax_v.yaxis.set_major_formatter(_ticker.FixedFormatter([f"{t:g}" for t in ticks]))
        ax_v.yaxis.set_minor_formatter(_ticker.NullFormatter())
        ax_v.set_xlabel("width n")
        ax_v.set_ylabel(r"$n\,\mathrm{Var}[\hat K_{ab}]$ / engine variance")
        ax_v.set_title(star, fontsize=9)
        if j == 0:
            ax_v.legend(fontsize=7, loc="upper right")
        for ax in (ax_h, ax_v):
            ax.grid(alpha=0.3, which="both")
    fig.suptitle(f"Kernel of untrained width-n residual networks vs resprop.fluctuations (gamma = {kd.GAMMA:g}, "
                 f"branch scale {kd.BRANCH_SCALE:g}, sigma_w2 = {kd.SIGMA_W2:g}, sigma_b2 = {kd.SIGMA_B2:g}, "
                 f"3 inputs of norms 0.6, 1.41, 1.75)", fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    caption = (f"K = nngp, M = mean_shift, V = variance of resprop.fluctuations. Monte Carlo: {scans[0].samples} "
               f"networks per width (seed {scans[0].seed}); error bars 2 SE "
               f"(jackknife); triangles: above the axis; dashed line: n*. {kd.RULE}; n* > w: not accurate (or not "
               "resolved) at the largest width.")
    return _finish(fig, path, caption)


def make_figures(out: Path, *, quick: bool = False, seed: int = 0, data=None, progress: bool = False) -> list[Path]:
    """Write the PDLT PNGs into ``out`` and return their paths (deterministic: the Monte Carlo of the fourth is
    seeded by ``seed``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = _settings(bool(quick))
    paths = [_fig_nu(out / FIGURE_NAMES[0], cfg["rec_gammas"], cfg["rec_depth"])[0],
             _fig_r_star(out / FIGURE_NAMES[1], n_out=1), _fig_finite_width(out / FIGURE_NAMES[2]),
             kernel_distribution_figure(out / FIGURE_NAMES[3], quick=bool(quick), seed=int(seed))]
    if progress:
        for p in paths:
            print(f"[figures] wrote {p}", flush=True)
    return paths
