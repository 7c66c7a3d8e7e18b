"""Hayou et al. (2021), "Stable ResNet": ReLU NNGP and NTK recursions with scaled residual blocks.

Derived here rather than typed in:

* ``f_from_arccos``: f of eq. (4) is 2 k_1(C) - C, with k_1 the degree-1 arc-cosine kernel that
  `resprop.derive.gaussian` derives from the orthant probability (the foundation's ReLU expectations), and
  E[phi'(u) phi'(v)] = k_0(C) = (pi - arccos C)/(2 pi) (eq. 9's Psi');
* ``nngp_recursion_from_expectation``: eq. (5) from Q_l = Q_{l-1} + lam^2 (sigma_b^2 + sigma_w^2 E[phi phi]);
* ``diagonal_solution``: the unscaled diagonal recursion solved exactly by `rsolve`.  It shows that
  Lemma 1's lower bound is off by 2 sigma_b^2/sigma_w^2: the exact Q_L is *below* the printed bound
  whenever sigma_b > 0 (with sigma_b = 0 the bound is an equality);
* ``lemma4_constant``: for sigma_b = 0, 1 - C_l obeys e_l = e_{l-1} - s k e_{l-1}^{3/2} + ... with
  f(C) = k (1 - C)^{3/2} + ..., so L^2 (1 - C_L) -> 4/(s k)^2 = 9 pi^2 / (2 s^2), s = (sigma_w^2/2)/(1 + sigma_w^2/2);
* ``ode_diagonal_solution``: the diagonal of the ODE limit (8) by `dsolve`;
* ``limit_kernel_gap``: Prop. 7's leading term for the diagonal, (Q_inf + c) a sum_{k>L} lam_k^2.
"""
from __future__ import annotations

from functools import cache

import sympy as sp

from resprop.derive.expectation import mean2, phi, resolve, u, v
from resprop.derive.results import Derivation
from resprop.derive.symbols import Parameter

PAPER = "hayou2021"

_P = Parameter
_PREV = r"\ell-1"
#: every input of the results below, declared once (symbol, domain, the paper's LaTeX, meaning); Hayou et al.
#: write the layer as a subscript, Q_l(x, x')
PARAMETERS = (
    _P("C", "[-1, 1]", r"C_{LAYER}", "correlation C_{l-1}", layer=_PREV),
    _P("Q_prev", "(0, inf)", r"Q_{LAYER}(x, x)", "diagonal Q_{l-1}(x, x)", layer=_PREV),
    _P("Q_ab", "real", r"Q_{LAYER}(x, x')", "Q_{l-1}(x, x')", layer=_PREV),
    _P("Q_aa", "(0, inf)", r"Q_{LAYER}(x, x)", "Q_{l-1}(x, x)", layer=_PREV),
    _P("Q_bb", "(0, inf)", r"Q_{LAYER}(x', x')", "Q_{l-1}(x', x')", layer=_PREV),
    _P("Theta_prev", "real", r"\Theta_{LAYER}(x, x')", "Theta_{l-1}(x, x')", layer=_PREV),
    _P("Psi", "real", r"\Psi_{LAYER}", "Psi_{l-1} = sigma_b^2 + sigma_w^2 E[phi phi]", layer=_PREV),
    _P("Psi_d", "real", r"\Psi'_{LAYER}", "Psi'_{l-1} = sigma_w^2 E[phi' phi']", layer=_PREV),
    _P("lam2", "[0, inf)", r"\lambda_{LAYER,L}^{2}", "lambda_{l,L}^2", layer=r"\ell"),
    _P("sigma_w2", "(0, inf)", r"\sigma_{w}^{2}", "weight variance"),
    _P("sigma_b2", "[0, inf)", r"\sigma_{b}^{2}", "bias variance"),
    _P("L", "[1, inf)", "L", "depth L", integer=True),
    _P("t", "[0, 1]", "t", "continuous depth t = l/L"),
    _P("q0", "(0, inf)", r"Q_{0}(x, x)", "Q_0(x, x)"),
    _P("x_dot", "real", r"x^{\top} x'", "x . x'"),
    _P("d_in", "[1, inf)", "d", "input dimension d"),
    _P("tail", "[0, inf)", r"\left(\sum_{k>L} \lambda_{k}^{2}\right)", "sum_{k>L} lambda_k^2"),
    _P("Q_inf", "(0, inf)", r"Q_{\infty}(x, x)", "Q_inf(x, x)"),
    _P("lam_sum", "[0, inf)", r"\left(\sum_{\ell} \lambda_{\ell,L}^{2}\right)", "sum_l lambda_{l,L}^2"),
    _P("root_qq", "(0, inf)", r"\sqrt{Q_{LAYER}(x, x) Q_{LAYER}(x', x')}", "sqrt(Q_aa Q_bb)", layer=_PREV),
)
(C, Q_prev, Q_ab, Q_aa, Q_bb, Theta_prev, Psi, Psi_d, lam2, sigma_w2, sigma_b2, L, t, q0, x_dot, d_in, tail, Q_inf,
 lam_sum, root_qq) = (p.symbol for p in PARAMETERS)

