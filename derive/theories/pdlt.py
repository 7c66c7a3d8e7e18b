"""Roberts, Yaida & Hanin, PDLT Appendix B: residual MLPs at criticality and finite width.

The forward equation (B.3) with xi = 1 is z' = b + W sigma(z) + gamma z, b ~ N(0, C_b), W ~ N(0, C_W/n).
What is derived here rather than typed in:

* ``gaussian_derivative_identity``: d<f>_K/dK = <f (z^2 - K)>_K / (2 K^2), proved for polynomials, the
  identity that turns B.15's form of chi_parallel into gamma^2 + C_W d<sigma^2>/dK;
* ``four_point_recursion_from_forward``: the single-input four-point vertex recursion (B.26) from (B.3).
  Conditional on layer l, the n next-layer pre-activations are independent with second moment
  A + gamma^2 z_i^2, A = C_b + C_W (1/n) sum_k sigma_k^2.  Layer l enters through its leading-order
  1/n law: neurons conditionally iid N(0, K + delta), E delta = 0, E delta^2 = V/n (the single-input
  form of B.23).  Expanding to O(1/n) gives V' = n Cov(A + gamma^2 z_i^2, A + gamma^2 z_j^2), i != j;
* criticality (B.20, B.21) by solving chi_par = chi_perp = 1 with the Gaussian integrals of a
  piecewise-linear (a_+, a_-) activation, and of a smooth odd activation expanded at K = 0;
* nu(gamma) for both classes (B.29; B.35 by matching K ~ kappa/l, V ~ B/l in the deep recursion);
* r*(gamma) (B.36), its inverse gamma*(r) and the large-r asymptotics of footnote 8;
* the xi recipe (B.45) solved for xi > 0;
* the kernel and four-point vertex trajectory (B.12 with B.26) as fused depth recursions
  (``Derivation.recursions``, generated into the theory's ``generated/pdlt_recursions.py``): the Gaussian moments of a
  smooth activation are callbacks, those of the scale-invariant class are the closed forms above, inline.
"""
from __future__ import annotations

from functools import cache

import sympy as sp

from resprop.derive import activations
from resprop.derive.recursion import Recursion
from resprop.derive.results import Constraint, Derivation, Source
from resprop.derive.symbols import Parameter

PAPER = "pdlt_appB"

_E = r"\rangle_{K^{(LAYER)}}"  # a Gaussian expectation under N(0, K^(l))

#: every input of the results below, declared once (symbol, domain, LaTeX of App. B, meaning)
P_K = Parameter("K", "(0, inf)", "K", "single-input kernel K^(l)", layer=r"\ell")
P_V = Parameter("V", "real", "V", "four-point vertex V^(l)", layer=r"\ell")
P_C_W = Parameter("C_W", "(0, inf)", r"C_{W}", "rescaled weight variance", "Var W = C_W / n")
P_C_b = Parameter("C_b", "[0, inf)", r"C_{b}", "bias variance")
P_gamma = Parameter(
    "gamma", "[0, 1)", r"\gamma", "residual hyperparameter gamma", "xi = 1, z' = b + W sigma(z) + gamma z"
)
P_a_plus = Parameter("a_plus", "real", r"a_{+}", "slope for z > 0")
P_a_minus = Parameter("a_minus", "real", r"a_{-}", "slope for z < 0")
P_sigma1 = Parameter("sigma_1", "(0, inf)", r"\sigma_{1}", "sigma'(0)")
P_n_L = Parameter("n_L", "[1, inf)", r"n_{L}", "output width n_L")
P_r = Parameter("r", "(0, inf)", "r", "aspect ratio L/n")
P_nu = Parameter("nu", "(0, inf)", r"\nu", "nu(gamma)")
P_chi_par = Parameter("chi_par", "real", r"\chi_{\parallel}", "chi_parallel(K^(l))", layer=r"\ell")
P_chi_perp = Parameter("chi_perp", "real", r"\chi_{\perp}", "chi_perp(K^(l))", layer=r"\ell")
P_dK1 = Parameter("dK1", "real", r"\delta K_{[1]}", "delta K_[1]^(l)", layer=r"\ell")
P_ddK2 = Parameter("ddK2", "real", r"\delta\delta K_{[2]}", "delta delta K_[2]^(l)", layer=r"\ell")
P_h_K = Parameter("h_K", "real", "h", "h(K^(l))", layer=r"\ell")
P_mean_sigma_sq = Parameter("mean_sigma_sq", "[0, inf)", r"\langle \sigma^{2} " + _E, "<sigma^2>_K", layer=r"\ell")
P_mean_sigma_sq_z_sq = Parameter("mean_sigma_sq_z_sq", "[0, inf)", r"\langle \sigma^{2} z^{2} " + _E,
                                 "<sigma^2 z^2>_K", layer=r"\ell")
