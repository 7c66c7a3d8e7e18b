"""Predictive-coding figures (PNG, matplotlib "Agg"): Innocenti, Achour & Bogacz (2025), Figs 2, 3, 4, A.9, A.18.

:func:`make_figures` writes two files:

``abcd_pc_s_theta_vs_L_over_N.png``
    (left) s(theta) - 1 at initialisation vs L/N for mean-field linear MLPs and residual networks
    (alpha = 1/2), Monte Carlo means with SEs (exact O(L) sampler) against the exact expectations
    (L - 1)/N and L((1 + 1/L)^{L-1} - 1)/N, with the asymptote (e - 1) L/N (eq. 19) and fitted
    exponents; (right) s - 1 vs N at depth 3 (L = 5): Theta(1/N) under mean-field (eq. 16), Theta(1) under SP
    (Fig. A.19), and the ResNet depth exponent at large L.
``abcd_pc_cosine_vs_width.png``
    cos(PC, BP) of the weight gradients on the toy task of App. A.8 (P = 20, D = 40, labels +-1) vs width:
    (a) linear MLPs, depth 3 (L = 5), at initialisation (exact equilibrium) and after PC training (Fig. 2 right,
    Fig. A.18 right); (b) tanh MLPs and ResNets, depth 3 (L = 5), GD inference to convergence (Figs A.1, A.20);
    (c) ||g_PC - g_BP|| / ||g_BP||, which vanishes under mean-field and tends to 1 - 1/s under SP;
    (d) Fig. 4: tanh ResNets at fixed width after 20 inference steps of size beta, depths 1 and 14 (L = 3 and 16;
    the paper's L = 2 and 16, but L = 2, depth 0, has no tanh block), with the values at convergence.

``depth`` is resprop's (residual/hidden layers between read-in and readout); the axes and labels also give the
paper's L = depth + 2 (number of weight matrices), in which eqs. 16 and 19 are written.

The figures only plot what :mod:`resprop.numeric.theories.abcd.predictive_coding` computes (``pc_figure_data``).
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from resprop.numeric.engine import validation as V  # noqa: E402
from resprop.numeric.theories.abcd import predictive_coding as pc  # noqa: E402

__all__ = ["make_figures", "pc_figure_data", "FIGURE_NAMES"]

FIGURE_NAMES = ("abcd_pc_s_theta_vs_L_over_N.png", "abcd_pc_cosine_vs_width.png")
_DPI = 110
#: Fig. 4 uses the paper's L = 2 and 16 (weight matrices); L = 2 (depth 0) has no residual (tanh) block, so the
#: shallow network here is depth 1 (L = 3, one tanh block) and the deep one depth 14 (L = 16).
FIG4_DEPTHS = (1, 14)
_PARAM_STYLE = {"mean_field": ("C0", "-", "mean-field"), "sp": ("C3", "--", "SP")}


def _depths(*Ls: int) -> tuple[int, ...]:
    """resprop depths for the paper's L (weight matrices): depth = L - 2."""
    return tuple(L - 2 for L in Ls)


def _settings(quick: bool) -> dict:
    """Sizes; the s(theta) grids are chosen in the paper's L (powers of two) and stored as depths L - 2."""
    if quick:
        return {"s_widths": (16, 32, 64, 128, 256), "s_depths": _depths(4, 8, 16, 32, 64),
                "s_deep": _depths(64, 128, 256, 512, 1024),
                "s_samples": 2000, "lin_widths": (8, 16, 32, 64, 128, 256, 512), "lin_seeds": 4,
                "tanh_widths": (16, 32, 64, 128), "tanh_seeds": 2, "tanh_archs": ("mlp",), "train_steps": 100,
                "train_widths": (16, 64, 256), "fig4_width": 48, "fig4_seeds": 2, "gtol": 1e-6}
    return {"s_widths": (16, 32, 64, 128, 256, 512, 1024), "s_depths": _depths(4, 8, 16, 32, 64, 128),
            "s_deep": _depths(64, 128, 256, 512, 1024, 2048, 4096), "s_samples": 20000,
            "lin_widths": (8, 16, 32, 64, 128, 256, 512, 1024, 2048), "lin_seeds": 8,
            "tanh_widths": (16, 32, 64, 128, 256, 512), "tanh_seeds": 4, "tanh_archs": ("mlp", "resnet"),
            "train_steps": 300, "train_widths": (16, 32, 64, 128, 256, 512, 1024), "fig4_width": 512,
            "fig4_seeds": 3, "gtol": 1e-8}


