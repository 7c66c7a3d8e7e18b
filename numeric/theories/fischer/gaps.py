"""Three measured gaps between Fischer, Dahmen & Helias (2025) and resprop: C20, Fig. 4's rho* range, the target K^(L).

* :func:`c20_ratio_table` -- (C20) writes Var K^(l) as the diagonal sum sum_k G11^{kk}; the ratio of the
  simulated Var K^(l) (and of resprop's full block sum sum_{k,m <= l} G_CC^{km}, C18) to that diagonal sum, over
  layers l and residual scalings rho, in the Fig. 2 setting (erf, sigma_w^2 = 1.2, sigma_b^2 = 0.2, K^(0) = 1.4,
  N = 500).  Var K^(1) = Var C^(1) (C^(0) is data), so the ratio is 1 at l = 1 and grows with l; it grows faster
  at smaller rho, where the residual kernels change little from layer to layer and stay more correlated.
* :func:`rho_star_range` -- rho* = argmax chi_out (48) for the diagonal and the off-diagonal element of Fig. 4's
  input kernel, each against the paper's stated range [0.1, 0.3] (Sec. III A).
* :func:`response_maximiser` -- K^(L) at rho* (the kernel the readout sees when the response is largest), the
  quantity (61) sets to (V/2)^2 and Appendix E to 1/4 (resprop derives 1/2 for E4's stationary point, F6);
  :func:`response_maximiser_simulation` checks one point by finite differences of the simulated readout kernel
  (chi_out = dK_out/dK^(0), C17 with Price's theorem) at rho* and at rho* times 2/3 and 3/2.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from resprop.numeric.engine import validation as V
from resprop.numeric.engine.results import ResultRecord

__all__ = ["C20Ratios", "c20_ratio_table", "RhoStarRange", "rho_star_range", "ResponseMaximiser",
           "response_maximiser", "MaximiserSimulation", "response_maximiser_simulation", "variance_and_se"]

#: Fig. 2 setting (K^(0) = sigma_w^2 ||x||^2/d_in + sigma_b^2 with ||x||^2 = d_in)
FIG2: dict[str, Any] = {"sigma_w2": 1.2, "sigma_b2": 0.2}
FIG2_INPUT_KERNEL = 1.4
#: Fig. 4 setting
FIG4: dict[str, Any] = {"input_kernel": 0.05, "sigma_w2": 1.25, "sigma_b2": 0.05}
FIG4_OFFDIAG = 0.03
PAPER_RANGE = (0.1, 0.3)


def variance_and_se(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unbiased variance along axis 0 and its standard error sqrt((m4 - var^2)/n)."""
    a = np.asarray(a, dtype=float)
    n = a.shape[0]
    c = a - a.mean(axis=0)
    var = (c**2).sum(axis=0) / (n - 1)
    m4 = (c**4).mean(axis=0)
    return var, np.sqrt(np.maximum(m4 - var**2, 0.0) / n)


@dataclass(frozen=True)
class C20Ratios(ResultRecord):
    """:func:`c20_ratio_table`: arrays of shape (len(rho), len(layers)).  ``c20`` is (C20)'s diagonal sum,
    ``block_ratio`` resprop's full block sum / c20, ``sim_ratio`` +- ``sim_ratio_se`` the simulated Var K^(l)
    / c20 (None without simulation)."""

    rho: np.ndarray
    layers: np.ndarray
    depth: int
    width: int
    c20: np.ndarray
    block_ratio: np.ndarray
    samples: int = 0
    sim_ratio: np.ndarray | None = None
    sim_ratio_se: np.ndarray | None = None


#: rho of the C20 table: 1 (Fig. 2), 0.5, 1/sqrt(L) at L = 50, 0.2
C20_RHOS = (1.0, 0.5, 1 / math.sqrt(50), 0.2)