P_mean_sigma_4 = Parameter("mean_sigma_4", "[0, inf)", r"\langle \sigma^{4} " + _E, "<sigma^4>_K", layer=r"\ell")
P_mean_dsigma_sq = Parameter("mean_dsigma_sq", "[0, inf)", r"\langle \sigma'^{2} " + _E, "<sigma'^2>_K",
                             layer=r"\ell")
P_mean_dsigma_sq_z_sq = Parameter("mean_dsigma_sq_z_sq", "[0, inf)", r"\langle \sigma'^{2} z^{2} " + _E,
                                  "<sigma'^2 z^2>_K", layer=r"\ell")
P_G_RR = Parameter("G_RR", "(0, inf)", r"G_{RR}", "measured block-block correlator (B.42)")
P_G_Rz = Parameter("G_Rz", "real", r"G_{Rz}", "measured block-input cross correlator (B.43)")
P_G_zz = Parameter("G_zz", "(0, inf)", r"G_{zz}", "measured input correlator (B.42)")
PARAMETERS = (P_K, P_V, P_C_W, P_C_b, P_gamma, P_a_plus, P_a_minus, P_sigma1, P_n_L, P_r, P_nu, P_chi_par,
              P_chi_perp, P_dK1, P_ddK2, P_h_K, P_mean_sigma_sq, P_mean_sigma_sq_z_sq, P_mean_sigma_4,
              P_mean_dsigma_sq, P_mean_dsigma_sq_z_sq, P_G_RR, P_G_Rz, P_G_zz)

(
    K,
    V,
    C_W,
    C_b,
    gamma,
    a_plus,
    a_minus,
    sigma1,
    n_L,
    r,
    nu,
    chi_par,
    chi_perp,
    dK1,
    ddK2,
    h_K,
    mean_sigma_sq,
    mean_sigma_sq_z_sq,
    mean_sigma_4,
    mean_dsigma_sq,
    mean_dsigma_sq_z_sq,
    G_RR,
    G_Rz,
    G_zz,
) = (p.symbol for p in PARAMETERS)
a1 = sp.Symbol("a_1", negative=True)

_z = sp.Symbol("z", real=True)
_delta = sp.Symbol("delta", real=True)
_eps = sp.Symbol("epsilon", positive=True)  # 1/n
_ell = sp.Symbol("ell", positive=True)
_u = sp.Symbol("u", positive=True)  # 1 - gamma^2

def _gauss_moment(p: int, kk: sp.Expr = K) -> sp.Expr:
    """E z^p for z ~ N(0, kk)."""
    return sp.Integer(0) if p % 2 else sp.factorial2(p - 1) * kk ** sp.Rational(p, 2)


def _gauss_mean_poly(f: sp.Expr, kk: sp.Expr = K) -> sp.Expr:
    poly = sp.Poly(sp.expand(f), _z)
    return sp.expand(sum(coef * _gauss_moment(m[0], kk) for m, coef in poly.terms()))


def gaussian_derivative_identity(degree: int = 8) -> sp.Expr:
    """Residual of d<f>/dK - <f (z^2 - K)>/(2K^2) for the general polynomial of the given degree (0 if true)."""
    coeffs = sp.symbols(f"f0:{degree + 1}")
    f = sum(cf * _z**i for i, cf in enumerate(coeffs))
    lhs = sp.diff(_gauss_mean_poly(f), K)
    rhs = _gauss_mean_poly(f * (_z**2 - K)) / (2 * K**2)
    return sp.simplify(lhs - rhs)


# --------------------------------------------------------------------------- B.12, B.15-B.18
def kernel_recursion() -> sp.Expr:
    """B.11-B.12: the leading-order second moment of z' = b + W sigma(z) + gamma z."""
    return C_b + C_W * mean_sigma_sq + gamma**2 * K


def chi_parallel() -> sp.Expr:
    """B.15: gamma^2 + C_W <sigma^2 (z^2 - K)>/(2K^2) = gamma^2 + C_W d<sigma^2>/dK."""
    return gamma**2 + C_W * (mean_sigma_sq_z_sq - K * mean_sigma_sq) / (2 * K**2)


def chi_perpendicular() -> sp.Expr:
    """B.16."""
    return gamma**2 + C_W * mean_dsigma_sq