def pc_figure_data(quick: bool = False, seed: int = 0) -> dict:
    """Every number the two figures plot (seeds derived from ``seed``)."""
    seed = V.integer("seed", seed, 0)
    cfg = _settings(bool(quick))
    seeds = iter(int(s) for s in np.random.SeedSequence(seed).generate_state(32))
    data: dict = {"settings": cfg}
    # s(theta) - 1
    data["s_grid"] = {arch: pc.s_theta_sweep(cfg["s_widths"], cfg["s_depths"], arch=arch, param="mean_field",
                                             n_samples=cfg["s_samples"], seed=next(seeds))
                      for arch in ("mlp", "resnet")}
    data["s_width"] = {(arch, param): pc.s_theta_sweep(cfg["s_widths"], [3], arch=arch, param=param,
                                                       n_samples=cfg["s_samples"], seed=next(seeds))
                       for arch in ("mlp", "resnet") for param in ("mean_field", "sp")}
    data["s_deep"] = pc.s_theta_sweep([256], cfg["s_deep"], arch="resnet", param="mean_field",
                                      n_samples=cfg["s_samples"], seed=next(seeds))
    # cosines
    data["cos_linear"] = {(arch, param): pc.cosine_vs_width(cfg["lin_widths"], 3, arch=arch, param=param,
                                                            n_seeds=cfg["lin_seeds"], seed=next(seeds))
                          for arch in ("mlp", "resnet") for param in ("mean_field", "sp")}
    data["cos_tanh"] = {(arch, param): pc.cosine_vs_width(cfg["tanh_widths"], 3, arch=arch, param=param,
                                                          activation="tanh", n_seeds=cfg["tanh_seeds"],
                                                          seed=next(seeds), gtol=cfg["gtol"])
                        for arch in cfg["tanh_archs"] for param in ("mean_field", "sp")}
    train = {}
    with pc._blas(1):
        for param in ("mean_field", "sp"):
            s0 = next(seeds)
            rows = []
            for N in cfg["train_widths"]:
                rng = np.random.default_rng([s0, N])
                x, y = pc.toy_task(20, 40, rng)
                net = pc.init_network(N, 3, param=param, rng=rng)  # L = 5 (Fig. 2)
                rec = pc.train_linear(net, x, y, steps=cfg["train_steps"], record_every=cfg["train_steps"])
                rows.append((rec["cosine"][-1], rec["rel_error"][-1], rec["loss"][-1], rec["s"][-1]))
            train[param] = {"widths": np.array(cfg["train_widths"]), "cosine": np.array([r[0] for r in rows]),
                            "rel_error": np.array([r[1] for r in rows]), "loss": np.array([r[2] for r in rows]),
                            "s": np.array([r[3] for r in rows]), "steps": cfg["train_steps"]}
    data["train"] = train
    data["fig4"] = pc.cosine_vs_inference_step(cfg["fig4_width"], FIG4_DEPTHS, [0.01, 0.03, 0.1, 0.2, 0.3, 0.4],
                                               n_iter=20, n_seeds=cfg["fig4_seeds"], seed=next(seeds))
    s_ref = next(seeds)
    data["fig4_converged"] = {
        dep: pc.cosine_vs_width([cfg["fig4_width"]], dep, arch="resnet", activation="tanh", n_seeds=cfg["fig4_seeds"],
                                seed=s_ref, gtol=cfg["gtol"], max_iter=500_000) for dep in FIG4_DEPTHS}
    return data


def _finish(fig, path: Path, caption: str) -> Path:
    fig.text(0.5, 0.005, caption, ha="center", va="bottom", fontsize=7.5, wrap=True)
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
    return path