_r = sp.Symbol("r", real=True)
_l = sp.Symbol("l", positive=True, integer=True)
_e = sp.Symbol("e", positive=True)


def f_paper(c: sp.Expr = C) -> sp.Expr:
    """Eq. (4): f(gamma) = (sqrt(1 - gamma^2) - gamma arccos gamma) / pi."""
    return (sp.sqrt(1 - c**2) - c * sp.acos(c)) / sp.pi


def relu_mean(f: sp.Expr, K_aa: sp.Expr = 1, K_bb: sp.Expr = 1, K_ab: sp.Expr = C) -> sp.Expr:
    """<f(u, v)> for ReLU, (u, v) centred Gaussian of covariance [[K_aa, K_ab], [K_ab, K_bb]] (unit variances and
    correlation C by default), written as a symbolic expectation and resolved by `resprop.derive.expectation` (the
    foundation's arc-cosine kernels, derived from the orthant probability)."""
    return resolve(mean2(f, K_aa, K_bb, K_ab), "relu")


def f_from_arccos() -> sp.Expr:
    """f = 2 E[phi(u) phi(v)] - C at unit variances (the degree-1 arc-cosine kernel k_1); checked equal to eq. (4)."""
    f = sp.simplify(2 * relu_mean(phi(u) * phi(v)) - C)
    if sp.simplify((f - f_paper()).rewrite(sp.asin)) != 0:
        raise ArithmeticError("2 k_1(C) - C is not eq. (4)")
    return f_paper()


def dphi_mean_from_arccos() -> sp.Expr:
    """E[phi'(u) phi'(v)] = k_0(C) (orthant probability), the normalised Psi' of eq. (9)."""
    k0 = relu_mean(sp.diff(phi(u), u) * sp.diff(phi(v), v))
    target = (sp.pi - sp.acos(C)) / (2 * sp.pi)
    if sp.simplify((k0 - target).rewrite(sp.asin)) != 0:
        raise ArithmeticError("k_0 is not (pi - arccos C)/(2 pi)")
    return target


def psi_relu() -> sp.Expr:
    """Psi_{l-1} = sigma_b^2 + sigma_w^2 E[phi phi] = sigma_b^2 + sigma_w^2 sqrt(Q_aa Q_bb) k_1(C) (eqs 5, 9),
    written with root = sqrt(Q_aa Q_bb); checked against eq. (5)'s (1 + f(C)/C) Q_ab/2 form and against the
    expectation under the covariance [[Q_aa, Q_ab], [Q_ab, Q_bb]] itself."""
    psi = sigma_b2 + sigma_w2 * root_qq * (C + f_from_arccos()) / 2
    paper = sigma_b2 + sigma_w2 / 2 * (1 + f_paper() / C) * Q_ab
    if sp.simplify((psi - paper).subs(Q_ab, C * root_qq)) != 0:
        raise ArithmeticError("eq. (5) does not follow from E[phi phi] = sqrt(Q Q) k_1")
    a, b = sp.symbols("a b", positive=True)  # Q_aa = a^2, Q_bb = b^2, Q_ab = C a b
    direct = sigma_b2 + sigma_w2 * relu_mean(phi(u) * phi(v), a**2, b**2, C * a * b)
    if sp.simplify((direct - psi.subs(root_qq, a * b)).rewrite(sp.asin)) != 0:
        raise ArithmeticError("Psi is not sigma_b^2 + sigma_w^2 E[phi(u) phi(v)] under the layer's covariance")
    return psi


def nngp_recursion_from_expectation() -> sp.Expr:
    """Q_l(x, x') = Q_{l-1}(x, x') + lam^2 Psi_{l-1} (eq. 5)."""
    return Q_ab + lam2 * Psi


