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

The figures only plot what :mod:`resprop.numeric.theories.pdlt.residual_mlp` and
:mod:`resprop.numeric.theories.pdlt.corrected` compute (the Monte Carlo check is in the report's rows and in
docs/data/pdlt_finite_width_campaign.md).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from resprop.numeric.report.plotting import finish as _finish  # noqa: E402
from resprop.numeric.theories.pdlt import residual_mlp as rm  # noqa: E402

__all__ = ["make_figures", "FIGURE_NAMES"]

FIGURE_NAMES = ("pdlt_nu_gamma.png", "pdlt_r_star_gamma.png", "pdlt_finite_width.png")
#: activations of the finite-width figure (gamma^2 = 1/2)
FINITE_WIDTH_ACTIVATIONS = ("relu", "leaky_relu:0.5", "tanh", "gelu")
#: PDLT activations shown in figures 3 and 4.
PDLT_ACTIVATIONS = ("relu", "linear", "leaky_relu:0.1", "tanh", "erf")
_STYLE = {"relu": ("C0", "-"), "linear": ("C1", "-"), "leaky_relu:0.1": ("C2", "--"),
          "tanh": ("C3", "-"), "erf": ("C4", ":")}

def _settings(quick: bool) -> dict:
    if quick:
        return {"rec_gammas": (0.0, 0.5, 0.9), "rec_depth": 399}
    return {"rec_gammas": (0.0, 0.3, 0.6, 0.8, 0.9, 0.95), "rec_depth": 399}  # residual layers (PDLT's L = 400)


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


def make_figures(out: Path, *, quick: bool = False, seed: int = 0, data=None, progress: bool = False) -> list[Path]:
    """Write the PDLT PNGs into ``out`` and return their paths (deterministic: no sampling)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = _settings(bool(quick))
    paths = [_fig_nu(out / FIGURE_NAMES[0], cfg["rec_gammas"], cfg["rec_depth"])[0],
             _fig_r_star(out / FIGURE_NAMES[1], n_out=1), _fig_finite_width(out / FIGURE_NAMES[2])]
    if progress:
        for p in paths:
            print(f"[figures] wrote {p}", flush=True)
    return paths