def _fig_s_theta(path: Path, data: dict) -> Path:
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12.5, 5.4))
    cmap = plt.get_cmap("viridis")
    notes = []
    for arch, marker in (("mlp", "o"), ("resnet", "s")):
        g = data["s_grid"][arch]
        depths, widths = g["depths"], g["widths"]
        for i, (dep, L) in enumerate(zip(depths, g["L"])):  # the paper's L = depth + 2
            col = cmap(i / max(1, len(depths) - 1))
            ratio = L / widths
            ax.errorbar(ratio, g["mean"][i], yerr=g["se"][i], fmt=marker, ms=4.5, color=col,
                        mfc=col if arch == "mlp" else "none", lw=0.8,
                        label=f"depth {dep} (L = {L})" if arch == "mlp" else None)
            ax.plot(ratio, g["theory"][i], ":" if arch == "mlp" else "-", color=col, lw=0.9)
        slopes = [f["slope"] for f in g["fit_width"]]
        ses = [f["slope_se"] for f in g["fit_width"]]
        notes.append(f"{arch}: N-exponent {np.mean(slopes):+.4f} (per-depth fits, max SE {max(ses):.4f}); "
                     f"pooled L/N exponent {g['fit_ratio']['slope']:.3f} (exact: {g['fit_ratio_theory']['slope']:.3f})")
    r = np.geomspace(1e-2, 4.0, 50)
    ax.plot(r, r, "k--", lw=0.9, label="L/N")
    ax.plot(r, (math.e - 1) * r, "k-.", lw=0.9, label="(e - 1) L/N (eq. 19)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("L / N (L = depth + 2 weight matrices)")
    ax.set_ylabel("s(θ) - 1 at initialisation")
    ax.set_title("mean-field, γ₀ = 1: MLP (filled ●, exact ···), ResNet α = ½ (open ■, exact —)", fontsize=9)
    ax.legend(fontsize=7.5, ncol=2, loc="upper left")
    ax.text(0.98, 0.03, "\n".join(notes), transform=ax.transAxes, ha="right", va="bottom", fontsize=6.8,
            bbox={"fc": "white", "alpha": 0.85, "lw": 0})
    for (arch, param), g in data["s_width"].items():
        pcol, ls, lab = _PARAM_STYLE[param]
        fit = g["fit_width"][0]
        bx.errorbar(g["widths"], g["mean"][0], yerr=g["se"][0], fmt="o" if arch == "mlp" else "s", color=pcol,
                    mfc=pcol if arch == "mlp" else "none", ls=ls, lw=1,
                    label=f"{arch} {lab}: exponent {fit['slope']:+.4f} ± {fit['slope_se']:.4f}")
    deep = data["s_deep"]
    fd = deep["fit_depth"][0]
    bx.set_xscale("log", base=2)
    bx.set_yscale("log")
    bx.set_xlabel("width N (depth 3, L = 5)")
    bx.set_ylabel("s(θ) - 1")
    bx.set_title("Θ(1/N) under mean-field (eq. 16), Θ(1) under SP (Fig. A.19)", fontsize=9)
    bx.legend(fontsize=7.5, loc="center right")
    last = deep["mean"][-1, 0] * deep["widths"][0] / deep["L"][-1]
    bx.text(
        0.02,
        0.03,
        f"ResNet mean-field, N = {deep['widths'][0]}, L = {deep['L'][0]}..{deep['L'][-1]} (depth L - 2): "
        f"L-exponent {fd['slope']:.4f} ± {fd['slope_se']:.4f} (exact {deep['fit_depth_theory'][0]['slope']:.4f});\n"
        f"N (s - 1)/L at L = {deep['L'][-1]}: {last:.3f} (e - 1 = {math.e - 1:.3f})",
        transform=bx.transAxes,
        fontsize=7,
        va="bottom",
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    cap = ("Innocenti, Achour & Bogacz (2025) eqs 16, 19, 25, 104: s(θ) - 1 at initialisation, mean ± SE over "
           f"{data['settings']['s_samples']} networks per point (exact O(L) sampler) vs the exact expectation "
           "derived in derive/theories/predictive_coding.py.")
    return _finish(fig, path, cap)


def _fig_cosine(path: Path, data: dict) -> Path:
    fig, axes = plt.subplots(2, 2, figsize=(12.5, 9.6))
    (ax, bx), (cx, dx) = axes
    for (arch, param), r in data["cos_linear"].items():
        col, ls, lab = _PARAM_STYLE[param]
        if arch == "mlp":
            ax.errorbar(r["widths"], r["mean"], yerr=r["se"], color=col, ls=ls, marker="o", ms=4,
                        label=f"MLP {lab}, init")
        cx.errorbar(r["widths"], r["rel_error_mean"], yerr=r["rel_error_se"], color=col, ls=ls,
                    marker="o" if arch == "mlp" else "s", mfc=col if arch == "mlp" else "none", ms=4,
                    label=f"linear {arch} {lab}")
    for param, t in data["train"].items():
        col, ls, lab = _PARAM_STYLE[param]
        ax.plot(t["widths"], t["cosine"], color=col, ls=":", marker="D", mfc="none", ms=5,
                label=f"MLP {lab}, after {t['steps']} PC steps")
    for (arch, param), r in data["cos_tanh"].items():
        col, ls, lab = _PARAM_STYLE[param]
        mk = "o" if arch == "mlp" else "s"
        bx.errorbar(r["widths"], r["mean"], yerr=r["se"], color=col, ls=ls, marker=mk,
                    mfc=col if arch == "mlp" else "none", ms=4, label=f"tanh {arch} {lab}")
        cx.errorbar(r["widths"], r["rel_error_mean"], yerr=r["rel_error_se"], color=col, ls=ls, marker="^", ms=4,
                    alpha=0.7, label=f"tanh {arch} {lab}")
    for a, title in ((ax, "(a) linear MLP, depth 3 (L = 5): exact equilibrium"),
                     (bx, "(b) tanh, depth 3 (L = 5): GD inference to convergence")):
        a.set_xscale("log", base=2)
        a.set_xlabel("width N")
        a.set_ylabel("cos(∇F, ∇L)")
        a.set_title(title, fontsize=9)
        a.axhline(1.0, color="k", lw=0.5)
        a.legend(fontsize=7.5, loc="lower right")
    cx.set_xscale("log", base=2)
    cx.set_yscale("log")
    cx.set_xlabel("width N")
    cx.set_ylabel("||∇F - ∇L|| / ||∇L||")
    cx.set_title("(c) PC = BP needs equal gradients: → 0 under mean-field, → 1 - 1/s under SP", fontsize=9)
    cx.legend(fontsize=6.8, ncol=2, loc="lower left")
    f4 = data["fig4"]
    for i, dep in enumerate(f4["depths"]):
        dx.errorbar(f4["betas"], f4["mean"][i], yerr=f4["se"][i], marker="o", ms=4,
                    label=f"depth {dep} (L = {dep + 2})")
    for i, (dep, ref) in enumerate(data["fig4_converged"].items()):
        dx.axhline(ref["mean"][0], color=f"C{i}", ls=":", lw=1.0,
                   label=f"depth {dep}, inference to convergence ({int(np.mean(ref['iterations']))} steps)")
    dx.set_xscale("log")
    dx.set_xlabel("activity step β (per sample; the paper's β on F is P β)")
    dx.set_ylabel("cos(∇F, ∇L)")
    dx.set_title(f"(d) Fig. 4: tanh ResNet, mean-field, N = {f4['width']}, {f4['n_iter']} inference steps",
                 fontsize=9)
    dx.legend(fontsize=7.5)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    cap = ("Toy task of App. A.8 (P = 20, 40-d Gaussian inputs, labels ±1); mean ± SE over seeds. PC gradient = "
           "dF/dW at the equilibrated activities; BP = MSE gradient. Under SP the direction also aligns at large N "
           "(1 - cos ∝ 1/N vs 1/N² under mean-field) but the PC gradient is ≈ ∇L / s with s ≈ L.")
    return _finish(fig, path, cap)


def make_figures(out: Path, *, quick: bool = False, seed: int = 0, data: dict | None = None,
                 progress: bool = False) -> list[Path]:
    """Write the two PNGs into ``out`` (created if missing) and return their paths.  ``data`` is the report
    claims' extra (``{"pc_data": ...}``), reused instead of simulating again."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    data = data["pc_data"] if data and "pc_data" in data else pc_figure_data(quick=quick, seed=seed)
    paths = [_fig_s_theta(out / FIGURE_NAMES[0], data), _fig_cosine(out / FIGURE_NAMES[1], data)]
    if progress:
        print(f"predictive-coding figures in {time.time() - t0:.1f} s: {', '.join(p.name for p in paths)}")
    return paths

