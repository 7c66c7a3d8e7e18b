"""The theory's figure: ``schoenholz_depth_scales.png``, the depth scales of a deep tanh network across the
order-to-chaos transition at sigma_b^2 = 0.05 (left: xi_q and xi_c against sigma_w^2; right: xi_c against
|sigma_w^2 - sigma_c^2| on log-log axes with the fitted exponents and the |.|^-1 law).

The figure only plots what the driver computes; the right panel reuses the claims' divergence fit when
``resprop reproduce`` passes it as ``data``.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["make_figures", "FIGURE_NAMES"]

FIGURE_NAMES = ("schoenholz_depth_scales.png",)


def make_figures(out_dir: Path, *, quick: bool = False, seed: int = 0, data: dict | None = None,
                 progress: bool = False) -> list[Path]:
    """Write ``schoenholz_depth_scales.png`` into ``out_dir``; ``data`` is the claims' extra (computed when None).
    Nothing here is random (``seed`` is accepted for the common signature)."""
    from resprop_schoenholz.claims import OFFSETS, PAPER_SIGMA_B2
    from resprop_schoenholz.driver import depth_scales, divergence_fit

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    divergence = (data or {}).get("divergence") or divergence_fit("tanh", PAPER_SIGMA_B2, OFFSETS)
    sigma_c2 = divergence["sigma_c2"]
    grid = np.linspace(0.6, 4.0, 60 if quick else 240)
    grid = np.sort(np.concatenate([grid, sigma_c2 * (1 + np.array([-1e-3, -1e-2, 1e-2, 1e-3]))]))
    scales = [depth_scales("tanh", s, PAPER_SIGMA_B2) for s in grid]
    xi_q = np.array([np.nan if r.xi_q is None else r.xi_q for r in scales])
    xi_c = np.array([np.nan if r.xi_c is None else r.xi_c for r in scales])

    fig, (left, right) = plt.subplots(1, 2, figsize=(11.5, 4.4))
    left.semilogy(grid, xi_c, "C3-", lw=1.6, label=r"$\xi_c$")
    left.semilogy(grid, xi_q, "C0-", lw=1.4, label=r"$\xi_q$")
    left.axvline(sigma_c2, color="k", ls=":", lw=1, label=rf"$\sigma_c^2 = {sigma_c2:.4f}$")
    left.set_xlabel(r"$\sigma_w^2$")
    left.set_ylabel("depth scale (layers)")
    left.set_title(rf"tanh, $\sigma_b^2 = {PAPER_SIGMA_B2}$: ordered | chaotic", fontsize=10)
    left.legend(fontsize=8)
    left.grid(alpha=0.3, which="both")
    for side, style in (("ordered", "o"), ("chaotic", "s")):
        d = divergence[side]
        right.loglog(d["delta"], d["xi_c"], style, mfc="none", label=f"{side}: fitted exponent {d['slope']:.4f}")
    delta = np.geomspace(min(divergence["ordered"]["delta"]), max(divergence["ordered"]["delta"]), 20)
    amp = divergence["ordered"]["amplitude"]
    right.loglog(delta, amp / delta, "k--", lw=1, label=r"$\propto |\sigma_w^2 - \sigma_c^2|^{-1}$")
    right.set_xlabel(r"$|\sigma_w^2 - \sigma_c^2|$")
    right.set_ylabel(r"$\xi_c$")
    right.set_title(r"divergence of $\xi_c$ at the order-to-chaos line", fontsize=10)
    right.legend(fontsize=8)
    right.grid(alpha=0.3, which="both")
    fig.suptitle("Schoenholz et al. (2017): depth scales of a deep tanh network (resprop-schoenholz)", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    path = out_dir / FIGURE_NAMES[0]
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [path]