def c20_ratio_table(rho=C20_RHOS, layers=(1, 2, 5, 10, 20, 50), *, depth: int = 50,
                    width: int = 500, samples: int = 0, seed: int = 5) -> C20Ratios:
    """Var K^(l) / (C20) in the Fig. 2 setting; ``samples`` > 0 adds the simulated ratio (seed ``seed + i`` for
    the i-th rho; reduced sampling of :func:`resprop.numeric.engine.simulate.simulate_kernels`)."""
    from resprop.numeric.engine.simulate import simulate_kernels
    from resprop.numeric.theories.fischer.fluctuations import kernel_fluctuations

    rhos = np.atleast_1d(V.positive("rho", rho)).astype(float)
    L = V.integer("depth", depth, 1)
    ls = np.atleast_1d(np.asarray(layers))
    if ls.ndim != 1 or not np.issubdtype(ls.dtype, np.integer) or ls.min() < 1 or ls.max() > L:
        raise V.ParameterError("layers", f"must be integers in [1, depth = {L}], got {ls.tolist()}")
    N = V.integer("width", width, 2)
    samples = V.integer("samples", samples, 0)
    if samples == 1:
        raise V.ParameterError("samples", "must be 0 (no simulation) or >= 2")
    c20, block = np.empty((rhos.size, ls.size)), np.empty((rhos.size, ls.size))
    sim = np.empty((rhos.size, ls.size)) if samples else None
    sim_se = np.empty((rhos.size, ls.size)) if samples else None
    for i, r in enumerate(rhos):
        fl = kernel_fluctuations(FIG2_INPUT_KERNEL, L, N, rho=r, **FIG2)
        c20[i] = fl.var_K_diagonal_sum[ls]
        block[i] = fl.var_K[ls] / c20[i]
        if samples:
            assert sim is not None and sim_se is not None
            s = simulate_kernels(np.ones((1, 100)), depth=L, width=N, rho=r, samples=samples, seed=seed + i, **FIG2)
            v, se = variance_and_se(s.K[:, ls, 0, 0])
            sim[i], sim_se[i] = v / c20[i], se / c20[i]
    return C20Ratios(rho=rhos, layers=ls, depth=L, width=N, c20=c20, block_ratio=block, samples=samples,
                     sim_ratio=sim, sim_ratio_se=sim_se)


@dataclass(frozen=True)
class RhoStarRange(ResultRecord):
    """:func:`rho_star_range`: rho* (diagonal) and rho*_offdiag per depth, and whether each lies in the paper's
    range [0.1, 0.3]."""

    depth: np.ndarray
    rho_star: np.ndarray
    rho_star_offdiag: np.ndarray
    inside: np.ndarray
    inside_offdiag: np.ndarray


def rho_star_range(depths=(10, 50, 100, 200)) -> RhoStarRange:
    """rho* = argmax chi_out for both elements of Fig. 4's input kernel [[0.05, 0.03], [0.03, 0.05]]."""
    from resprop.numeric.theories.fischer.field_theory import rho_star

    rs = rho_star(depths, input_kernel_offdiag=FIG4_OFFDIAG, **FIG4)
    d, o = (np.asarray(rs[k], dtype=float) for k in ("rho_star", "rho_star_offdiag"))
    lo, hi = PAPER_RANGE
    return RhoStarRange(depth=np.asarray(rs.depth), rho_star=d, rho_star_offdiag=o, inside=(d >= lo) & (d <= hi),
                        inside_offdiag=(o >= lo) & (o <= hi))


#: (sigma_w^2, sigma_b^2, K^(0)) settings of the maximiser table; the first is Fig. 4's
MAXIMISER_SETTINGS = ((1.25, 0.05, 0.05), (1.0, 0.05, 0.05), (2.0, 0.05, 0.05), (1.25, 0.01, 0.05),
                      (1.25, 0.1, 0.05), (1.25, 0.05, 0.2))


@dataclass(frozen=True)
class ResponseMaximiser(ResultRecord):
    """:func:`response_maximiser`: per setting (rows: sigma_w2, sigma_b2, input_kernel) and depth (columns),
    rho* and K^(L) at rho*, with the linearised rho* (61) for the targets 1/4 and 1/2."""

    sigma_w2: np.ndarray
    sigma_b2: np.ndarray
    input_kernel: np.ndarray
    depth: np.ndarray
    rho_star: np.ndarray
    kernel_at_rho_star: np.ndarray
    linearised_quarter: np.ndarray
    linearised_half: np.ndarray


