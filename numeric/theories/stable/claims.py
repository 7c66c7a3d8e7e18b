"""Report claims of the stable theory: the paper's statement, resprop's value and an independent check.

``claims(quick, step, figures_dir=None)`` returns ``(rows, extra)``; ``step()`` advances a progress bar and
``extra`` carries data for the figures.  Row fields: :mod:`resprop.numeric.report.claims`.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from resprop.numeric.report.claims import A, mc, ref, row, size, within

#: Monte Carlo sizes (quick, full)
SIZES = {"stable_mc": (4000, 20000), "stable_spectra_P": (200, 600)}


def _size(name: str, quick: bool) -> int:
    return size(SIZES, name, quick)


def _two_inputs(angle=1.0, d=2):
    X = np.zeros((2, d))
    X[0, 0] = 1.0
    X[1, 0], X[1, 1] = np.cos(angle), np.sin(angle)
    return X


def claims(quick: bool, step, figures_dir=None) -> tuple[list[dict], dict]:
    import json

    from scipy import integrate

    import resprop.generated.stable as gs

    from resprop.numeric.theories.stable import experiments as E
    from resprop.numeric.theories.stable import stable_resnet as S
    from resprop.numeric.engine.simulate import mean_and_se, simulate_kernels

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
    N, ms = 256, _size("stable_mc", quick)
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
    P = _size("stable_spectra_P", quick)
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


def cross_claims(quick: bool, step) -> list[dict]:
    """Cross-theory: Hayou's NNGP recursion is the foundation's (Fischer B9-B10) with ReLU and rho = lambda."""
    rows = []
    from resprop.numeric.theories.stable import stable_resnet as S
    from resprop.numeric.theories.fischer.field_theory import nngp

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
    return rows