@cache
def diagonal_solution() -> sp.Expr:
    """Unscaled (lam = 1) diagonal: Q_l = (1 + sigma_w^2/2) Q_{l-1} + sigma_b^2 (f(1) = 0), solved exactly."""
    Qf = sp.Function("Q")
    sol = sp.rsolve(Qf(_l) - (1 + sigma_w2 / 2) * Qf(_l - 1) - sigma_b2, Qf(_l), {Qf(0): q0})
    return sp.simplify(sol.subs(_l, L))


def diagonal_solution_stable() -> sp.Expr:
    """The emitted form q0 g + (2 sb/sw) (g - 1), g = exp(L log(1 + sw/2)) (printed with expm1 and log1p):
    rsolve's 2^-L ((sw + 2)^L ...) gives 0 * inf = NaN beyond L = 1024 and cancels for small sw."""
    g = sp.exp(L * sp.log(1 + sigma_w2 / 2))
    stable = q0 * g + 2 * sigma_b2 / sigma_w2 * (g - 1)
    if sp.simplify(sp.powsimp(sp.expand_power_base(stable - diagonal_solution(), force=True), force=True)) != 0:
        raise ArithmeticError("stable Q_L differs from the solution of the recursion")
    return stable


def log_diagonal_stable() -> sp.Expr:
    """ln Q_L = u + ln(q0 + (2 sb/sw)(1 - e^{-u})), u = L ln(1 + sw/2) (printed with log1p and expm1).

    Q_L itself exceeds float64 once u > 709.78 (sw = 2 at L = 1024; every sw > 0.0143 at L = 10^5), so the value
    cannot be returned there; its logarithm is finite at any depth, and (1 - e^{-u}) as -expm1(-u) does not
    cancel at small u.  Checked equal to ln of the solution of the recursion at rational points (40 digits)."""
    u = L * sp.log(1 + sigma_w2 / 2)
    stable = u + sp.log(q0 + 2 * sigma_b2 / sigma_w2 * (1 - sp.exp(-u)))
    exact = sp.log(diagonal_solution())
    for k in range(4):
        pt = {q0: sp.Rational(3 + k, 5), sigma_w2: sp.Rational(2 * k + 1, 3), sigma_b2: sp.Rational(k, 7),
              L: 1 + 3 * k}
        if abs(sp.N((stable - exact).subs(pt), 40)) > 1e-30:
            raise ArithmeticError("log-space Q_L differs from the log of the solution of the recursion")
    return stable


def lemma1_bound(q_init: sp.Expr = q0) -> sp.Expr:
    """Lemma 1 as printed, with Q_0 = sigma_b^2 + sigma_w^2 |x|^2/d = q0: (1 + sw/2)^L (sb (1 + 2/sw) + q0 - sb)."""
    return (1 + sigma_w2 / 2) ** L * (sigma_b2 * (1 + 2 / sigma_w2) + (q_init - sigma_b2))


def lemma1_gap() -> sp.Expr:
    """Exact Q_L minus Lemma 1's bound: -2 sigma_b^2/sigma_w^2 (<= 0, so the printed bound fails for sigma_b > 0)."""
    return sp.simplify(diagonal_solution() - lemma1_bound())


def f_near_one() -> sp.Expr:
    """Leading term of f(C) as C -> 1: k (1 - C)^{3/2} with k = 2 sqrt(2)/(3 pi)."""
    ser = sp.series(f_paper().subs(C, 1 - _e), _e, 0, 2).removeO()
    return sp.simplify(ser)


def lemma4_constant() -> sp.Expr:
    """lim L^2 (1 - C_L) for the unscaled ResNet without bias (Lemma 4's O(L^-2), with its constant)."""
    k = sp.simplify(f_near_one() / _e ** sp.Rational(3, 2))
    s = (sigma_w2 / 2) / (1 + sigma_w2 / 2)
    A = sp.Symbol("A", positive=True)
    # e_l = A/l^2: e_l - e_{l-1} = -2A/l^3 + ...  must equal -s k e^{3/2} = -s k A^{3/2}/l^3
    sol = sp.solve(sp.Eq(-2 * A, -s * k * A ** sp.Rational(3, 2)), A)
    return sp.simplify(sol[0])


def correlation_update_no_bias() -> sp.Expr:
    """C_l from C_{l-1} when sigma_b = 0: diagonals grow by (1 + lam^2 sw/2), so C_l = (C + lam^2 sw (C + f)/2)/(1 +
    lam^2 sw/2)."""
    return (C + lam2 * sigma_w2 * (C + f_paper()) / 2) / (1 + lam2 * sigma_w2 / 2)