def response_maximiser(settings=MAXIMISER_SETTINGS, depths=(10, 50, 100, 200)) -> ResponseMaximiser:
    """K^(L) at rho* = argmax_rho chi_out (48): the readout variance at which the response is largest."""
    from resprop.numeric.theories.fischer.field_theory import linearised_rho_star, response, rho_star

    S = np.asarray(settings, dtype=float)
    if S.ndim != 2 or S.shape[1] != 3:
        raise V.ParameterError("settings", "must be a sequence of (sigma_w2, sigma_b2, input_kernel) triples")
    L = np.atleast_1d(V.depths("depth", depths, 10**6))
    r, k = np.empty((len(S), L.size)), np.empty((len(S), L.size))
    lq, lh = np.empty_like(r), np.empty_like(r)
    for i, (sw, sb, k0) in enumerate(S):
        rs = rho_star(L, input_kernel=k0, sigma_w2=sw, sigma_b2=sb)
        if not np.all(rs.rho_star_interior):
            raise V.ParameterError("settings", f"chi_out has no interior maximum at {(sw, sb, k0)}")
        r[i] = np.asarray(rs.rho_star, dtype=float)
        k[i] = [response(k0, int(d), float(x), sw, sb).K[-1] for d, x in zip(L, r[i])]
        lq[i] = linearised_rho_star(L, k0, sw, sb, target_variance=0.25)
        lh[i] = linearised_rho_star(L, k0, sw, sb, target_variance=0.5)
    return ResponseMaximiser(sigma_w2=S[:, 0], sigma_b2=S[:, 1], input_kernel=S[:, 2], depth=L, rho_star=r,
                             kernel_at_rho_star=k, linearised_quarter=lq, linearised_half=lh)


@dataclass(frozen=True)
class MaximiserSimulation(ResultRecord):
    """:func:`response_maximiser_simulation`: per rho (rho* x factors) the simulated chi_out and K^(L) (mean,
    SE) and the theory's values."""

    rho: np.ndarray
    chi_out: np.ndarray
    chi_out_se: np.ndarray
    chi_out_theory: np.ndarray
    kernel: np.ndarray
    kernel_se: np.ndarray
    kernel_theory: np.ndarray
    samples: int


def response_maximiser_simulation(rho_star: float, *, depth: int = 50, width: int = 500, samples: int = 4000,
                                  seed: int = 7, factors=(2 / 3, 1.0, 1.5), delta: float = 0.005,
                                  sigma_w2: float = FIG4["sigma_w2"], sigma_b2: float = FIG4["sigma_b2"],
                                  input_kernel: float = FIG4["input_kernel"]) -> MaximiserSimulation:
    """chi_out = dK_out/dK^(0) by central differences of the simulated readout kernel (inputs with K^(0) -+ delta
    share their weights: sigma_w,in^2 = 1, sigma_b,in^2 = 0) and K^(L) at the centre, at rho = rho* x factors."""
    from resprop.numeric.engine.simulate import mean_and_se, simulate_kernels
    from resprop.numeric.theories.fischer.field_theory import response

    k0 = float(V.positive("input_kernel", input_kernel))
    delta = float(V.positive("delta", delta))
    if delta >= k0:
        raise V.ParameterError("delta", f"must be below input_kernel = {k0}")
    d_in = 100
    X = np.sqrt(np.array([k0 - delta, k0, k0 + delta]))[:, None] * np.ones((1, d_in))
    rhos = float(V.positive("rho_star", rho_star)) * np.asarray(factors, dtype=float)
    out: dict[str, list[float]] = {k: [] for k in ("chi", "chi_se", "chi_th", "K", "K_se", "K_th")}
    for i, r in enumerate(rhos):
        s = simulate_kernels(X, depth=depth, width=width, rho=float(r), sigma_w2=sigma_w2, sigma_b2=sigma_b2,
                             sigma_w2_in=1.0, sigma_b2_in=0.0, samples=samples, seed=seed + i)
        chi, chi_se = mean_and_se((s.K_out[:, 2, 2] - s.K_out[:, 0, 0]) / (2 * delta))
        K, K_se = mean_and_se(s.K[:, depth, 1, 1])
        th = response(k0, depth, float(r), sigma_w2, sigma_b2)
        for key, val in (("chi", chi), ("chi_se", chi_se), ("chi_th", th.chi_out), ("K", K), ("K_se", K_se),
                         ("K_th", th.K[-1])):
            out[key].append(float(val))
    a = {k: np.array(v) for k, v in out.items()}
    return MaximiserSimulation(rho=rhos, chi_out=a["chi"], chi_out_se=a["chi_se"], chi_out_theory=a["chi_th"],
                               kernel=a["K"], kernel_se=a["K_se"], kernel_theory=a["K_th"], samples=samples)


