"""Report claims of the pdlt theory: the paper's statement, resprop's value and an independent check.

``claims(quick, step, figures_dir=None)`` returns ``(rows, extra)``; ``step()`` advances a progress bar and
``extra`` carries data for the figures.  Row fields: :mod:`resprop.numeric.report.claims`.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from resprop.numeric.report.claims import A, mc, ref, row, size, within

#: Monte Carlo sizes (quick, full)
SIZES = {"pdlt_tanh": (20000, 60000), "pdlt_block": (20000, 60000)}


def _size(name: str, quick: bool) -> int:
    return size(SIZES, name, quick)


def claims(quick: bool, step, figures_dir=None) -> tuple[list[dict], dict]:
    import sympy as sp

    from resprop.derive.theories import pdlt as dr
    from resprop.numeric.engine import monte_carlo as M
    from resprop.numeric.theories.pdlt import residual_mlp as R
    from resprop.numeric.engine.mp_checks import nu_from_iteration_mp

    rows = []
    k_next, v_next = dr.four_point_recursion_from_forward()
    ok = sp.simplify(v_next - dr.four_point_recursion_paper()) == 0 and sp.simplify(k_next - dr.kernel_recursion()) == 0
    rows.append(row("four-point vertex recursion B.26 derived from the forward equation B.3", "B.26 as printed",
                    "derived - printed = 0" if ok else "differs", ref("SymPy simplify", "symbolic"), passed=ok,
                    check="SymPy: derived recursion minus the book's is identically 0 (also the kernel B.12)"))
    step()
    relu = nu_from_iteration_mp("relu", 0.5, depth=4, dps=30)
    nu_relu = float(R.nu(0.5, "relu"))
    rows.append(row("nu(gamma = 1/2), ReLU (B.29)", "(1 - g^2)(5(1 - g^2) + 4 g^2) = 3.5625", nu_relu,
                    ref(float(relu["nu"]), "B.26 iterated in mpmath, 30 digits"),
                    passed=abs(float(relu["nu"]) - nu_relu) < 1e-25 and abs(nu_relu - 3.5625) < 1e-14,
                    check="|mpmath - closed form| < 1e-25"))
    deep = R.vertex_trajectory("tanh", gamma=0.5, depth=3000)["V_over_K2"]
    slope = float(deep[-1] - deep[-2])
    nu_t = float(R.nu(0.5, "tanh"))
    rows.append(row("nu(gamma = 1/2), tanh (B.35)", "2/3 (1 - g^4) = 0.625", nu_t,
                    ref(slope, "slope of iterated V/K^2 at layer 3000 (Gauss-Legendre expectations)"),
                    passed=abs(slope - nu_t) < 2e-3 and abs(nu_t - 0.625) < 1e-14, check="|slope - nu| < 2e-3"))
    step()
    gamma, depth = 0.5, 16
    tr = R.vertex_trajectory("tanh", gamma=gamma, depth=depth)
    ns = _size("pdlt_tanh", quick)
    rel = {}
    for n, seed in ((32, 1), (64, 2), (128, 3)):
        s = M.simulate_residual_mlp(n=n, depth=depth, gamma=gamma, C_W=tr["C_W"], activation="tanh", K1=1.0,
                                    samples=ns, seed=seed)
        fp = M.four_point_vertex(s)
        sim, se, th = float(fp["V_over_nK2"][-1]), float(fp["V_over_nK2_se"][-1]), float(tr["V_over_K2"][-1] / n)
        rel[n] = (sim - th) / th
        rows.append(row(f"V/(n K^2) at layer {depth}, residual tanh MLP, n = {n}, gamma = 1/2",
                        "iterated B.26 (leading order in 1/n)", th, mc(sim, se, f"{ns} networks, seed {seed}"),
                        passed=within(sim, se, th, depth / n * th),
                        check="|MC - theory| <= 4 SE + (L/n) x theory (next order is relative O(L/n))",
                        note=f"relative gap {100 * rel[n]:.1f}%"))
        step()
    rows.append(row("relative gap of V/(n K^2) closes with width (n = 32 -> 128)", "O(1/n) corrections",
                    {f"n = {k}": v for k, v in rel.items()}, None, passed=rel[128] < rel[32],
                    check="gap at n = 128 below gap at n = 32 (fixed seeds)",
                    note=f"at L = {depth} the recursion is not yet deep: V/K^2 = {tr['V_over_K2'][-1]:.2f} vs "
                         f"nu L = {nu_t * depth:.2f}"))
    worst = 0.0
    for act in ("relu", "linear", "leaky_relu:0.3", "tanh"):
        gg = np.array([0.05, 0.3, 0.6, 0.9, 0.99])
        worst = max(worst, float(np.max(np.abs(R.gamma_star(R.r_star(gg, act, 2), act, 2) / gg - 1))))
    r = 1e5
    fr = float((1 - R.gamma_star(r, "relu", 1) ** 2) * r)
    ft = float((1 - R.gamma_star(r, "tanh", 1) ** 2) * r)
    rows.append(row("footnote 8: (1 - gamma*^2) r at r = 1e5, n_L = 1", "1/23 (scale-invariant), 3/23 (K* = 0)",
                    {"relu": fr, "tanh": ft}, ref(worst, "max relative error of gamma*(r*(gamma)) - gamma"),
                    passed=abs(fr * 23 - 1) < 1e-3 and abs(ft * 23 / 3 - 1) < 1e-3 and worst < 1e-9,
                    check="asymptotes within 0.1%; gamma*(r) inverts r*(gamma) to 1e-9"))
    step()
    g6 = 0.6
    nb = _size("pdlt_block", quick)
    s = M.simulate_residual_mlp(n=64, depth=3, gamma=g6, C_W=2.0, activation="relu", K1=1.0, samples=nb, seed=4,
                                record_block=True)
    bc = M.block_correlators(s)
    vals = np.array([bc["G_RR"][0], bc["G_Rz"][0], bc["G_zz"][0]])
    xi = float(R.xi_from_correlators(g6, *vals))
    hh = 1e-6
    dxi = [(float(R.xi_from_correlators(g6, *(vals + hh * np.eye(3)[i]))) - xi) / hh for i in range(3)]
    se = math.sqrt(sum((dx * bc[k + "_se"][0]) ** 2 for dx, k in zip(dxi, ("G_RR", "G_Rz", "G_zz"))))
    target = math.sqrt(1 - g6**2)
    rows.append(row("residual weight xi (B.45) from simulated block correlators, ReLU, gamma = 0.6",
                    "xi preserves the two-point correlator", target,
                    mc(xi, se, f"{nb} networks, n = 64, seed 4; SE propagated from the correlators"),
                    passed=within(xi, se, target), check="|MC - sqrt(1 - gamma^2)| <= 4 SE"))
    step()
    return rows, {}