def ode_diagonal_solution() -> sp.Expr:
    """Diagonal of the ODE limit (8): q' = sigma_b^2 + sigma_w^2 q/2 (c_t(x, x) = 1, f(1) = 0)."""
    qf = sp.Function("q")
    sol = sp.dsolve(sp.Eq(qf(t).diff(t), sigma_b2 + sigma_w2 / 2 * qf(t)), qf(t), ics={qf(0): q0})
    return sp.simplify(sol.rhs)


def ode_diagonal_stable() -> sp.Expr:
    """The emitted form q0 e^{sw t/2} + (2 sb/sw) (e^{sw t/2} - 1) (printed with expm1: exact for small sw)."""
    g = sp.exp(sigma_w2 * t / 2)
    stable = q0 * g + 2 * sigma_b2 / sigma_w2 * (g - 1)
    if sp.simplify(stable - ode_diagonal_solution()) != 0:
        raise ArithmeticError("stable q_t differs from the ODE solution")
    return stable


def limit_kernel_gap() -> sp.Expr:
    """Prop. 7 for the diagonal: Q_inf - Q_L = (Q_inf + c)(1 - prod_{k>L} (1 + a lam_k^2)^{-1}) ~ (Q_inf + c) a tail.

    With c = 2 sigma_b^2/sigma_w^2 and a = sigma_w^2/2, Q_l + c = (1 + a lam_l^2)(Q_{l-1} + c) exactly.
    """
    a = sigma_w2 / 2
    c = 2 * sigma_b2 / sigma_w2
    check = sp.simplify((1 + a * lam2) * (Q_prev + c) - c - (Q_prev + lam2 * (sigma_b2 + a * Q_prev)))
    if check != 0:
        raise ArithmeticError("the diagonal recursion is not Q + c = (1 + a lam^2)(Q_prev + c)")
    return (Q_inf + c) * a * tail


def derive_stable_resnet() -> Derivation:
    dv = Derivation("stable", "Stable ResNet: ReLU NNGP and NTK with scaled blocks", PAPER)
    dv.declare(PARAMETERS)

    add = dv.adder()

    f = f_from_arccos()
    add("f_relu", f, [C], "4", "f(C) = (sqrt(1 - C^2) - C arccos C)/pi", r"f(C_{\ell-1})")
    add("mean_phi_phi_normalised", (C + f) / 2, [C], "5", "E[phi(u) phi(v)]/sqrt(Q_aa Q_bb) = (C + f(C))/2",
        r"\frac{\mathbb{E}[\phi(u) \phi(v)]}{\sqrt{Q_{\ell-1}(x, x) Q_{\ell-1}(x', x')}}")
    add("mean_dphi_dphi", dphi_mean_from_arccos(), [C], "9", "E[phi'(u) phi'(v)] = (pi - arccos C)/(2 pi)",
        r"\mathbb{E}[\phi'(u) \phi'(v)]")
    add("input_kernel", sigma_b2 + sigma_w2 * x_dot / d_in, [sigma_b2, sigma_w2, x_dot, d_in], "5",
        "Q_0(x, x') = sigma_b^2 + sigma_w^2 x.x'/d", r"Q_{0}(x, x')")
    add("psi_relu", psi_relu(), [C, root_qq, sigma_b2, sigma_w2], "5, 9",
        "Psi = sigma_b^2 + sigma_w^2 E[phi phi], C = Q_ab/sqrt(Q_aa Q_bb)", r"\Psi_{\ell-1}")
    add("nngp_update", nngp_recursion_from_expectation(), [Q_ab, lam2, Psi], "5",
        "Q_l(x, x') = Q_{l-1}(x, x') + lambda_l^2 Psi_{l-1}", r"Q_{\ell}(x, x')", "recursion")
    add("ntk_update", Theta_prev + lam2 * (Psi + Psi_d * Theta_prev), [Theta_prev, lam2, Psi, Psi_d], "9",
        "Theta_l = Theta_{l-1} + lambda_l^2 (Psi_{l-1} + Psi'_{l-1} Theta_{l-1})", r"\Theta_{\ell}(x, x')", "recursion")
    add("correlation_update_no_bias", correlation_update_no_bias(), [C, lam2, sigma_w2], "3, 5",
        "C_l from C_{l-1} when sigma_b = 0 (depth-free, no overflow)", r"C_{\ell}", "recursion")
    add("unscaled_diagonal", diagonal_solution_stable(), [q0, sigma_w2, sigma_b2, L], "Lemma 1",
        "exact Q_L(x, x) of the unscaled ResNet (exceeds float64 once L ln(1 + sigma_w^2/2) > 709.78: "
        "log_unscaled_diagonal gives its logarithm)", r"Q_{L}(x, x)")
    add("log_unscaled_diagonal", log_diagonal_stable(), [q0, sigma_w2, sigma_b2, L], "Lemma 1",
        "ln Q_L(x, x) of the unscaled ResNet, in log space: returns the logarithm because Q_L itself overflows "
        "float64 at depth (finite at L = 10^5 and beyond)", r"\ln Q_{L}(x, x)")
    add(
        "lemma1_gap",
        lemma1_gap(),
        [sigma_b2, sigma_w2],
        "Lemma 1",
        "exact Q_L minus Lemma 1's bound (negative for sigma_b > 0: the printed bound fails)",
        r"Q_{L}(x, x) - Q_{L}^{\mathrm{Lemma\,1}}",
        note="corrected",
    )
    add("lemma4_constant", lemma4_constant(), [sigma_w2], "Lemma 4",
        "lim L^2 (1 - C_L), unscaled, sigma_b = 0", r"\lim_{L \to \infty} L^{2} (1 - C_{L})")
    add("ode_diagonal", ode_diagonal_stable(), [q0, sigma_b2, sigma_w2, t], "8",
        "q_t(x, x) of the ODE limit (uniform scaling)", r"q_{t}(x, x)")
    add(
        "prop7_diagonal_gap",
        sp.expand(limit_kernel_gap()),
        [Q_inf, sigma_b2, sigma_w2, tail],
        "Prop. 7",
        "leading Q_inf - Q_L on the diagonal: (Q_inf + 2 sb/sw) (sw/2) sum_{k>L} lam_k^2",
        r"Q_{\infty}(x, x) - Q_{L}(x, x)",
    )
    add("gradient_bound_factor", sp.exp(sigma_w2 / 2 * lam_sum), [sigma_w2, lam_sum], "Prop. 1",
        "exp(sigma_w^2/2 sum_l lambda_{l,L}^2), the gradient bound up to a constant", r"B_{1}")
    dv.state(STATEMENTS)
    return dv