def h_function() -> sp.Expr:
    """B.18: h = (1/2) d chi_perp/dK = (C_W/2) <sigma'^2 (z^2 - K)>/(2K^2)."""
    return C_W * (mean_dsigma_sq_z_sq - K * mean_dsigma_sq) / (4 * K**2)


# --------------------------------------------------------------------------- B.26 from B.3
@cache
def four_point_recursion_from_forward() -> tuple[sp.Expr, sp.Expr]:
    """(K', V') to leading order from the forward equation (B.3); see the module docstring.

    g(K), q(K) = <sigma^2 z^2>, f(K) = <sigma^4> are undefined functions, Taylor-expanded in delta.
    Returns expressions in mean_sigma_sq, mean_sigma_sq_z_sq, mean_sigma_4, the derivative g'(K)
    eliminated by ``gaussian_derivative_identity``.
    """
    g, q, f = (sp.Function(name) for name in ("g", "q", "f"))
    kd = K + _delta
    n_inv = _eps

    def taylor(fn):
        return fn(K) + sp.diff(fn(K), K) * _delta + sp.diff(fn(K), K, 2) * _delta**2 / 2

    gd, qd, fd = taylor(g), taylor(q), taylor(f)
    # conditional moments given delta (neurons iid N(0, K + delta)), i != j
    e_A = C_b + C_W * gd
    e_A2 = (C_b + C_W * gd) ** 2 + C_W**2 * n_inv * (fd - gd**2)
    e_A_zi2 = C_b * kd + C_W * (n_inv * qd + (1 - n_inv) * gd * kd)
    e_zi2_zj2 = kd**2
    second = e_A2 + 2 * gamma**2 * e_A_zi2 + gamma**4 * e_zi2_zj2
    first = e_A + gamma**2 * kd

    def average(expr):  # E delta = 0, E delta^2 = V/n, higher moments O(1/n^2)
        poly = sp.Poly(sp.expand(expr), _delta)
        out = sum(coef * {0: 1, 2: V * n_inv}.get(m[0], 0) for m, coef in poly.terms())
        return sp.expand(out)

    cov = sp.expand(average(second) - average(first) ** 2)
    v_next = sp.expand(sp.series(cov, _eps, 0, 2).removeO() / _eps)
    k_next = average(first).subs(_eps, 0)
    # identify <sigma^2>, <sigma^2 z^2>, <sigma^4> and g' = (q - K g)/(2 K^2)
    subs = {sp.Derivative(g(K), K): (q(K) - K * g(K)) / (2 * K**2)}
    v_next = v_next.subs(subs)
    names = {g(K): mean_sigma_sq, q(K): mean_sigma_sq_z_sq, f(K): mean_sigma_4}
    v_next = sp.simplify(v_next.subs(names))
    k_next = sp.simplify(k_next.subs(names))
    return k_next, v_next


def four_point_recursion_paper() -> sp.Expr:
    """B.26 as printed, with chi_par = B.15."""
    chi = chi_parallel()
    return C_W**2 * (mean_sigma_4 - mean_sigma_sq**2) + chi**2 * V + 4 * gamma**2 * (chi - gamma**2) * K**2


def four_point_update() -> sp.Expr:
    """B.26 in terms of a given chi_par (the form the numeric driver iterates), checked against the derivation."""
    expr = C_W**2 * (mean_sigma_4 - mean_sigma_sq**2) + chi_par**2 * V + 4 * gamma**2 * (chi_par - gamma**2) * K**2
    derived = four_point_recursion_from_forward()[1]
    if sp.simplify(expr.subs(chi_par, chi_parallel()) - derived) != 0:
        raise ArithmeticError("B.26 does not follow from the forward equation")
    return expr


# --------------------------------------------------------------------------- scale-invariant class
def scale_invariant_moments() -> dict[str, sp.Expr]:
    """<sigma^2>, <sigma^4>, <sigma^2 z^2>, <sigma'^2> for sigma = a_+ z (z > 0), a_- z (z < 0), z ~ N(0, K): the
    symbolic expectations of `resprop.derive.expectation` resolved for the activation a_+ max(x, 0) + a_- min(x, 0)
    (exact integration of the two pieces)."""
    from resprop.derive.activations import x
    from resprop.derive.expectation import mean as gaussian_mean
    from resprop.derive.expectation import phi, resolve, z

    sigma = a_plus * sp.Max(x, 0) + a_minus * sp.Min(x, 0)
    return {
        "sigma_sq": resolve(gaussian_mean(phi(z) ** 2, K), sigma),
        "sigma_4": resolve(gaussian_mean(phi(z) ** 4, K), sigma),
        "sigma_sq_z_sq": resolve(gaussian_mean(phi(z) ** 2 * z ** 2, K), sigma),
        "dsigma_sq": resolve(gaussian_mean(sp.diff(phi(z), z) ** 2, K), sigma),
    }


