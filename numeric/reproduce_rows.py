"""Rows of the reproduction report: per theory, the paper's claim, resprop's theory value and an independent check.

Every row is a plain dict (JSON-ready):

``quantity``    what is compared;
``paper``       the paper's value or claim (number or text);
``theory``      resprop's value (number, text, list or {label: value});
``simulation``  the independent check: Monte Carlo ``{"mean", "se", "method", ...}`` or a reference value
                ``{"value", "method"}`` (quadrature, mpmath, exact solver, linprog); None for pure derivations;
``check``       the pass criterion in words, with its tolerance (4 standard errors plus a stated systematic
                allowance where the theory is leading order, as in the tests);
``passed``      whether the criterion holds;
``verdict``     "agrees", "documented disagreement" (resprop and the paper differ as README documents, and the
                check confirms resprop's side) or "FAILS" (the check does not hold);
``details``     the arrays behind the row (per-layer values, fits, seeds).

The functions ``<theory>_rows(quick, step)`` return ``(rows, extra)``; ``step()`` advances a progress bar and
``extra`` carries data for figures.  The tolerances and sizes mirror tests/test_*.py.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["row", "fischer_rows", "lognormal_rows", "pdlt_rows", "stable_rows", "abcd_rows", "cross_rows",
           "SIZES"]

A = 2**-0.5

#: Monte Carlo sizes (quick, full) per experiment
SIZES = {
    "fischer_samples": (1000, 10000),
    "lnr_balanced": (20000, 60000), "lnr_vanilla": (15000, 40000), "lnr_c5": (10000, 30000),
    "lnr_output": (20000, 60000), "lnr_layer_var": (200_000, 800_000), "j2_digits": (20, 30),
    "pdlt_tanh": (20000, 60000), "pdlt_block": (20000, 60000),
    "stable_mc": (4000, 20000), "stable_spectra_P": (200, 600),
    "abcd_seeds": (4, 8),
    "cross_samples": (20000, 40000),
}


def size(name: str, quick: bool) -> int:
    return SIZES[name][0 if quick else 1]


def _num(v):
    """JSON-ready scalar/array: numpy -> Python, Fraction -> str."""
    if isinstance(v, dict):
        return {str(k): _num(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_num(x) for x in v]
    if isinstance(v, np.ndarray):
        return _num(v.tolist())
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, Fraction):
        return str(v)
    return v


def row(quantity: str, paper, theory, simulation=None, *, passed: bool, documented: bool = False, check: str = "",
        note: str = "", details: dict | None = None) -> dict:
    passed = bool(passed)
    verdict = "FAILS" if not passed else ("documented disagreement" if documented else "agrees")
    return {"quantity": quantity, "paper": _num(paper), "theory": _num(theory),
            "simulation": _num(simulation), "check": check, "passed": passed, "documented": bool(documented),
            "verdict": verdict, "note": note, "details": _num(details or {})}


def mc(mean, se, method: str, **extra) -> dict:
    return {"mean": float(mean), "se": float(se), "method": method, **extra}


def ref(value, method: str) -> dict:
    return {"value": value, "method": method}


def within(sim: float, se: float, th: float, allowance: float = 0.0, k: float = 4.0) -> bool:
    return bool(abs(sim - th) <= k * se + allowance)


# =========================================================================== Fischer, Dahmen & Helias
FIG2 = dict(rho=1.0, sigma_w2=1.2, sigma_b2=0.2)
FIG4 = dict(k0=0.05, sigma_w2=1.25, sigma_b2=0.05)


def fischer_rows(quick: bool, step) -> tuple[list[dict], dict]:
    from derive.field_theory import max_entropy_variance

    from .field_theory import linearised_rho_star, response, rho_star
    from .fluctuations import kernel_fluctuations
    from .simulate import finite_difference_response, mean_and_se, simulate_kernels

    N, L, K0 = 500, 20, 1.4
    samples = size("fischer_samples", quick)
    rows = []
    x = np.ones((1, 100))
    sim = simulate_kernels(x, depth=L, width=N, samples=samples, seed=1, **FIG2)
    th = response(K0, L, **FIG2)
    mean, se = mean_and_se(sim["C"][:, :, 0, 0])
    z = (mean[1:] - th["C"][1:]) / se[1:]
    rows.append(row(f"C^(l) at l = {L} (Fig. 2a, N = {N}, erf, l = 1..{L} in details)",
                    "theory curve through the simulated points", th["C"][L],
                    mc(mean[L], se[L], f"{samples} networks, seed 1", max_abs_z=float(np.abs(z).max())),
                    passed=np.all(np.abs(mean - th["C"]) <= 4 * se + th["C"] / N),
                    check="every layer: |MC - theory| <= 4 SE + C/N",
                    details={"layer": list(range(L + 1)), "theory": th["C"], "mc_mean": mean, "mc_se": se}))
    step()
    fd = finite_difference_response(np.ones(100), delta=1e-3, depth=L, width=N, samples=samples, seed=2, **FIG2)
    m, s = mean_and_se(fd)
    rows.append(row(f"response eta^(l) at l = {L} by finite differences (Fig. 2b, eq. 45)",
                    "theory (45) matches simulation", th["eta"][L], mc(m[L], s[L], f"{samples} networks, seed 2"),
                    passed=np.all(np.abs(m - th["eta"]) <= 4 * s + 10 * np.abs(th["eta"]) / N),
                    check="every layer: |MC - theory| <= 4 SE + 10|eta|/N",
                    details={"layer": list(range(L + 1)), "theory": th["eta"], "mc_mean": m, "mc_se": s}))
    step()
    fl = kernel_fluctuations(K0, L, N, **FIG2)
    v = sim["K"][:, 1:, 0, 0].var(axis=0, ddof=1)
    se_v = v * np.sqrt(2 / (samples - 1))
    rows.append(row(f"Var K^(l) at l = {L} (C18-C20 with the full G_CC block sum)", "O(1/N) Gaussian fluctuations",
                    fl["var_K"][L], mc(v[-1], se_v[-1], f"{samples} networks, seed 1"),
                    passed=np.all(np.abs(v - fl["var_K"][1:]) <= 4 * se_v + 10 / N * fl["var_K"][1:]),
                    check="every layer: |MC - theory| <= 4 SE + 10 Var/N",
                    details={"layer": list(range(1, L + 1)), "theory": fl["var_K"][1:], "mc_var": v, "mc_se": se_v}))
    diag = float(fl["var_K_diagonal_sum"][L])
    ratio = float(v[-1] / diag)
    rows.append(row(f"Var K^(l) at l = {L} by (C20): diagonal sum over layers only", "sum_k G11^{kk}", diag,
                    mc(v[-1], se_v[-1], f"{samples} networks, seed 1", ratio_to_C20=ratio),
                    passed=v[-1] - diag > 4 * se_v[-1], documented=True,
                    check="documented: the simulation exceeds the (C20) diagonal sum by more than 4 SE",
                    note=f"C20 omits the covariances between layers; simulation / C20 = {ratio:.2f}"))
    step()
    depths = [10, 50, 100, 200]
    rs = rho_star(depths, k0_offdiag=0.03, **FIG4)
    # no interior maximum would be None (rho_star has one here); as NaN it fails the rows below, not the report
    rs = {k: np.asarray(v, dtype=float) if k in ("rho_star", "rho_star_offdiag") else v for k, v in rs.items()}
    inside = (rs["rho_star"] >= 0.1) & (rs["rho_star"] <= 0.3)
    rows.append(row("rho* = argmax chi_out at L = 10, 50, 100, 200 (Fig. 4c)", "lies in [0.1, 0.3]",
                    rs["rho_star"], None, documented=True,
                    passed=inside.tolist() == [False, True, False, False] and bool(np.all(np.diff(rs["rho_star"]) < 0))
                    and 0.09 < rs["rho_star"][2] < 0.1,
                    check="documented: rho* falls with L; inside [0.1, 0.3] at L = 50 only, just below 0.1 at "
                          "L = 100, outside at L = 10 and 200",
                    note="the paper's range fits L = 50 (and L = 100 to within 0.003); at L = 10 rho* is larger, "
                         "at L = 200 smaller: rho* ~ L^(-1/2) has no fixed range",
                    details={"depth": depths, "rho_star": rs["rho_star"], "rho_star_offdiag": rs["rho_star_offdiag"]}))
    rows.append(row("off-diagonal rho* > diagonal rho* (L = 10, 50, 100, 200)", "yes (Sec. III C)",
                    rs["rho_star_offdiag"], None, passed=np.all(rs["rho_star_offdiag"] > rs["rho_star"]),
                    check="off-diagonal argmax exceeds the diagonal one at every depth"))
    big = np.array([200, 400, 800, 1600])
    rl = np.asarray(rho_star(big, **FIG4)["rho_star"], dtype=float)
    slope = float(np.polyfit(np.log(big), np.log(rl), 1)[0])
    rows.append(row("log-log slope of rho*(L), L = 200..1600", -0.5, slope, None, passed=abs(slope + 0.5) < 0.02,
                    check="|slope + 1/2| < 0.02 (eq. 62: rho* ~ L^(-1/2))", details={"depth": big, "rho_star": rl}))
    step()
    lin_half = linearised_rho_star(depths, 0.05, 1.25, 0.05, target_variance=0.5)
    lin_quarter = linearised_rho_star(depths, 0.05, 1.25, 0.05, target_variance=0.25)
    between = bool(np.all((lin_quarter[1:] < rs["rho_star"][1:]) & (rs["rho_star"][1:] < lin_half[1:])))
    rows.append(row("linearised rho* (61) at L = 200: target variance K^(L)", "target 1/4 (from E5)",
                    {"target 1/2": float(lin_half[-1]), "target 1/4": float(lin_quarter[-1])},
                    ref(float(rs["rho_star"][-1]), "exact argmax of chi_out"), passed=between, documented=True,
                    check="the exact argmax lies between the two linearised values at L = 50, 100, 200",
                    note="the derived maximum-entropy target is 1/2, not the paper's 1/4",
                    details={"depth": depths, "target_1/2": lin_half, "target_1/4": lin_quarter,
                             "argmax": rs["rho_star"]}))
    me = max_entropy_variance()
    rows.append(row("maximum-entropy variance (E4-E5)", "1/4", str(me), None, passed=str(me) == "1/2",
                    documented=True, check="SymPy minimiser of E4 equals 1/2",
                    note="E4 is minimised at 1/2 (erf(h) exactly uniform); E5 differentiates (1/2) ln s^2 as 1/s^2"))
    step()
    extra = {"C": rows[0]["details"], "eta": rows[1]["details"], "var": rows[2]["details"],
             "var_C20": fl["var_K_diagonal_sum"][1:].tolist(), "rho_depths": big.tolist(), "rho": rl.tolist(),
             "rho_small": {"depth": depths, "diag": rs["rho_star"].tolist(), "off": rs["rho_star_offdiag"].tolist()},
             "N": N, "samples": samples}
    return rows, extra


# =========================================================================== Li, Nica & Roy
def lognormal_rows(quick: bool, step) -> tuple[list[dict], dict]:
    import mpmath as mp

    from derive import log_gaussian as dlg
    from generated import log_gaussian as glg

    from . import log_gaussian as LG
    from . import monte_carlo as M
    from .mp_checks import j2bar_closed_mp, j2bar_quadrature_mp

    rows = []
    # J2-bar: closed form vs 2-D quadrature of eq. (23)
    digits = size("j2_digits", quick)
    with mp.workdps(digits + 10):
        q = j2bar_quadrature_mp(mp.mpf(1), digits)
        c = j2bar_closed_mp(mp.mpf(1), digits)
        agree = abs(q - c) < mp.mpf(10) ** (-(digits - 3)) * abs(c)
        q_s, c_s = mp.nstr(q, digits), mp.nstr(c, digits)
    rows.append(row("J2-bar(theta = 1), eq. (23)", "integral of eq. (23)", c_s,
                    ref(q_s, f"2-D mpmath quadrature of the definition, {digits} digits"), passed=agree,
                    check=f"closed form = quadrature to {digits - 3} digits",
                    note="derived by integrating in polar coordinates; equals the Cho-Saul form"))
    step()
    # Lemmas 9-10: per-layer variance, exact at every n
    rng = np.random.default_rng(11)
    n6, m, lam = 6, size("lnr_layer_var", quick), 0.6
    alpha = math.sqrt(1 - lam**2)
    g = rng.standard_normal((m, n6))
    u = g / np.linalg.norm(g, axis=1, keepdims=True)
    r2 = np.sum(np.maximum(u, 0) ** 2, axis=1)
    w = rng.standard_normal((m, n6))
    X = (alpha + lam * np.sqrt(2 / n6 * r2) * w[:, 0]) ** 2 + lam**2 * 2 / n6 * r2 * np.sum(w[:, 1:] ** 2, axis=1)
    var = float(X.var())
    se = float(np.sqrt((np.mean((X - X.mean()) ** 4) - var**2) / m))
    target = (5 * lam**4 + 4 * alpha**2 * lam**2) / n6
    rows.append(row("per-layer Var X (Lemmas 9-10), n = 6, lam = 0.6", "(5 lam^4 + 4 alpha^2 lam^2)/n", target,
                    mc(var, se, f"{m} draws, seed 11"), passed=within(var, se, target),
                    check="|MC - theory| <= 4 SE (exact at every n)"))
    step()
    # Theorem 4 (balanced)
    n = d = 64
    nb = size("lnr_balanced", quick)
    sb = M.simulate_log_gaussian(n=n, d=d, alpha=A, lam=A, balanced=True, samples=nb, seed=21)
    gb = M.g_moments(sb)
    thb = LG.theory(n, d, A, A, balanced=True)
    allow = 2 * d / n**2
    for key, label, paper in (("var_G", "Var[G]", "beta (eq. 9)"), ("mean_G", "E[G]", "-beta/2 (eq. 9)")):
        rows.append(row(f"balanced ResNet {label} (Theorem 4), n = d = 64", paper, thb[key],
                        mc(gb[key], gb[key + "_se"], f"{nb} networks, seed 21"),
                        passed=within(gb[key], gb[key + "_se"], thb[key], allow),
                        check=f"|MC - theory| <= 4 SE + 2d/n^2 (= {allow:.4f}, the theorem's O(d/n^2))"))
    step()
    # Theorem 1 (vanilla): hypoactivation, mean relation, variance finding
    nv = size("lnr_vanilla", quick)
    sv = M.simulate_log_gaussian(n=n, d=d, alpha=A, lam=A, samples=nv, seed=22)
    h = M.hypoactivation(sv)
    C, C_se = float(h["C_hat"]), float(h["C_hat_se"])
    rows.append(row("hypoactivation constant C_{alpha,lambda} (Prop. 2), n = d = 64",
                    "-0.876 (Monte Carlo, n = d = 150)", "estimated by Monte Carlo (no closed form)",
                    mc(C, C_se, f"{nv} networks, seed 22"),
                    passed=within(C, C_se, -0.876, 4 / n) and C < -10 * C_se,
                    check="|MC - (-0.876)| <= 4 SE + 4/n (O(1/n) width dependence), and C < 0 by > 10 SE"))
    thv = LG.theory(n, d, A, A, hypo_constant=0.0)
    y = sv.G - 2 * thv["c"] * np.sum(sv.act_sq - 0.5, axis=1)
    ym, yse = float(y.mean()), float(y.std(ddof=1) / np.sqrt(y.size))
    rows.append(row("vanilla E[G] - 2c h_total (Theorem 1 with Prop. 2), n = d = 64", "-beta/2", -thv["beta"] / 2,
                    mc(ym, yse, f"{nv} networks, seed 22; h_total measured on the same networks"),
                    passed=within(ym, yse, -thv["beta"] / 2, allow), check="|MC - theory| <= 4 SE + 2d/n^2"))
    step()
    deltas = {}
    for nn, seed in ((32, 31), (64, 32)):
        s_ = sv if nn == 64 else M.simulate_log_gaussian(n=nn, d=nn, alpha=A, lam=A, samples=nv, seed=seed)
        gv = M.g_moments(s_)
        t = LG.theory(nn, nn, A, A)["var_G"]
        deltas[nn] = (gv["var_G"] - t, gv["var_G_se"], gv["var_G"], t)
    d32, se32, _, _ = deltas[32]
    d64, se64, v64, t64 = deltas[64]
    pinned = d32 > 4 * se32 and abs(64 * d64 - 32 * d32) < 4 * math.hypot(64 * se64, 32 * se32) + 0.2 * 32 * d32
    rows.append(row("vanilla Var[G] (Theorem 1: beta + c^2 I_total), n = d = 64", "beta + c^2 I_total + O(d/n^2)",
                    t64, mc(v64, se64, f"{nv} networks, seed 22"), passed=pinned, documented=True,
                    check="documented: theory below MC by > 4 SE at n = 32, and n x gap constant (n = 32, 64) "
                          "within 4 SE + 20%",
                    note=f"the gap is about 40/n: n x gap = {32 * d32:.1f} +- {32 * se32:.1f} (n = 32), "
                         f"{64 * d64:.1f} +- {64 * se64:.1f} (n = 64); inside O(d/n^2) but with a large constant",
                    details={"n": [32, 64], "gap": [d32, d64], "gap_se": [se32, se64]}))
    step()
    # Conjecture 5
    nc = size("lnr_c5", quick)
    n5 = 96
    s5 = M.simulate_log_gaussian(n=n5, d=40, alpha=A, lam=A, samples=nc, seed=9)
    c5 = M.conjecture5(s5)
    t5 = LG.conjecture5_theory(n5, A, A)
    rows.append(row("Var ||relu(zhat)||^2 (Conjecture 5, eq. 12), n = 96", "uniform-sphere value 3/(4(n+2))",
                    t5["var"], mc(c5["var_avg"], c5["var_avg_se"], f"{nc} networks, d = 40, seed 9"),
                    passed=within(c5["var_avg"], c5["var_avg_se"], t5["var"], 8 / n5 * t5["var"]),
                    check="|MC - theory| <= 4 SE + (8/n) x theory (relative O(1/n))"))
    for k in (1, 2):
        rows.append(row(f"lag-{k} covariance of ||relu(zhat)||^2 (Conjecture 5, eq. 13), n = 96",
                        "Lemma 16 / Cor. 17 value", t5["cov"][k],
                        mc(c5["cov_avg"][k], c5["cov_avg_se"][k], f"{nc} networks, d = 40, seed 9"),
                        passed=within(c5["cov_avg"][k], c5["cov_avg_se"][k], t5["cov"][k], 8 / n5 * t5["cov"][k]),
                        check="|MC - theory| <= 4 SE + (8/n) x theory"))
    step()
    # Output moments (balanced, §3.1-3.2)
    no = size("lnr_output", quick)
    n2, d2 = 100, 20
    so = M.simulate_log_gaussian(n=n2, d=d2, alpha=A, lam=A, balanced=True, samples=no, seed=8, n_out=4)
    om = M.output_moments(so)
    th2 = LG.theory(n2, d2, A, A, balanced=True)
    pred = LG.output_moments_theory(d2, A, A, th2["mean_G"], th2["var_G"])
    al2 = 2 * d2 / n2**2
    for key, label, allowance, chk in (
            ("mean_sq", "E[(z_out)^2]", 0.0, "4 SE (exactly 1 for balanced)"),
            ("var_sq", "Var[(z_out)^2]", 3 * al2 * pred["var_sq"], "4 SE + 3 (2d/n^2) x theory"),
            ("corr_sq", "Corr[(z_i)^2, (z_j)^2]", al2, "4 SE + 2d/n^2")):
        rows.append(row(f"balanced output {label} (Sec. 3.1-3.2), n = 100, d = 20", "log-Gaussian moments",
                        pred[key], mc(om[key], om[key + "_se"], f"{no} networks, n_out = 4, seed 8"),
                        passed=within(om[key], om[key + "_se"], pred[key], allowance), check=f"|MC - theory| <= {chk}"))
    step()
    # Prop. 6 typos and Remark 18
    uni = LG.theory(50, 30, A, A, hypo_constant=0.0)
    lay = LG.theory_layerwise(50, [A] * 30, [A] * 30)
    printed = A**2 / math.sqrt(A**2 + A**2)
    derived = float(glg.layer_cos_factor(A, A))
    ok = bool(np.isclose(lay["var_G"], uni["var_G"], rtol=1e-12) and np.isclose(derived, glg.cos_theta_k(A, A, 1))
              and not np.isclose(printed, derived))
    rows.append(row("Prop. 6: per-layer cos factor at alpha = lam = 1/sqrt(2)", printed, derived,
                    ref(float(glg.cos_theta_k(A, A, 1)), "cos theta_1 of eq. (8)"), passed=ok, documented=True,
                    check="corrected Prop. 6 reduces to Theorem 1 (Var[G] to 1e-12) and matches cos theta_1",
                    note="printed alpha_i^2/sqrt(alpha_i^2 + lam_i^2) should be alpha_i/sqrt(...); the pair weight "
                         "lam^4/(alpha^2+lam^2)^2 should be c_l c_l'"))
    ser = dlg.remark18_series(5)
    xs = list(ser.free_symbols)[0]
    c2, c3 = float(ser.coeff(xs, 2)), float(ser.coeff(xs, 3))
    cc = np.array([1e-2])
    num = float(((LG.j2bar_odd_part(np.arccos(cc)) - 8 * cc / np.pi) / cc**3)[0])
    rows.append(row("Remark 18: J2(theta_k) - J2(pi - theta_k) - 8 alpha^k/pi", "O(alpha^(2k))",
                    {"coefficient of cos^2": c2, "coefficient of cos^3": c3}, ref(num, "(D - 8c/pi)/c^3 at c = 0.01"),
                    passed=c2 == 0 and abs(num - c3) < 2e-2 * c3 and abs(c3 - 4 / (3 * np.pi)) < 1e-12,
                    documented=True, check="series: cos^2 coefficient 0, cos^3 coefficient 4/(3 pi), numerically",
                    note="the correction is O(alpha^(3k)); the paper's O(alpha^(2k)) is a loose bound"))
    step()
    return rows, {}


# =========================================================================== PDLT App. B
def pdlt_rows(quick: bool, step) -> tuple[list[dict], dict]:
    import sympy as sp

    from derive import residual_mlp as dr

    from . import monte_carlo as M
    from . import residual_mlp as R
    from .mp_checks import nu_from_iteration_mp

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
    ns = size("pdlt_tanh", quick)
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
    nb = size("pdlt_block", quick)
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


# =========================================================================== Hayou et al., Stable ResNet
def _two_inputs(angle=1.0, d=2):
    X = np.zeros((2, d))
    X[0, 0] = 1.0
    X[1, 0], X[1, 1] = np.cos(angle), np.sin(angle)
    return X


def stable_rows(quick: bool, step, figures_dir=None) -> tuple[list[dict], dict]:
    import json

    from scipy import integrate

    import generated.stable_resnet as gs

    from . import stable_experiments as E
    from . import stable_resnet as S
    from .simulate import mean_and_se, simulate_kernels

    rows = []
    errs = []
    from scipy.stats import norm

    for c in (-0.7, 0.1, 0.8):
        s = math.sqrt(1 - c**2)
        # E[relu(u) relu(v)], v = c u + s w: the w-integral in closed form, the u-integral by adaptive quadrature
        inner = lambda z: z * (c * z * norm.cdf(c * z / s) + s * norm.pdf(c * z / s)) * norm.pdf(z)  # noqa: E731
        val = integrate.quad(inner, 0, np.inf, epsabs=1e-14, epsrel=1e-13, limit=200)[0]
        errs.append(abs(2 * val - c - float(gs.f_relu(c))))
    rows.append(row("f(C) = 2 k1(C) - C (eq. 4) at C = -0.7, 0.1, 0.8", "eq. (4)",
                    [float(gs.f_relu(c)) for c in (-0.7, 0.1, 0.8)],
                    ref(max(errs), "max |2 E[relu(u) relu(v)] - C - f| by Gaussian quadrature"),
                    passed=max(errs) < 1e-10, check="quadrature of the definition agrees to 1e-10"))
    step()
    sw, sb, L = 1.5, 0.4, 30
    k = S.kernels(S.input_kernel_matrix(_two_inputs(), sw, sb), L, "unscaled", sw, sb)
    exact = float(np.exp(k["log_Q_diag"][0]))
    printed = (1 + sw / 2) ** L * (sb * (1 + 2 / sw) + sw / 2)
    q0 = sb + sw / 2
    rows.append(row("Lemma 1: exact Q_L minus the printed lower bound (sigma_b^2 = 0.4, sigma_w^2 = 1.5, L = 30)",
                    ">= 0", exact - printed, ref(-2 * sb / sw, "-2 sigma_b^2/sigma_w^2 from the rsolve solution"),
                    passed=np.isclose(exact - printed, -2 * sb / sw, rtol=1e-6) and exact >= (1 + sw / 2) ** L * q0
                    and np.isclose(exact, float(gs.unscaled_diagonal(q0, sw, sb, L)), rtol=1e-12),
                    documented=True, check="exact recursion = closed form; it lies 2 sigma_b^2/sigma_w^2 below the "
                                           "printed bound, and above (1 + sigma_w^2/2)^L Q_0",
                    note="the corrected bound is Q_L >= (1 + sigma_w^2/2)^L Q_0"))
    target = float(gs.lemma4_constant(2.0))
    vals = [L_**2 * (1 - S.two_input_kernels([L_], "unscaled", angle=1.0)["correlation"][0]) for L_ in (2000, 16000)]
    rows.append(row("Lemma 4: L^2 (1 - C_L) at L = 16000 (sigma_b = 0, sigma_w^2 = 2)", "Theta(1) (rate 1/L^2)",
                    target, ref(vals[1], "kernel recursion at L = 16000"),
                    passed=abs(vals[1] / target - 1) < 0.01 and abs(vals[1] - target) < abs(vals[0] - target),
                    check="within 1% of 18 pi^2 and closer than at L = 2000",
                    note="the constant 9 pi^2 (1 + s/2)^2/(2 (s/2)^2) = 18 pi^2 is derived here"))
    step()
    X3 = np.array([[1.0, 0.0], [np.cos(1.0), np.sin(1.0)], [np.cos(2.5), np.sin(2.5)]])
    Q0 = S.input_kernel_matrix(X3, 2.0, 0.2)
    errs = []
    Ls = (20, 40, 80, 160)
    for L_ in Ls:
        kk = S.kernels(Q0, L_, "uniform", 2.0, 0.2, keep_layers=True)
        eq = np.exp(kk["log_Q_diag_layers"])
        Ql = np.sqrt(eq[:, :, None] * eq[:, None, :]) * kk["correlation_layers"]
        errs.append(float(np.max(np.abs(Ql - S.ode_limit(Q0, np.arange(L_ + 1) / L_, 2.0, 0.2)))))
    slope = float(np.polyfit(np.log(Ls), np.log(errs), 1)[0])
    rows.append(row("Lemma 5: uniform scaling -> ODE (8), convergence exponent in L", "convergence (rate not stated)",
                    -1.0, ref(slope, "fitted slope of max |Q_L - q(l/L)|, L = 20..160"), passed=abs(slope + 1) < 0.1,
                    check="|slope + 1| < 0.1", details={"L": Ls, "max_error": errs}))
    sw, sb = 2.0, 0.5
    a, cst = sw / 2, 2 * sb / sw
    Qp = S.input_kernel_matrix(_two_inputs(1.2), sw, sb)
    q_inf = (Qp[0, 0] + cst) * np.sinh(np.pi * np.sqrt(a)) / (np.pi * np.sqrt(a)) - cst
    kk = S.kernels(Qp, 1000, "1/l", sw, sb)
    tail = np.pi**2 / 6 - np.sum(1.0 / np.arange(1, 1001) ** 2)
    ratio = float((q_inf - np.exp(kk["log_Q_diag"][0])) / gs.prop7_diagonal_gap(q_inf, sb, sw, tail))
    rows.append(row("Prop. 7: (Q_inf - Q_L)/(derived leading term) at L = 1000, lambda_k = 1/k",
                    "Q_inf - Q_L = Theta(sum_{k>L} lambda_k^2)", 1.0,
                    ref(ratio, "kernel recursion vs Euler's product for Q_inf"), passed=abs(ratio - 1) < 2e-3,
                    check="|ratio - 1| < 2e-3"))
    verdicts = {sc: bool(S.scaling_is_stable(sc)["stable"]) for sc in ("unscaled", "uniform", "decreasing", "1/l",
                                                                        "1/sqrt(l)")}
    rows.append(row("Definition 1: stable scalings (sum of lambda^2 bounded)", "uniform, decreasing stable",
                    verdicts, ref("SymPy summation", "symbolic"),
                    passed=verdicts == {"unscaled": False, "uniform": True, "decreasing": True, "1/l": True,
                                        "1/sqrt(l)": False},
                    check="unscaled and 1/sqrt(l) (decreasing, not square summable) are not stable; the rest are"))
    step()
    # Monte Carlo: finite-width networks (the foundation's simulator with ReLU and rho = lambda)
    N, ms = 256, size("stable_mc", quick)
    X = _two_inputs(1.0)
    for sc, L_, rho, seed in (("uniform", 20, 20**-0.5, 5), ("unscaled", 10, 1.0, 6)):
        res = simulate_kernels(X, depth=L_, width=N, rho=rho, sigma_w2=2.0, sigma_b2=0.0, activation="relu",
                               samples=ms, seed=seed)
        kk = S.kernels(S.input_kernel_matrix(X, 2.0, 0.0), L_, sc, 2.0, 0.0)
        Q = np.exp(kk["log_scale"]) * kk["Q_normalised"]
        lam2 = float(S.lambda_squared(sc, L_).sum())
        Ke = res["K_emp"][:, L_]
        m, s = mean_and_se(Ke[:, 0, 0])
        rows.append(row(f"Q_L(x, x) of a finite {sc} ReLU ResNet, L = {L_}, N = {N} (eq. 5)",
                        "NNGP limit", float(Q[0, 0]), mc(m, s, f"{ms} networks, seed {seed}"),
                        passed=within(m, s, Q[0, 0], 2 * lam2 / N * Q[0, 0]),
                        check=f"|MC - theory| <= 4 SE + 2 (sum lambda^2)/N x theory (finite-width O(1/N); "
                              f"sum lambda^2 = {lam2:g})"))
        corr = Ke[:, 0, 1] / np.sqrt(Ke[:, 0, 0] * Ke[:, 1, 1])
        m, s = mean_and_se(corr)
        cth = float(kk["correlation"][0, 1])
        rows.append(row(f"C_L(x, x') of a finite {sc} ReLU ResNet, angle 1, L = {L_}, N = {N} (eq. 3)",
                        "NNGP limit", cth, mc(m, s, f"{ms} networks, seed {seed}"),
                        passed=within(m, s, cth, 2 * lam2 / N * (1 - cth)),
                        check="|MC - theory| <= 4 SE + 2 (sum lambda^2)/N x (1 - C)"))
        step()
    # Experiments: Fig. 2 spectra, Fig. 3 GP regression, Prop. 10 KL, Table 2
    P = size("stable_spectra_P", quick)
    sp_ = E.spectra(depths=(10, 300), P=P, k=5, seed=0)
    un = sp_["nngp"]["unscaled"][:, 1]
    stab = {sc: sp_["nngp"][sc][:, 1] for sc in ("uniform", "decreasing")}
    rows.append(row(f"Fig. 2: NNGP second eigenvalue / largest, L = 10 -> 300 (P = {P} circle points)",
                    "unscaled degenerates, stable scalings do not",
                    {f"{sc} L = {L_}": float(v[i]) for sc, v in (("unscaled", un), *stab.items())
                     for i, L_ in enumerate((10, 300))}, ref("eigh", "dense eigenvalues"),
                    passed=un[1] < 1e-2 * un[0] and stab["uniform"].min() > 0.7 and stab["decreasing"].min() > 0.45,
                    check="unscaled lambda_2 falls 100-fold; uniform stays > 0.7, decreasing > 0.45"))
    rm = {sc: E.gp_regression(depth=1000, scaling=sc)["rmse"] for sc in E.SCALINGS}
    rows.append(row("Fig. 3: GP regression of x sin x at L = 1000, RMSE", "unscaled posterior is ~constant",
                    rm, ref("Cholesky", "exact GP posterior"),
                    passed=rm["unscaled"] > 2.0 and rm["uniform"] < 0.6 and rm["decreasing"] < 0.6,
                    check="unscaled RMSE > 2, stable scalings < 0.6"))
    kl = E.pac_bayes_kl((100, 200, 400), n=20, noise=0.1)
    ku = np.array(kl["kl"]["unscaled"])
    slope = float((ku[2] - ku[1]) / 200)
    rows.append(row("Prop. 10: unscaled KL growth per layer (N = 20 points)", "KL >= L", 20 * np.log(2) / 2,
                    ref(slope, "slope of KL(L) between L = 200 and 400"),
                    passed=abs(slope / (10 * np.log(2)) - 1) < 0.02 and bool(np.all(ku >= np.array(kl["depths"]))),
                    check="slope within 2% of N ln 2 / 2, and KL >= L",
                    details={"depths": kl["depths"], "kl": kl["kl"]}))
    step()
    dig = None
    path = None if figures_dir is None else figures_dir / "stable_table2_digits.json"
    if path is not None and path.exists():
        dig = json.loads(path.read_text())
    else:
        dig = E.digits_table((200, 1000), seeds=[0], n_train=300, n_val=150, n_test=300)
    acc = {f"{sc} L = {L_}": dig["mean"][sc][i] for sc in E.SCALINGS for i, L_ in enumerate(dig["depths"])}
    last = {sc: dig["mean"][sc][-1] for sc in E.SCALINGS}
    rows.append(row(f"Table 2 on scikit-learn digits: test accuracy ({dig['n_train']} training images)",
                    "unscaled collapses with depth (MNIST: 55% at large depth)", "NNGP posterior mean with C_L",
                    ref(acc, f"{len(dig['seeds'])} split(s), mean"), documented=True,
                    passed=min(last["uniform"], last["decreasing"]) > 0.85 and last["unscaled"] > 0.6,
                    check="documented: stable scalings > 85%; the unscaled network degrades far less than the "
                          "paper's MNIST collapse (> 60% at the largest depth)",
                    note="the tuned noise goes down to 1e-5, where the small non-constant part of the unscaled "
                         "kernel still separates the classes"))
    step()
    return rows, {}


# =========================================================================== Innocenti, Achour & Bogacz
OURS_TABLE2 = {"SP": {"1": True, "2": False, "3": False}, "NTK": {"1": True, "2": True, "3": False},
               "mean-field": {"1": True, "2": True, "3": True}, "muP": {"1": True, "2": True, "3": True}}


def _yn(ds: dict) -> str:
    return " ".join(f"D{k}{'+' if v else '-'}" for k, v in sorted(ds.items()))


def abcd_rows(quick: bool, step, pc_data: dict | None = None) -> tuple[list[dict], dict]:
    import sympy as sp

    from derive import abcd as AD

    from . import abcd as AB
    from . import predictive_coding as pc

    rows = []
    fam = AB.solution_family()
    rows.append(row("D1-D3 solution family (BP and PC)", "eq. 15: 2a + b = 1, 2a1 + b1 = 0, 2a + c = 1, 2a1 + c = 0",
                    {k: v for k, v in fam["family"].items()}, ref("linsolve + Fourier-Motzkin", "exact"),
                    passed=all(fam["eq15"].values()) and fam["same_for_bp_and_pc"] and fam["family"]["d"] == "1/2",
                    check="every eq.-15 relation holds on the solved family, d = 1/2, identical for BP and PC"))
    rows.append(row("depth desiderata D4, D5", "alpha >= 1/2 (D4), alpha = 1/2 (D5)",
                    {"D4": fam["depth"]["D4"], "D5": fam["depth"]["D5"]}, ref(fam["depth"]["pc_D4_and_D5"], "exact"),
                    passed=fam["depth"]["D4"] == "alpha >= 1/2" and fam["depth"]["D5"] == "alpha = 1/2",
                    check="exact solution of D4 and D5", note="for PC both together need N = L^nu with nu >= 1"))
    step()
    t2 = AB.table2()["parameterisations"]
    for name, params in AD.TABLE2.items():
        r = t2[name]
        lp = AD.lp_classify(params) == AD.classify(params)
        ok = r["bp"] == OURS_TABLE2[name] and r["pc"] == OURS_TABLE2[name] and lp
        rows.append(row(f"Table 2: {name}", _yn({str(k): v for k, v in AD.TABLE2_PAPER_CLAIMS[name].items()}),
                        f"BP {_yn(r['bp'])}; PC {_yn(r['pc'])}", ref("linprog agrees" if lp else "linprog differs",
                                                                   "scipy.optimize.linprog"),
                        passed=ok, documented=name == "SP",
                        check="exact classification as documented, confirmed by linprog",
                        note="with c = d = 0 the SP's hidden features move as N^(1/2): D3 fails"
                        if name == "SP" else ""))
    c_, a_, a1_, d_ = AD.c, AD.a, AD.a1, AD.d
    mn = -sp.Max(0, -2 * d_)
    eq66, eq67 = sp.Eq(c_ + 2 * a_ - 1, mn), sp.Eq(c_ + 2 * a1_, mn)
    eq73, eq83 = sp.Eq(c_ + d_ + 2 * a_ - 1, mn), sp.Eq(c_ + 2 * a1_ - d_ + sp.Rational(1, 2), mn)
    eq94 = sp.Eq(c_ + 2 * a_ - sp.Rational(1, 2), mn)
    s73 = [p for p in AD.solve_system([eq66, eq73], AD.WIDTH_VARS) if p.feasible]
    inconsistent = (bool(s73) and all(p.solution[d_] == 0 for p in s73)
                    and not any(p.feasible for p in AD.solve_system([eq66, eq67, eq73, eq83], AD.WIDTH_VARS))
                    and not any(p.feasible for p in AD.solve_system([eq66, eq94], AD.WIDTH_VARS)))
    rows.append(row("eqs. 73 and 94 as boxed equalities", "equalities", "inconsistent with eqs. 66-67, 83",
                    ref("exact solver", "linsolve + Fourier-Motzkin"), passed=inconsistent, documented=True,
                    check="eq. 73 with 66 forces d = 0; 66 + 67 + 73 + 83 and 66 + 94 have no solution",
                    note="encoded as 'the PC term does not exceed the main term'"))
    step()
    seeds = size("abcd_seeds", quick)
    widths = [128, 256, 512, 1024, 2048]
    init = AB.mlp_pc_terms(widths, seeds=seeds)["slopes"]
    aligned = AB.mlp_pc_terms(widths, seeds=seeds, samples=2, aligned=True)["slopes"]
    for state, sl, target in (("initialisation", init, -1.5), ("aligned readout", aligned, -1.0)):
        rows.append(row(f"PC-specific terms r and D: width exponent at {state} (linear MLP, mean-field)", -0.5,
                        target, mc(0.5 * (sl["r"] + sl["D"]), abs(sl["r"] - sl["D"]) / 2,
                                   f"fitted log-log slope, N = 128..2048, {seeds} seeds (SE: half the r-D spread)",
                                   r=sl["r"], D=sl["D"]),
                        passed=abs(sl["r"] - target) < 0.2 and abs(sl["D"] - target) < 0.2, documented=True,
                        check="both slopes within 0.2 of the sharp exponent",
                        note="the paper's N^(-1/2) is an upper bound (coherent sums); the sharp exponents are "
                             "-3/2 at initialisation and -1 once aligned"))
    step()
    rms_rows = []
    ws = [32, 64, 128, 256]
    for N in ws:
        rms_rows.append([np.sqrt(np.mean(pc.rescaling_gradient(pc.init_network(
            N, 5, param="mean_field", rng=np.random.default_rng([19, N, k])))[2] ** 2)) for k in range(8)])
    rms = np.array(rms_rows)
    fit = pc.fit_power_law(ws, rms.mean(1), rms.std(1, ddof=1) / np.sqrt(rms.shape[1]))
    rows.append(row("ds/dW entries (eqs. 53-55), mean-field: width exponent", -2.0, -2.5,
                    mc(fit["slope"], fit["slope_se"], "weighted log-log fit, N = 32..256, 8 networks each"),
                    passed=abs(fit["slope"] + 2.5) < 0.2 + 3 * fit["slope_se"] and fit["slope"] < -2.3,
                    documented=True, check="|slope + 5/2| < 0.2 + 3 SE, and below the paper's -2 by > 0.3",
                    note="the sum over N in eq. 53 has random signs at initialisation and grows as sqrt(N)"))
    step()
    # predictive coding: closed forms and the figure data
    rng = np.random.default_rng(0)
    net = pc.init_network(16, 5, d_in=5, rng=rng)
    x, y = rng.standard_normal((5, 7)), rng.standard_normal((1, 7))
    closed = float(pc.equilibrated_energy(net, x, y))
    gd = pc.inference_gd(net, x, y, gtol=1e-10)
    loss_over_s = float(np.mean(pc.mse_loss(net, x, y)) / pc.s_theta(net))
    rows.append(row("equilibrated energy F* = L/s (eqs. 25, 104-105), linear MLP N = 16, L = 5", "F* = L/s",
                    closed, ref(float(gd.energy), "gradient-descent inference on the activities (eq. 3)"),
                    passed=bool(gd.converged) and abs(float(gd.energy) / closed - 1) < 1e-7
                    and abs(loss_over_s / closed - 1) < 1e-9,
                    check="closed form = GD inference to 1e-7 relative, and = L/s to 1e-9",
                    note="eq. 105's product index is garbled; it should run over k = l..L-1"))
    if pc_data is None:
        from .pc_figures import pc_figure_data

        pc_data = pc_figure_data(quick=quick, seed=0)
    g = pc_data["s_grid"]["mlp"]
    z = (g["mean"] - g["theory"]) / g["se"]
    i, j = len(g["depths"]) - 1, len(g["widths"]) - 1
    rows.append(row(f"E[s - 1] at initialisation, mean-field MLP, L = {g['depths'][i]}, N = {g['widths'][j]}",
                    "Theta(L/N) (eq. 16)", g["theory"][i, j],
                    mc(g["mean"][i, j], g["se"][i, j], f"{pc_data['settings']['s_samples']} networks per point",
                       max_abs_z=float(np.abs(z).max())),
                    passed=np.abs(z).max() < 4.5, check="every (L, N) point of the grid within 4.5 SE of (L-1)/N",
                    details={"depths": g["depths"], "widths": g["widths"], "mc_mean": g["mean"], "mc_se": g["se"],
                             "theory": g["theory"]}))
    for (arch, param), target in ((("mlp", "mean_field"), -1.0), (("resnet", "mean_field"), -1.0),
                                  (("mlp", "sp"), 0.0)):
        sw_ = pc_data["s_width"][(arch, param)]
        f = sw_["fit_width"][0]
        tf = sw_["fit_width_theory"][0]["slope"]
        pretty = {"mean_field": "mean-field", "sp": "SP"}[param]
        rows.append(row(f"width exponent of s - 1, {arch}, {pretty}, L = 5",
                        {-1.0: "-1 (eq. 16)", 0.0: "0 (Fig. A.19)"}[target], tf,
                        mc(f["slope"], f["slope_se"], "weighted log-log fit of the Monte Carlo means"),
                        passed=within(f["slope"], f["slope_se"], tf, 0.0) and abs(tf - target) < 0.1,
                        check="|MC slope - exact-expectation slope| <= 4 SE; exact slope within 0.1 of the claim"))
    deep = pc_data["s_deep"]
    Nd, Ld = int(deep["widths"][0]), int(deep["depths"][-1])
    col = float(deep["mean"][-1, 0] * Nd / Ld)
    col_se = float(deep["se"][-1, 0] * Nd / Ld)
    col_th = float(deep["theory"][-1, 0] * Nd / Ld)
    rows.append(row(f"N (s - 1)/L, mean-field ResNet alpha = 1/2, N = {Nd}, L = {Ld}", "Theta(1) (eq. 19)", col_th,
                    mc(col, col_se, f"{pc_data['settings']['s_samples']} networks"),
                    passed=within(col, col_se, col_th) and abs(col_th - (math.e - 1)) < 0.01,
                    check="|MC - exact| <= 4 SE; exact within 0.01 of the limit e - 1",
                    note=f"the constant is e - 1 = {math.e - 1:.4f}"))
    step()
    lin = pc_data["cos_linear"][("mlp", "mean_field")]
    keep = lin["widths"] >= 16
    fit = pc.fit_power_law(lin["widths"][keep], 1 - lin["mean"][keep], np.maximum(lin["se"][keep], 1e-12))
    rows.append(row("1 - cos(PC, BP) width exponent, linear MLP, mean-field, L = 5", "-> 0 (Corollary 3.2)", -2.0,
                    mc(fit["slope"], fit["slope_se"], f"fit over N = {int(lin['widths'][keep][0])}.."
                                                     f"{int(lin['widths'][-1])}, {lin['cosine'].shape[1]} seeds"),
                    passed=abs(fit["slope"] + 2) < 0.3 + 3 * fit["slope_se"] and lin["mean"][-1] > 0.99,
                    check="|slope + 2| < 0.3 + 3 SE (pre-asymptotic), cos > 0.99 at the largest width"))
    spd = pc_data["cos_linear"][("mlp", "sp")]
    s_inv = 1 - np.nanmean(1 / spd["s"], axis=1)
    rows.append(row(f"||g_PC - g_BP||/||g_BP||, linear MLP, SP, N = {int(spd['widths'][-1])}",
                    "PC != BP under SP (Fig. A.18)", float(s_inv[-1]),
                    mc(spd["rel_error_mean"][-1], spd["rel_error_se"][-1], f"{spd['cosine'].shape[1]} seeds"),
                    passed=bool(np.all(spd["rel_error_mean"] > 0.6))
                    and abs(spd["rel_error_mean"][-1] - s_inv[-1]) < 0.03,
                    check="relative error > 0.6 at every width and within 0.03 of 1 - 1/s at the largest",
                    note="at initialisation SP fails on the size of the PC gradient (g/s), not on its direction"))
    step()
    return rows, {"pc_data": pc_data}


# =========================================================================== cross-theory checks
def cross_rows(quick: bool, step, theories) -> list[dict]:
    theories = set(theories)
    rows = []
    if theories & {"stable", "fischer"}:
        from . import stable_resnet as S
        from .field_theory import nngp

        rng = np.random.default_rng(0)
        X = rng.standard_normal((5, 3))
        sw, sb = 1.7, 0.3
        Q0 = S.input_kernel_matrix(X, sw, sb)
        worst = 0.0
        for scaling, L, rho in (("unscaled", 12, 1.0), ("uniform", 40, 40**-0.5)):
            hay = S.kernels(Q0, L, scaling, sw, sb)
            Q = np.exp(hay["log_scale"]) * hay["Q_normalised"]
            fnd = nngp(Q0, depth=L, rho=rho, sigma_w2=sw, sigma_b2=sb, activation="relu")["K"]
            worst = max(worst, float(np.max(np.abs(Q / fnd - 1))))
        rows.append(row("Hayou's NNGP recursion (5) = foundation NNGP (B9-B10) with ReLU and rho = lambda",
                        "(two papers, same recursion)", "identical recursions",
                        ref(worst, "max relative difference, 5 inputs, unscaled L = 12 and uniform L = 40"),
                        passed=worst < 1e-11, check="max relative difference < 1e-11"))
        step()
    if theories & {"pdlt", "lognormal"}:
        import sympy as sp

        from derive import log_gaussian as dlg
        from derive import residual_mlp as dr

        from . import log_gaussian as LG
        from . import monte_carlo as M
        from . import residual_mlp as R

        g = sp.Symbol("g", positive=True)
        nu_relu = dr.nu_scale_invariant().subs({dr.a_plus: 1, dr.a_minus: 0, dr.gamma: g})
        beta = dlg.beta_paper().subs({dlg.alpha: g, dlg.lam: sp.sqrt(1 - g**2)})
        ident = sp.simplify(nu_relu * dlg.d / dlg.n + 2 / dlg.n - beta) == 0
        gamma, n, d = A, 48, 48
        lam = math.sqrt(1 - gamma**2)
        pdlt = float(R.nu(gamma, "relu")) * d / n + 2 / n
        lnr = LG.theory(n, d, gamma, lam)
        rows.append(row("PDLT nu(gamma) r + 2/n = Li-Nica-Roy beta (ReLU, alpha = gamma, lam^2 = 1 - gamma^2)",
                        "(two papers)", pdlt, ref(lnr["beta"], "LNR beta (eq. 5) at n = d = 48"),
                        passed=ident and abs(pdlt - lnr["beta"]) < 1e-12,
                        check="SymPy identity for all gamma, n, d; numerically equal at n = d = 48"))
        ns = size("cross_samples", quick)
        b = M.g_moments(M.simulate_log_gaussian(n=n, d=d, alpha=gamma, lam=lam, balanced=True, samples=ns, seed=13))
        rows.append(row("balanced ResNet Var[G] vs PDLT nu r + 2/n, n = d = 48", "(PDLT describes the balanced net)",
                        pdlt, mc(b["var_G"], b["var_G_se"], f"{ns} balanced networks, seed 13"),
                        passed=within(b["var_G"], b["var_G_se"], pdlt, 2 * d / n**2),
                        check="|MC - PDLT| <= 4 SE + 2d/n^2"))
        step()
        s = M.simulate_residual_mlp(n=n, depth=d + 1, gamma=gamma, C_W=2 * lam**2, activation="relu", K1=1.0,
                                    samples=ns, seed=12)
        ln = M.log_norm_moments(s)
        var, se = float(ln["var"][-1]), float(ln["var_se"][-1])
        rows.append(row("vanilla residual ReLU MLP Var ln||z||^2 vs PDLT nu r + 2/n, n = 48, L = 49",
                        "nu r + 2/n (B.26, single input)", pdlt,
                        mc(var, se, f"{ns} networks, seed 12", lnr_beta_plus_c2I=lnr["var_G"]),
                        passed=var - pdlt > 20 * se and abs(var - lnr["var_G"]) < var - pdlt, documented=True,
                        check="documented: MC exceeds PDLT by > 20 SE and is closer to LNR's beta + c^2 I_total",
                        note=f"LNR's beta + c^2 I_total = {lnr['var_G']:.3f}; B.26 misses the interlayer "
                             "correlations of the ReLU activation pattern that skip connections create"))
        v = M.g_moments(M.simulate_log_gaussian(n=n, d=d, alpha=gamma, lam=lam, samples=ns, seed=14))
        rows.append(row("the two engines simulate the same vanilla network: Var G (LNR) vs Var ln S2 (PDLT)",
                        "(same network)", "equal in law", mc(v["var_G"], v["var_G_se"], f"{ns} networks, seed 14",
                                                             residual_mlp_engine=var, residual_mlp_engine_se=se),
                        passed=within(v["var_G"], math.hypot(v["var_G_se"], se), var),
                        check="|difference| <= 4 combined SE"))
        step()
    return rows