def tables_markdown(c20: C20Ratios, rs: RhoStarRange, mx: ResponseMaximiser, ms: MaximiserSimulation) -> str:
    """The three tables of docs/fischer-gaps.md as Markdown (``python -m resprop.numeric.theories.fischer.gaps``)."""
    out = [f"### Var K^(l) / (C20), Fig. 2 setting (erf, sigma_w^2 = 1.2, sigma_b^2 = 0.2, K^(0) = 1.4, "
           f"N = {c20.width}, L = {c20.depth})", "",
           f"Each cell: simulation +- SE ({c20.samples} networks per rho) / resprop's block sum (C18), both divided "
           "by (C20)'s diagonal sum.", "",
           "| rho | " + " | ".join(f"l = {x}" for x in c20.layers) + " |",
           "|---|" + "---|" * c20.layers.size]
    for i, r in enumerate(c20.rho):
        cells = [f"{c20.sim_ratio[i, j]:.2f} +- {c20.sim_ratio_se[i, j]:.2f} / {c20.block_ratio[i, j]:.2f}"
                 if c20.sim_ratio is not None and c20.sim_ratio_se is not None else f"{c20.block_ratio[i, j]:.2f}"
                 for j in range(c20.layers.size)]
        out.append(f"| {r:.4g} | " + " | ".join(cells) + " |")
    out += ["", "### rho* = argmax chi_out, Fig. 4 setting (K^(0) = [[0.05, 0.03], [0.03, 0.05]], sigma_w^2 = 1.25, "
            "sigma_b^2 = 0.05), against the paper's [0.1, 0.3]", "",
            "| L | rho* (diagonal) | in [0.1, 0.3] | rho* (off-diagonal) | in [0.1, 0.3] |", "|---|---|---|---|---|"]
    for k, L in enumerate(rs.depth):
        out.append(f"| {L} | {rs.rho_star[k]:.4f} | {'yes' if rs.inside[k] else 'no'} | "
                   f"{rs.rho_star_offdiag[k]:.4f} | {'yes' if rs.inside_offdiag[k] else 'no'} |")
    out += ["", "### K^(L) at rho* = argmax chi_out (diagonal element)", "",
            "Each cell: rho* / K^(L)(rho*) / (61) with target 1/4 / (61) with target 1/2.", "",
            "| sigma_w^2 | sigma_b^2 | K^(0) | " + " | ".join(f"L = {x}" for x in mx.depth) + " |",
            "|---|---|---|" + "---|" * mx.depth.size]
    for i in range(mx.sigma_w2.size):
        cells = [f"{mx.rho_star[i, j]:.4f} / **{mx.kernel_at_rho_star[i, j]:.4f}** / {mx.linearised_quarter[i, j]:.4f}"
                 f" / {mx.linearised_half[i, j]:.4f}" for j in range(mx.depth.size)]
        out.append(f"| {mx.sigma_w2[i]:g} | {mx.sigma_b2[i]:g} | {mx.input_kernel[i]:g} | " + " | ".join(cells) + " |")
    out += ["", f"Simulation check, Fig. 4 setting, L = 50, N = 500, {ms.samples} networks per rho (chi_out by central "
            "differences of the readout kernel, K^(0) +- 0.005, shared weights):", "",
            "| rho | chi_out simulated | chi_out theory | K^(L) simulated | K^(L) theory |", "|---|---|---|---|---|"]
    for k, r in enumerate(ms.rho):
        out.append(f"| {r:.4f} | {ms.chi_out[k]:.4f} +- {ms.chi_out_se[k]:.4f} | {ms.chi_out_theory[k]:.4f} | "
                   f"{ms.kernel[k]:.4f} +- {ms.kernel_se[k]:.4f} | {ms.kernel_theory[k]:.4f} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # regenerate the tables of docs/fischer-gaps.md (about 3 minutes)
    _mx = response_maximiser()
    print(tables_markdown(c20_ratio_table(samples=20000), rho_star_range(), _mx,
                          response_maximiser_simulation(float(_mx.rho_star[0, 1]), samples=4000)))