def _scale_invariant_subs() -> dict:
    m = scale_invariant_moments()
    return {mean_sigma_sq: m["sigma_sq"], mean_sigma_4: m["sigma_4"], mean_sigma_sq_z_sq: m["sigma_sq_z_sq"],
            mean_dsigma_sq: m["dsigma_sq"]}


@cache
def criticality_scale_invariant() -> dict[sp.Symbol, sp.Expr]:
    """B.20: C_b = 0 (the kernel is a fixed point) and chi_par = chi_perp = 1."""
    s = _scale_invariant_subs()
    chi_p = sp.simplify(chi_parallel().subs(s))
    chi_t = sp.simplify(chi_perpendicular().subs(s))
    if sp.simplify(chi_p - chi_t) != 0:
        raise ArithmeticError("chi_par != chi_perp for a scale-invariant activation")
    cw = sp.solve(sp.Eq(chi_p, 1), C_W)[0]
    cb = sp.solve(sp.Eq(kernel_recursion().subs(s).subs(C_W, cw), K), C_b)[0]
    return {C_W: sp.simplify(cw), C_b: sp.simplify(cb)}


def nu_scale_invariant() -> sp.Expr:
    """B.28-B.29: at criticality K is fixed and V grows by a constant times K^2 per layer."""
    s = _scale_invariant_subs()
    crit = criticality_scale_invariant()
    v_next = four_point_recursion_from_forward()[1].subs(s).subs(crit)
    increment = sp.simplify(v_next - V)
    if increment.has(V):
        raise ArithmeticError("V recursion at criticality is not additive")
    return sp.factor(sp.simplify(increment / K**2))


def nu_scale_invariant_paper() -> sp.Expr:
    A2 = (a_plus**2 + a_minus**2) / 2
    A4 = (a_plus**4 + a_minus**4) / 2
    return (1 - gamma**2) * ((1 - gamma**2) * (3 * A4 / A2**2 - 1) + 4 * gamma**2)


