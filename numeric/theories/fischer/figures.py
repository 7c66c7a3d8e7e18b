"""Fischer, Dahmen & Helias (2025) figure: Fig. 2 (kernel, response) and Fig. 4c (rho*), theory vs simulation.

``fischer_fig2_fig4.png`` is drawn from the data of the report's claims
(:func:`resprop.numeric.theories.fischer.claims.claims`); run alone it computes them first.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["make_figures", "FIGURE_NAMES"]

FIGURE_NAMES = ("fischer_fig2_fig4.png",)


def make_figures(out: Path, *, quick: bool = False, seed: int = 0, data: dict | None = None,
                 progress: bool = False) -> list[Path]:
    """Write ``fischer_fig2_fig4.png`` into ``out``; ``data`` is the claims' extra (computed when None)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if not data:
        from resprop.numeric.theories.fischer.claims import claims

        _, data = claims(bool(quick), lambda: None)
    return [_draw(out / FIGURE_NAMES[0], data)]


def _draw(path: Path, ex: dict) -> Path:

    fig, axes = plt.subplots(2, 2, figsize=(12, 8.6))
    for ax, key, ylabel, title in ((axes[0, 0], "C", "C^(l)", "Fig. 2a: residual kernel C^(l)"),
                                   (axes[0, 1], "eta", "eta^(l)",
                                    "Fig. 2b: response eta^(l) (45) vs finite differences")):
        d = ex[key]
        ax.plot(d["layer"], d["theory"], "C3-", lw=1.6, label="theory")
        ax.errorbar(d["layer"], d["mc_mean"], yerr=2 * np.asarray(d["mc_se"]), fmt="o", ms=3.5, color="k",
                    capsize=2, label=f"Monte Carlo, N = {ex['N']}, {ex['samples']} nets (2 SE)")
        ax.set_xlabel("layer l")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    ax = axes[1, 0]
    d = ex["var"]
    ax.plot(d["layer"], d["theory"], "C3-", lw=1.6, label="full G_CC block sum (C18-C19)")
    ax.plot(d["layer"], ex["var_C20"], "C0--", lw=1.4, label="(C20) diagonal sum only")
    ax.errorbar(d["layer"], d["mc_var"], yerr=2 * np.asarray(d["mc_se"]), fmt="o", ms=3.5, color="k", capsize=2,
                label="Monte Carlo (2 SE)")
    ax.set_xlabel("layer l")
    ax.set_ylabel("Var K^(l)")
    ax.set_title("kernel fluctuations: C20 omits inter-layer covariances", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax = axes[1, 1]
    small = ex["rho_small"]
    ax.axhspan(0.1, 0.3, color="0.9", label="paper: rho* in [0.1, 0.3]")
    ax.plot(small["depth"], small["diag"], "o-", color="C3", label="rho* diagonal")
    ax.plot(small["depth"], small["off"], "s-", color="C0", mfc="none", label="rho* off-diagonal")
    ax.plot(ex["rho_depths"], ex["rho"], "D", color="C3", mfc="none", label="rho*, L = 200..1600")
    L = np.geomspace(10, 1600, 50)
    ax.plot(L, ex["rho"][0] * np.sqrt(ex["rho_depths"][0] / L), "k:", lw=1, label="L^(-1/2) (eq. 62)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("depth L")
    ax.set_ylabel("rho* = argmax chi_out")
    ax.set_title("Fig. 4c: rho*(L), K^(0) = 0.05, sigma_w^2 = 1.25, sigma_b^2 = 0.05", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.suptitle("Fischer, Dahmen & Helias (2025): theory vs finite-width simulation "
                 "(rho = 1, sigma_w^2 = 1.2, sigma_b^2 = 0.2, erf, K^(0) = 1.4)", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