STATEMENTS = {
    "f_relu": r"For the ReLU, the function $f$ of eq.~(4), derived as $2 k_{1}(C) - C$ from the arc-cosine kernel, is",
    "mean_phi_phi_normalised": r"The normalised ReLU kernel of two pre-activations with correlation $C_{\ell-1}$ is",
    "mean_dphi_dphi": r"The expected product of the ReLU derivatives is the orthant probability.",
    "input_kernel": r"The input kernel is set by the input weights and biases and the inner product of the inputs.",
    "psi_relu": r"The block's kernel contribution $\Psi_{\ell-1} = \sigma_{b}^{2} + \sigma_{w}^{2} "
                r"\mathbb{E}[\phi(u) \phi(v)]$ for the ReLU is",
    "nngp_update": r"Each scaled residual block adds $\lambda_{\ell,L}^{2} \Psi_{\ell-1}$ to the NNGP kernel.",
    "ntk_update": r"The neural tangent kernel grows by the scaled block's kernel and its derivative times the "
                  r"previous tangent kernel.",
    "correlation_update_no_bias": r"Without biases the correlation obeys a depth-free recursion.",
    "unscaled_diagonal": r"Solving the unscaled diagonal recursion exactly gives, at depth $L$,",
    "log_unscaled_diagonal": r"Its logarithm, which stays finite in floating point at any depth although the "
                             r"kernel itself grows geometrically, is",
    "lemma1_gap": r"The exact kernel lies below Lemma~1's bound by $2 \sigma_{b}^{2} / \sigma_{w}^{2}$, so the "
                  r"printed bound fails whenever $\sigma_{b} > 0$.",
    "lemma4_constant": r"Without bias scaling and biases, $1 - C_{L}$ decays as $L^{-2}$ with the constant below.",
    "ode_diagonal": r"The diagonal of the continuous-depth limit (uniform scaling) is",
    "prop7_diagonal_gap": r"The leading gap between the infinite-depth and depth-$L$ kernels is proportional to the "
                          r"tail of the scaling sequence.",
    "gradient_bound_factor": r"The gradient norm is bounded, up to a constant, by the exponential of the summed "
                             r"block scales.",
}