# --------------------------------------------------------------------------- K* = 0 class
def odd_activation_series(expr: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """(sigma_1, a_1) of a smooth odd activation: sigma = sigma_1 z + sigma_3 z^3/6 + ..., a_1 = sigma_3/sigma_1."""
    x = activations.x
    ser = sp.series(expr, x, 0, 5).removeO()
    s0 = ser.coeff(x, 0)
    s1 = ser.coeff(x, 1)
    s3 = 6 * ser.coeff(x, 3)
    if sp.simplify(s0) != 0 or sp.simplify(ser.coeff(x, 2)) != 0:
        raise ValueError(f"activation: {expr} is not odd at the origin (sigma(0) = 0, sigma''(0) = 0 needed)")
    return sp.simplify(s1), sp.simplify(s3 / s1)


def k0_class_expansions() -> dict[str, sp.Expr]:
    """g(K) = sigma_1^2 (K + a_1 K^2) (B.30) and <sigma^4> - <sigma^2>^2 = sigma_1^4 (2K^2 + O(K^3)) (B.34)."""
    s3 = sp.Symbol("s3")
    sig = sigma1 * _z + s3 * _z**3 / 6
    g = sp.series(_gauss_mean_poly(sig**2), K, 0, 3).removeO()
    q = sp.series(_gauss_mean_poly(sig**2 * _z**2), K, 0, 4).removeO()
    f4 = sp.series(_gauss_mean_poly(sig**4), K, 0, 3).removeO()
    sub = {s3: a1 * sigma1}
    return {"sigma_sq": sp.expand(g.subs(sub)), "sigma_sq_z_sq": sp.expand(q.subs(sub)),
            "sigma_4": sp.expand(f4.subs(sub)), "dsigma_sq_at_0": sigma1**2}


def criticality_k0() -> dict[sp.Symbol, sp.Expr]:
    """B.21: chi_perp(K = 0) = gamma^2 + C_W sigma_1^2 = 1, C_b = 0 so that K* = 0 is a fixed point."""
    cw = sp.solve(sp.Eq(gamma**2 + C_W * sigma1**2, 1), C_W)[0]
    return {C_W: sp.simplify(cw), C_b: sp.Integer(0)}


@cache
def nu_k0() -> sp.Expr:
    """B.35 by matching the deep asymptotics K = kappa/l, V = B/l of the recursions at criticality."""
    e = k0_class_expansions()
    crit = criticality_k0()
    kappa, B = sp.symbols("kappa B", positive=True)
    k_next, v_next = four_point_recursion_from_forward()
    subs = {mean_sigma_sq: e["sigma_sq"], mean_sigma_sq_z_sq: e["sigma_sq_z_sq"], mean_sigma_4: e["sigma_4"]}
    k_next = k_next.subs(subs).subs(crit)
    v_next = v_next.subs(subs).subs(crit)
    t = sp.Symbol("t", positive=True)  # 1/l
    K_l, V_l = kappa * t, B * t
    K_l1, V_l1 = kappa * t / (1 + t), B * t / (1 + t)
    eq_k = sp.series((k_next.subs({K: K_l}) - K_l1), t, 0, 3).removeO().coeff(t, 2)
    kap = sp.solve(eq_k, kappa)
    kap = [s for s in kap if s != 0][0]
    eq_v = sp.series((v_next.subs({K: K_l, V: V_l}) - V_l1), t, 0, 3).removeO().coeff(t, 2)
    b_sol = sp.solve(eq_v.subs(kappa, kap), B)[0]
    return sp.factor(sp.simplify(b_sol / kap**2))  # V/K^2 = (B/l)/(kappa^2/l^2) = (B/kappa^2) l


# --------------------------------------------------------------------------- B.36, gamma*(r), footnote 8
def r_star() -> sp.Expr:
    """B.36."""
    return 4 / ((20 + 3 * n_L) * nu)


def _gamma_star(nu_of_u: sp.Expr) -> sp.Expr:
    """Solve nu(u) = 4/((20 + 3 n_L) r) for u = 1 - gamma^2 on the branch with u -> 0 as r -> oo.

    The branch is picked at a probe point (ReLU and linear slopes, n_L = 1, r = 100): it must be small
    and positive there; the tests check it on the whole range.
    """
    target = 4 / ((20 + 3 * n_L) * r)
    roots = sp.solve(sp.Eq(nu_of_u, target), _u)
    for probe_slopes in ({a_plus: 1, a_minus: 0}, {a_plus: 1, a_minus: 1}):
        probe = {n_L: 1, r: 100, **probe_slopes}
        roots = [u for u in roots if 0 < complex(u.subs(probe).evalf()).real < 0.1
                 and abs(complex(u.subs(probe).evalf()).imag) < 1e-12]
    if len(roots) != 1:
        raise ArithmeticError(f"no unique branch of gamma*(r) with 1 - gamma^2 -> 0: {roots}")
    return sp.sqrt(1 - roots[0])


def gamma_star_scale_invariant() -> sp.Expr:
    """gamma*(r) for the scale-invariant class.

    nu(u) = (Q - 5) u^2 + 4 u with u = 1 - gamma^2 and Q = 3 A_4/A_2^2, so the branch vanishing at large r
    is u = t / (2 + sqrt(4 + (Q - 5) t)), t = 4/((20 + 3 n_L) r): the rationalised root, finite at Q = 5
    where the quadratic formula divides by zero.  It is checked to solve nu(u) = t exactly and to agree
    with SymPy's root of the quadratic.
    """
    A2 = (a_plus**2 + a_minus**2) / 2
    A4 = (a_plus**4 + a_minus**4) / 2
    Q, t = sp.symbols("Q t", positive=True)
    nu_u = sp.expand(nu_scale_invariant_paper().subs(gamma, sp.sqrt(1 - _u)))
    if sp.simplify(nu_u - ((Q - 5) * _u**2 + 4 * _u).subs(Q, 3 * A4 / A2**2)) != 0:
        raise ArithmeticError("nu(u) is not (Q - 5) u^2 + 4 u")
    u_t = t / (2 + sp.sqrt(4 + (Q - 5) * t))
    if sp.simplify(sp.radsimp((Q - 5) * u_t**2 + 4 * u_t - t)) != 0:
        raise ArithmeticError("rationalised root does not solve (Q - 5) u^2 + 4 u = t")
    quad_root = (-4 + sp.sqrt(16 + 4 * (Q - 5) * t)) / (2 * (Q - 5))  # the branch -> 0 as t -> 0
    for probe in ({Q: 6, t: sp.Rational(1, 7)}, {Q: 3, t: sp.Rational(2, 9)}, {Q: sp.Rational(41, 5), t: 1}):
        if abs(sp.N((u_t - quad_root).subs(probe), 30)) > 1e-25:
            raise ArithmeticError("rationalised root is not the vanishing branch of the quadratic")
    u = u_t.subs({Q: 3 * A4 / A2**2, t: 4 / ((20 + 3 * n_L) * r)})
    return sp.sqrt(1 - u)


def gamma_star_k0() -> sp.Expr:
    nu_u = nu_k0().subs(gamma, sp.sqrt(1 - _u))
    return sp.simplify(_gamma_star(sp.expand(nu_u)))


def footnote8_asymptotics(gamma_star: sp.Expr) -> sp.Expr:
    """Leading large-r form of 1 - gamma*(r)^2 (footnote 8: ~ 1/r)."""
    one_minus = sp.simplify(1 - gamma_star**2)
    return sp.simplify(sp.limit(one_minus * r, r, sp.oo) / r)


# --------------------------------------------------------------------------- B.45
def xi_recipe() -> sp.Expr:
    """B.44-B.45: (1 - gamma^2) G_zz = xi^2 G_RR + 2 gamma xi G_Rz, the root that is positive."""
    xi = sp.Symbol("xi", real=True)
    roots = sp.solve(sp.Eq((1 - gamma**2) * G_zz, xi**2 * G_RR + 2 * gamma * xi * G_Rz), xi)
    probe = {gamma: sp.Rational(1, 2), G_RR: 1, G_Rz: sp.Rational(1, 5), G_zz: 1}
    (positive,) = [x for x in roots if x.subs(probe) > 0]
    return sp.simplify(positive)


# --------------------------------------------------------------------------- B.12 + B.26 as depth recursions
MOMENT_CALLBACKS = ("mean_sigma_sq", "mean_sigma_sq_z_sq", "mean_sigma_4")


def vertex_recursions() -> list[Recursion]:
    """The single-input kernel (B.12) and four-point vertex (B.26) iterated together, state (K, V), with the
    per-layer sequences gamma, C_W, C_b and chi_par (B.15) of the previous layer's K as an intermediate.

    ``kernel_vertex``: <sigma^2>_K, <sigma^2 z^2>_K and <sigma^4>_K are callbacks f(l, K, out) (a quadrature
    for tanh, erf).  ``kernel_vertex_scale_invariant``: the closed-form moments of the (a_+, a_-) class
    (:func:`scale_invariant_moments`), with the slopes as two more per-layer sequences."""
    k_next = four_point_recursion_from_forward()[0]
    v_next = four_point_update()
    chi = chi_parallel()
    src = Source(PAPER, "B.12, B.15, B.26", "derived from the forward equation B.3")
    seqs = (gamma, C_W, C_b)
    domain = ("K > 0, V real: arrays (shape (1,) for one input); gamma in [0, 1), C_W > 0, C_b >= 0: (L,) arrays, "
              "one entry per layer")
    f = {name: sp.Function(name)(K) for name in MOMENT_CALLBACKS}
    moments = {mean_sigma_sq: f["mean_sigma_sq"], mean_sigma_sq_z_sq: f["mean_sigma_sq_z_sq"],
               mean_sigma_4: f["mean_sigma_4"]}
    si = _scale_invariant_subs()
    return [
        Recursion("kernel_vertex", "K^(l) and V^(l) of the residual MLP, Gaussian moments by callbacks", src,
                  ((K, k_next.subs(moments)), (V, v_next.subs(moments))), sequences=seqs,
                  callbacks=MOMENT_CALLBACKS, definitions=((chi_par, chi.subs(moments)),), domain=domain),
        Recursion("kernel_vertex_scale_invariant",
                  "K^(l) and V^(l) of the residual MLP with a scale-invariant activation (slopes a_+, a_-)", src,
                  ((K, k_next.subs(si)), (V, v_next.subs(si))), sequences=(*seqs, a_plus, a_minus),
                  definitions=((chi_par, sp.simplify(chi.subs(si))),),
                  domain=domain + "; a_plus, a_minus: (L,) arrays of the slopes"),
    ]


# --------------------------------------------------------------------------- registry
def derive_residual_mlp() -> Derivation:
    dv = Derivation("pdlt", "Residual MLPs at criticality (PDLT App. B)", PAPER)
    dv.declare(PARAMETERS)

    add = dv.adder()
    slopes = [Constraint(sp.Gt(a_plus**2 + a_minus**2, 0), "a_plus^2 + a_minus^2 > 0 (a nonzero activation)")]
    nu0_si = sp.factor(
        nu_scale_invariant().subs(gamma, 0)
    )  # nu(0); gamma* exists for r >= r*(0) = 4/((20 + 3 n_L) nu(0))
    exists_si = [*slopes, Constraint(sp.Ge(r * (20 + 3 * n_L) * sp.numer(nu0_si), 4 * sp.denom(nu0_si)),
                                     "r >= r*(0) = 4/((20 + 3 n_L) nu(0)) (no gamma* in [0, 1) below it)")]
    exists_k0 = [Constraint(sp.Ge(r * (20 + 3 * n_L) * nu_k0().subs(gamma, 0), 4),
                            "r >= r*(0) = 6/(20 + 3 n_L) (no gamma* in [0, 1) below it)")]

    crit_si = criticality_scale_invariant()
    crit_k0 = criticality_k0()
    g_si = gamma_star_scale_invariant()
    g_k0 = gamma_star_k0()
    nxt = r"\ell+1"
    add("kernel_update", four_point_recursion_from_forward()[0], [C_b, C_W, mean_sigma_sq, gamma, K], "B.12",
        "K^(l+1) = C_b + C_W <sigma^2>_K + gamma^2 K", P_K.tex(nxt), "recursion",
        statement=r"The single-input kernel of a residual MLP obeys, at leading order in $1/n$, the layer-to-layer "
                  r"recursion below, derived from the forward equation (B.3).")
    add("chi_parallel", chi_parallel(), [gamma, C_W, mean_sigma_sq_z_sq, K, mean_sigma_sq], "B.15",
        "chi_par = gamma^2 + C_W <sigma^2 (z^2 - K)>/(2K^2)", P_chi_par.tex(),
        statement=r"The parallel susceptibility, shifted by the residual path, is $\gamma^{2}$ plus $C_{W}$ times "
                  r"the derivative of $\langle \sigma^{2} \rangle_{K}$ with respect to $K$, written as a Gaussian "
                  r"expectation.")
    add("chi_perpendicular", chi_perpendicular(), [gamma, C_W, mean_dsigma_sq], "B.16",
        "chi_perp = gamma^2 + C_W <sigma'^2>", P_chi_perp.tex(),
        statement=r"The perpendicular susceptibility is $\gamma^{2}$ plus $C_{W}$ times the mean squared "
                  r"derivative of the activation.")
    add("h_function", h_function(), [C_W, mean_dsigma_sq_z_sq, K, mean_dsigma_sq], "B.18",
        "h(K) = (1/2) d chi_perp / dK", P_h_K.tex(),
        statement=r"The coupling $h$ of the second-order perturbation is half the derivative of "
                  r"$\chi_{\perp}$ with respect to the kernel.")
    add("delta_K1_update", chi_par * dK1, [chi_par, dK1], "B.13", "delta K_[1]^(l+1) = chi_par delta K_[1]^(l)",
        P_dK1.tex(nxt), "recursion",
        statement=r"The first-order perturbation of the kernel is multiplied in each layer by the parallel "
                  r"susceptibility.")
    add("delta_K2_update", chi_perp * ddK2 + h_K * dK1**2, [chi_perp, ddK2, h_K, dK1], "B.14",
        "delta delta K_[2]^(l+1) = chi_perp delta delta K_[2] + h (delta K_[1])^2", P_ddK2.tex(nxt), "recursion",
        statement=r"The second-order perturbation is multiplied by the perpendicular susceptibility and sourced "
                  r"by $h$ times the square of the first-order perturbation.")
    add("four_point_update", four_point_update(), [V, K, C_W, gamma, chi_par, mean_sigma_4, mean_sigma_sq], "B.26",
        "V^(l+1), derived from the forward equation B.3", P_V.tex(nxt), "recursion",
        statement=r"The four-point vertex, the $1/n$ correction to the kernel's fluctuations, obeys the recursion "
                  r"below, derived here from the forward equation (B.3).")
    add("critical_C_W_scale_invariant", crit_si[C_W], [gamma, a_plus, a_minus], "B.20",
        "C_W(gamma) = (1 - gamma^2)/A_2, C_b = 0", r"C_{W}", constraints=slopes,
        statement=r"For a scale-invariant activation with slopes $a_{+}$ and $a_{-}$, criticality "
                  r"($\chi_{\parallel} = \chi_{\perp} = 1$, $C_{b} = 0$) fixes the weight variance.")
    add("critical_C_W_k0", crit_k0[C_W], [gamma, sigma1], "B.21", "C_W(gamma) = (1 - gamma^2)/sigma_1^2, C_b = 0",
        r"C_{W}",
        statement=r"For the $K^{\star} = 0$ universality class, criticality ($\chi_{\perp}(0) = 1$, $C_{b} = 0$) "
                  r"fixes the weight variance.")
    add("nu_scale_invariant", nu_scale_invariant(), [gamma, a_plus, a_minus], "B.29",
        "nu(gamma) of the scale-invariant class, V^(L)/(n K^2) = nu L/n", r"\nu", constraints=slopes,
        statement=r"At criticality the normalised four-point vertex of the scale-invariant class grows as "
                  r"$V^{(L)}/(n K^{2}) = \nu L/n$ with the coefficient below.")
    add("nu_k0", nu_k0(), [gamma], "B.35", "nu(gamma) of the K* = 0 class", r"\nu",
        statement=r"For the $K^{\star} = 0$ class, matching $K \sim \kappa/\ell$ and $V \sim B/\ell$ in the deep "
                  r"recursions gives the growth coefficient of the four-point vertex.")
    add("r_star", r_star(), [nu, n_L], "B.36", "optimal aspect ratio r* = 4/((20 + 3 n_L) nu)", r"r^{\star}",
        statement=r"The aspect ratio $L/n$ that balances depth against finite-width fluctuations is inversely "
                  r"proportional to $\nu$.")
    add("gamma_star_scale_invariant", g_si, [r, n_L, a_plus, a_minus], "B.36",
        "gamma*(r), inverse of r*(gamma), scale-invariant class (valid for r > r*(0))", r"\gamma^{\star}",
        constraints=exists_si,
        statement=r"Inverting $r^{\star}(\gamma)$ for the scale-invariant class gives the optimal residual "
                  r"strength at an aspect ratio $r > r^{\star}(0)$.")
    add("gamma_star_k0", g_k0, [r, n_L], "B.36", "gamma*(r), K* = 0 class (valid for r > r*(0))", r"\gamma^{\star}",
        constraints=exists_k0,
        statement=r"For the $K^{\star} = 0$ class the optimal residual strength at an aspect ratio "
                  r"$r > r^{\star}(0)$ is the root below.")
    add("one_minus_gamma_star_sq_asymptotic_scale_invariant", footnote8_asymptotics(g_si), [r, n_L, a_plus, a_minus],
        "fn. 8", "1 - gamma*(r)^2 at large r, scale-invariant class", r"1 - \left(\gamma^{\star}\right)^{2}",
        statement=r"At large aspect ratio the weight $1 - (\gamma^{\star})^{2}$ of the residual branch of the "
                  r"scale-invariant class vanishes as $1/r$.")
    add("one_minus_gamma_star_sq_asymptotic_k0", footnote8_asymptotics(g_k0), [r, n_L], "fn. 8",
        "1 - gamma*(r)^2 at large r, K* = 0 class", r"1 - \left(\gamma^{\star}\right)^{2}",
        statement=r"At large aspect ratio the weight $1 - (\gamma^{\star})^{2}$ of the residual branch of the "
                  r"$K^{\star} = 0$ class vanishes as $1/r$.")
    add("xi_recipe", xi_recipe(), [gamma, G_RR, G_Rz, G_zz], "B.45",
        "xi solving (1 - gamma^2) G_zz = xi^2 G_RR + 2 gamma xi G_Rz", r"\xi",
        statement=r"The block scale $\xi$ that preserves the measured correlators, "
                  r"$(1 - \gamma^{2}) G_{zz} = \xi^{2} G_{RR} + 2 \gamma \xi G_{Rz}$, is the positive root.")
    for name in ("tanh", "erf"):
        s1, aa = odd_activation_series(activations.activation_expr(name))
        fn = r"\tanh" if name == "tanh" else r"\operatorname{erf}"
        add(f"sigma1_{name}", s1, [], "B.21", f"sigma'(0) for {name}", r"\sigma_{1}",
            statement=rf"For $\sigma = {fn}$ the slope at the origin is $\sigma_{{1}} = \sigma'(0)$.")
        add(
            f"a1_{name}",
            aa,
            [],
            "B.30",
            f"a_1 = sigma'''(0)/sigma'(0) for {name}, so that g(K) = sigma_1^2 (K + a_1 K^2 + ...)",
            r"a_{1}",
            statement=rf"For $\sigma = {fn}$ the curvature coefficient $a_{{1}} = \sigma'''(0)/\sigma'(0)$ makes "
            rf"$\langle \sigma^{{2}} \rangle_{{K}} = \sigma_{{1}}^{{2}} (K + a_{{1}} K^{{2}} + \dots)$.",
        )
    dv.recursions = vertex_recursions()
    return dv
