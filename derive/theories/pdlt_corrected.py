"""The O(1/n) fluctuation of ||z^(d)||^2/n in a residual MLP, derived from the forward equation (PDLT App. B, B.3).

Setting: z^(l+1) = gamma z^(l) + W^(l) phi(z^(l)), W^(l)_ij ~ N(0, C_W/n) fresh in each layer, C_b = 0, a single
input.  The quantity is R(d) = lim_n n Var[Y]/E[Y]^2, Y = ||z^(d)||^2/n.  What is derived here (not typed in):

* the exact reduction: given layer l, W^(l) phi(z^(l)) is N(0, sigma_l^2 I) with sigma_l^2 = C_W (1/n)
  sum_j phi(z^(l)_j)^2, so z^(l+1)_i = gamma z^(l)_i + sigma_l xi_i: every neuron keeps its identity along the
  skip path, and at infinite width its trajectory is a Gaussian AR(1) chain, Cov(z_k, z_m) = gamma^(m-k) K_k;
* ``influence_recursion``: the influence P_l of one neuron on the conditional kernel, by expanding the kernel
  recursion to first order in the fluctuations: P_(l+1) = chi_l P_l + C_W (phi(z_l)^2 - Phi_l), chi_l = B.15;
* ``second_moment_recursions``: the delta method, n Var Y = E[psi^2] with psi = (z_d^2 - K_d) + P_d; its
  second moments Q = E[P (z^2 - K)], V_P = E[P^2] obey closed recursions except for E_P = E[P (phi^2 - Phi)], the
  same-neuron cross-layer covariance of phi^2;
* ``hermite_channels``: E_P in the Hermite basis of z_l/sqrt(K_l) (Mehler: E[He_n(a x + b xi)] = a^n He_n(x)
  for a^2 + b^2 = 1) is sum_n c_n h_n with c_(l+1,n) = rho_l^n (chi_l c_(l,n) + C_W h_(l,n)), rho_l =
  gamma sqrt(K_l/K_(l+1)); the channel n = 2 is Q/(sqrt 2 K) and contributes Phi' Q;
* ``corrected_vertex``: V_c = 2 Q + V_P obeys B.26 plus the source 2 chi C_W Delta, Delta = sum_(n != 0, 2)
  c_n h_n, and R = 2 + V_c/K^2.  So B.26 is the same quadratic form with Cov(phi(z_k)^2, phi(z_m)^2), k != m,
  replaced by its second Hermite component 2 rho^2 K_k K_m Phi'_k Phi'_m (:func:`b26_quadratic_form_check`);
* limits: gamma = 0 gives the vanilla-MLP recursion, d = 1 gives B.26, the K* = 0 class keeps nu (B.35);
* the scale-invariant class: the bivariate moment E[phi(u)^2 phi(v)^2] by integrating over the wedge in polar
  coordinates (the degree-2 arc-cosine kernel), the excess D(rho) over the rho^2 part, and at criticality
  R(d) = 2 + d nu_B29 + 2 C_W^2 sum_(t=1)^(d-1) (d - t) D(gamma^t) as a fused recursion.
"""
from __future__ import annotations

from functools import cache

import sympy as sp

from resprop.derive.recursion import Recursion
from resprop.derive.results import Constraint, Derivation, Source
from resprop.derive.symbols import Parameter
from resprop.derive.theories import pdlt as B

PAPER = "pdlt_appB"

_E = r"\rangle_{K^{(LAYER)}}"

P_K = Parameter("K", "(0, inf)", "K", "single-input kernel K^(l)", layer=r"\ell")
P_K_next = Parameter("K_next", "(0, inf)", "K", "single-input kernel K^(l+1) of the next layer", layer=r"\ell+1")
P_C_W = Parameter("C_W", "(0, inf)", r"C_{W}", "rescaled weight variance", "Var W = C_W / n")
P_gamma = Parameter("gamma", "[0, 1)", r"\gamma", "residual hyperparameter gamma", "z' = gamma z + W sigma(z)")
P_chi = Parameter("chi_par", "real", r"\chi_{\parallel}", "chi_parallel(K^(l)) of B.15", layer=r"\ell")
P_P = Parameter("P", "real", "P", "influence P_l of one neuron on the conditional kernel", layer=r"\ell")
P_X = Parameter("X", "real", "X", "phi(z_l)^2 - <phi^2>_K of the same neuron", layer=r"\ell")
P_Q = Parameter("Q", "real", "Q", "E[P_l (z_l^2 - K_l)]", layer=r"\ell")
P_V_P = Parameter("V_P", "real", "V_{P}", "E[P_l^2]", layer=r"\ell")
P_E_P = Parameter("E_P", "real", "E_{P}", "E[P_l (phi(z_l)^2 - <phi^2>_K)]", layer=r"\ell")
P_V = Parameter("V", "real", r"V_{c}", "corrected four-point vertex 2 Q + V_P", layer=r"\ell")
P_Delta = Parameter("Delta", "real", r"\Delta", "non-second-Hermite part of the cross-layer covariance source",
                    layer=r"\ell")
P_mean_sigma_sq = Parameter("mean_sigma_sq", "[0, inf)", r"\langle \sigma^{2} " + _E, "<sigma^2>_K", layer=r"\ell")
P_mean_sigma_sq_z_sq = Parameter("mean_sigma_sq_z_sq", "[0, inf)", r"\langle \sigma^{2} z^{2} " + _E,
                                 "<sigma^2 z^2>_K", layer=r"\ell")
P_mean_sigma_4 = Parameter("mean_sigma_4", "[0, inf)", r"\langle \sigma^{4} " + _E, "<sigma^4>_K", layer=r"\ell")
P_rho = Parameter("rho", "[-1, 1]", r"\rho", "correlation of a neuron's pre-activations at two layers")
P_corr = Parameter("corr", "[0, 1]", r"\rho", "correlation of a neuron's pre-activations at consecutive layers",
                   layer=r"\ell")
P_c = Parameter("c", "real", "c", "Hermite channel E[P_l He_n(z_l/sqrt K_l)]/sqrt(n!)", layer=r"\ell")
P_h = Parameter("h", "real", "h", "Hermite coefficient E[(phi(z_l)^2 - <phi^2>) He_n(z_l/sqrt K_l)]/sqrt(n!)",
                layer=r"\ell")
P_n = Parameter("n", "[0, inf)", "n", "Hermite channel index", integer=True)
P_a_plus = Parameter("a_plus", "real", r"a_{+}", "slope for z > 0")
P_a_minus = Parameter("a_minus", "real", r"a_{-}", "slope for z < 0")
P_S = Parameter("S", "real", "S", "sum_(t=1)^l D(gamma^t)", layer=r"\ell")
P_g = Parameter("g", "[0, 1]", "g", "gamma^l", layer=r"\ell")
PARAMETERS = (P_K, P_K_next, P_C_W, P_gamma, P_chi, P_P, P_X, P_Q, P_V_P, P_E_P, P_V, P_Delta, P_mean_sigma_sq,
              P_mean_sigma_sq_z_sq, P_mean_sigma_4, P_rho, P_corr, P_c, P_h, P_n, P_a_plus, P_a_minus, P_S, P_g)
(K, K_next, C_W, gamma, chi_par, P, X, Q, V_P, E_P, V, Delta, mean_sigma_sq, mean_sigma_sq_z_sq, mean_sigma_4, rho,
 corr, c, h, n, a_plus, a_minus, S, g) = (p.symbol for p in PARAMETERS)

_z, _xi, _f, _eps = sp.symbols("z xi f epsilon", real=True)  # z_l, the fresh noise, phi(z_l)^2, n^(-1/2)
_x = sp.Symbol("x", real=True)
_alpha, _theta = sp.symbols("alpha theta", real=True)
_r = sp.Symbol("r", positive=True)


def dPhi() -> sp.Expr:
    """Phi'(K) = d<phi^2>_K/dK = (<phi^2 z^2> - K <phi^2>)/(2 K^2) (the Gaussian derivative identity,
    proved in ``pdlt.gaussian_derivative_identity``)."""
    return (mean_sigma_sq_z_sq - K * mean_sigma_sq) / (2 * K**2)


def chi() -> sp.Expr:
    return B.chi_parallel().subs({B.gamma: gamma, B.C_W: C_W, B.K: K, B.mean_sigma_sq: mean_sigma_sq,
                                  B.mean_sigma_sq_z_sq: mean_sigma_sq_z_sq})


# --------------------------------------------------------------------------- the influence recursion
@cache
def influence_recursion() -> sp.Expr:
    """P_(l+1) from the kernel recursion K_(l+1) = gamma^2 K_l + sigma_l^2, sigma_l^2 = C_W (1/n) sum phi^2.

    The conditional kernel of layer l is K_l + eps p (eps = n^(-1/2)); the empirical mean of phi^2 is its
    conditional mean Phi(K_l + eps p) plus the fluctuation eps X at fixed kernel (the neuron's own
    phi(z_l)^2 - Phi enters X with weight 1/n).  First order in eps, Phi' eliminated by the derivative identity.
    """
    Phi = sp.Function("Phi")
    dK_next = gamma**2 * (K + _eps * P) + C_W * (Phi(K + _eps * P) + _eps * X) - (gamma**2 * K + C_W * Phi(K))
    first = sp.series(dK_next, _eps, 0, 2).removeO().coeff(_eps)
    first = first.subs(sp.Subs(sp.Derivative(Phi(_x), _x), _x, K), dPhi()).doit()
    first = first.subs(sp.Derivative(Phi(K), K), dPhi())
    out = sp.expand(first)
    if sp.simplify(out - (chi() * P + C_W * X)) != 0:
        raise ArithmeticError("the influence recursion is not chi_par P + C_W X")
    return chi_par * P + C_W * X


# --------------------------------------------------------------------------- second moments
def _expect(expr: sp.Expr, table: dict) -> sp.Expr:
    """E of a polynomial in (xi, z, f, P): xi ~ N(0, 1) independent of layer <= l, then the named correlators.

    ``table`` maps monomials z^a f^b P^c (as (a, b, c)) to their expectation; odd powers of z vanish (the
    chain is symmetric under z -> -z at every layer, phi^2 and P are even)."""
    poly = sp.Poly(sp.expand(expr), _xi, _z, _f, P)
    out = sp.Integer(0)
    for (k_xi, a, b, cc), coef in poly.terms():
        m_xi = 0 if k_xi % 2 else sp.factorial2(k_xi - 1)
        if m_xi == 0 or a % 2:
            continue
        key = (a, b, cc)
        if key not in table:
            raise KeyError(f"no correlator for z^{a} f^{b} P^{cc}")
        out += coef * m_xi * table[key]
    return sp.expand(out)


def _table() -> dict:
    return {(0, 0, 0): 1, (2, 0, 0): K, (4, 0, 0): 3 * K**2, (0, 1, 0): mean_sigma_sq, (0, 2, 0): mean_sigma_4,
            (2, 1, 0): mean_sigma_sq_z_sq, (0, 0, 1): 0, (2, 0, 1): Q, (0, 1, 1): E_P, (0, 0, 2): V_P}


@cache
def second_moment_recursions() -> dict[str, sp.Expr]:
    """Q' = E[P' (z'^2 - K')], V_P' = E[P'^2] and the ratio, from z' = gamma z + s xi, s^2 = C_W Phi (the
    infinite-width conditional variance; the O(n^-1/2) part of sigma^2 is carried by P), P' = chi P + C_W X."""
    s2 = C_W * mean_sigma_sq
    z_next = gamma * _z + sp.sqrt(s2) * _xi
    K_nxt = gamma**2 * K + s2
    P_next = chi_par * P + C_W * (_f - mean_sigma_sq)
    tab = _table()
    q_next = _expect(P_next * (z_next**2 - K_nxt), tab)
    v_next = _expect(P_next**2, tab)
    psi = (z_next**2 - K_nxt) + P_next
    r_next = sp.expand(_expect(psi**2, tab))
    return {"Q": sp.collect(q_next, [Q]), "V_P": sp.collect(v_next, [V_P, E_P]), "E_psi2": r_next,
            "K_next": K_nxt}


def ratio_from_correlators() -> sp.Expr:
    """R = E[psi^2]/K^2 with psi = (z^2 - K) + P: 2 + (2 Q + V_P)/K^2."""
    psi2 = _expect(((_z**2 - K) + P) ** 2, _table())
    return sp.expand(psi2 / K**2)


# --------------------------------------------------------------------------- Hermite channels
def mehler_check(order: int = 8) -> bool:
    """E_xi[He_n(a x + b xi)] = a^n He_n(x) for a^2 + b^2 = 1, n <= order (probabilists' Hermite)."""
    a = sp.Symbol("a", positive=True)
    for k in range(order + 1):
        arg = a * _x + sp.sqrt(1 - a**2) * _xi
        lhs = sp.Poly(sp.expand(sp.hermite_prob(k, arg)), _xi)
        mean = sum(coef * (0 if m[0] % 2 else sp.factorial2(m[0] - 1)) for m, coef in lhs.terms())
        if sp.expand(mean - a**k * sp.hermite_prob(k, _x)) != 0:
            return False
    return True


def channel_correlation() -> sp.Expr:
    """rho_l = Cov(z_l, z_(l+1))/sqrt(K_l K_(l+1)) = gamma sqrt(K_l/K_(l+1)); a^2 + b^2 = 1 for z_(l+1)/sqrt(K')
    = rho x + sqrt(1 - rho^2) xi' because K' = gamma^2 K + s^2."""
    return gamma * sp.sqrt(K / K_next)


def channel_update() -> sp.Expr:
    """c_(l+1,n) = E[P' He_n(z'/sqrt K')]/sqrt(n!) = rho^n (chi c_(l,n) + C_W h_(l,n)) (Mehler)."""
    if not mehler_check():
        raise ArithmeticError("Mehler's identity failed")
    return corr**n * (chi_par * c + C_W * h)


def second_hermite_coefficient() -> sp.Expr:
    """h_2 = E[phi^2 He_2(z/sqrt K)]/sqrt 2 = (<phi^2 z^2>/K - <phi^2>)/sqrt 2 = sqrt 2 K Phi'."""
    return (mean_sigma_sq_z_sq / K - mean_sigma_sq) / sp.sqrt(2)


@cache
def channel_two_is_Q() -> bool:
    """The n = 2 channel is Q/(sqrt 2 K) (z^2 - K = K He_2) and carries Phi' Q of E_P: Q's recursion is the
    channel recursion at n = 2 with rho^2 = gamma^2 K/K'."""
    Kp = second_moment_recursions()["K_next"]
    c2 = Q / (sp.sqrt(2) * K)
    upd = channel_update().subs({n: 2, c: c2, h: second_hermite_coefficient()}).subs(corr, gamma * sp.sqrt(K / Kp))
    q_from_channel = sp.sqrt(2) * Kp * upd
    q_derived = second_moment_recursions()["Q"]
    ok1 = sp.simplify(q_from_channel - q_derived) == 0
    ok2 = sp.simplify(c2 * second_hermite_coefficient() - dPhi() * Q) == 0
    return bool(ok1 and ok2)


# --------------------------------------------------------------------------- the corrected vertex
@cache
def corrected_vertex_update() -> sp.Expr:
    """V_c' for V_c = 2 Q + V_P, with E_P = Phi' Q + Delta: B.26 plus 2 chi C_W Delta (checked here)."""
    rec = second_moment_recursions()
    derived = 2 * rec["Q"] + rec["V_P"]
    derived = derived.subs(E_P, dPhi() * Q + Delta).subs(V_P, V - 2 * Q).subs(chi_par, chi())
    stated = (C_W**2 * (mean_sigma_4 - mean_sigma_sq**2) + chi_par**2 * V + 4 * gamma**2 * (chi_par - gamma**2) * K**2
              + 2 * chi_par * C_W * Delta)
    if sp.simplify(sp.expand(derived - stated.subs(chi_par, chi()))) != 0:
        raise ArithmeticError("the corrected vertex recursion is not B.26 + 2 chi C_W Delta")
    if not channel_two_is_Q():
        raise ArithmeticError("the second Hermite channel is not Q/(sqrt 2 K)")
    return stated


def b26_paper() -> sp.Expr:
    """B.26 as printed (``pdlt.four_point_recursion_paper``) in this module's symbols."""
    return B.four_point_recursion_paper().subs({B.C_W: C_W, B.gamma: gamma, B.K: K, B.V: V,
                                                B.mean_sigma_4: mean_sigma_4, B.mean_sigma_sq: mean_sigma_sq,
                                                B.mean_sigma_sq_z_sq: mean_sigma_sq_z_sq})


def b26_is_corrected_without_delta() -> bool:
    return sp.simplify(corrected_vertex_update().subs(Delta, 0).subs(chi_par, chi()) - b26_paper()) == 0


def ratio_from_vertex() -> sp.Expr:
    r = ratio_from_correlators().subs(V_P, V - 2 * Q)
    return sp.expand(r)


def gamma_zero_is_vanilla() -> bool:
    """At gamma = 0: rho = 0, so every channel n >= 1 is 0 after one layer (and c = 0 at the input): Delta = 0,
    and the update is the vanilla-MLP single-input vertex recursion C_W^2 (<s^4> - <s^2>^2) + (C_W Phi')^2 V."""
    zero_channels = channel_update().subs(corr, channel_correlation()).subs(gamma, 0)
    vanilla = C_W**2 * (mean_sigma_4 - mean_sigma_sq**2) + (C_W * dPhi()) ** 2 * V
    upd = corrected_vertex_update().subs(chi_par, chi()).subs({gamma: 0, Delta: 0})
    return bool(sp.simplify(zero_channels.subs(n, 1)) == 0 and sp.simplify(upd - vanilla) == 0)


def depth_one_is_b26() -> bool:
    """d = 1: P_0 = 0 so Q_0 = V_0 = 0 and every channel is 0 (Delta_0 = 0): R(1) is B.26's first step."""
    first = corrected_vertex_update().subs({V: 0, Delta: 0})
    b26 = b26_paper().subs(V, 0)
    Kp = second_moment_recursions()["K_next"]
    r_c = ratio_from_vertex().subs({V: first.subs(chi_par, chi()), Q: 0, K: Kp})
    r_b = 2 + b26 / Kp**2
    return bool(sp.simplify(r_c - r_b) == 0)


# --------------------------------------------------------------------------- the quadratic form (lead's form)
def _layer_symbols(d: int):
    Ks = sp.symbols(f"K0:{d + 1}", positive=True)
    dP = sp.symbols(f"dPhi0:{d}", real=True)
    var = sp.symbols(f"Var0:{d}", positive=True)
    return Ks, dP, var


def quadratic_form(d: int, b26: bool = False) -> sp.Expr:
    """R(d) K_d^2 as the quadratic form of the influence functions over the single-neuron chain (generic
    symbols): psi_k = C_W [X_k + sum_(j<k) a_kj psi_j], a_kj = gamma^(2(k-1-j)) Phi'_k, psi_Y = (z_d^2 - K_d)
    + sum_(j<d) gamma^(2(d-1-j)) psi_j, with Var X_k = Var_k, Cov(z_d^2, X_k) = 2 gamma^(2(d-k)) K_k^2 Phi'_k
    (pure second Hermite), Cov(X_j, X_k) = C_jk (j < k), or its second Hermite part
    2 gamma^(2(k-j)) K_j^2 Phi'_j Phi'_k when ``b26``."""
    Ks, dP, var = _layer_symbols(d)
    Cs = {(j, k): (2 * gamma ** (2 * (k - j)) * Ks[j] ** 2 * dP[j] * dP[k] if b26 else sp.Symbol(f"C_{j}_{k}"))
          for j in range(d) for k in range(j + 1, d)}
    Xs = sp.symbols(f"X0:{d}")
    Y = sp.Symbol("Y")  # z_d^2 - K_d
    psi: list[sp.Expr] = []
    for k in range(d):
        psi.append(sp.expand(C_W * (Xs[k] + sum(gamma ** (2 * (k - 1 - j)) * dP[k] * psi[j] for j in range(k)))))
    psi_Y = sp.expand(Y + sum(gamma ** (2 * (d - 1 - j)) * psi[j] for j in range(d)))
    cov = {}
    for k in range(d):
        cov[(Xs[k], Xs[k])] = var[k]
        cov[(Y, Xs[k])] = 2 * gamma ** (2 * (d - k)) * Ks[k] ** 2 * dP[k]
        for m in range(k + 1, d):
            cov[(Xs[k], Xs[m])] = Cs[(k, m)]
    cov[(Y, Y)] = 2 * Ks[d] ** 2
    coeffs = {s: psi_Y.coeff(s) for s in (Y, *Xs)}
    out = sp.Integer(0)
    keys = list(coeffs)
    for i, a in enumerate(keys):
        for b in keys[i:]:
            cv = cov.get((a, b), cov.get((b, a)))
            out += (1 if a == b else 2) * coeffs[a] * coeffs[b] * cv
    return sp.expand(out)


def recursion_form(d: int, b26: bool = False) -> sp.Expr:
    """R(d) K_d^2 by iterating Q, V_P and E_P = sum_(j<l) (prod_(j<i<l) chi_i) C_W Cov(X_j, X_l) over the same
    generic symbols (chi_k = gamma^2 + C_W Phi'_k)."""
    Ks, dP, var = _layer_symbols(d)
    chis = [gamma**2 + C_W * dP[k] for k in range(d)]

    def C(j, k):
        return 2 * gamma ** (2 * (k - j)) * Ks[j] ** 2 * dP[j] * dP[k] if b26 else sp.Symbol(f"C_{j}_{k}")

    q, vp = sp.Integer(0), sp.Integer(0)
    for l in range(d):
        e_p = sum(sp.Mul(*chis[j + 1:l]) * C_W * C(j, l) for j in range(l))
        cov_zf = 2 * Ks[l] ** 2 * dP[l]  # <phi^2 (z^2 - K)> = 2 K^2 Phi'
        q, vp = (gamma**2 * chis[l] * q + gamma**2 * C_W * cov_zf,
                 chis[l] ** 2 * vp + 2 * chis[l] * C_W * e_p + C_W**2 * var[l])
    return sp.expand(2 * Ks[d] ** 2 + 2 * q + vp)


def b26_recursion_form(d: int) -> sp.Expr:
    """R(d) K_d^2 by iterating B.26 over the same generic symbols (V^(0) = 0)."""
    Ks, dP, var = _layer_symbols(d)
    v = sp.Integer(0)
    for l in range(d):
        ch = gamma**2 + C_W * dP[l]
        v = C_W**2 * var[l] + ch**2 * v + 4 * gamma**2 * (ch - gamma**2) * Ks[l] ** 2
    return sp.expand(2 * Ks[d] ** 2 + v)


def b26_quadratic_form_check(d: int) -> bool:
    """(1) the corrected recursion equals the lead's quadratic form; (2) B.26 equals the quadratic form with the
    cross-layer covariances Cov(phi_k^2, phi_m^2), k != m, replaced by their second Hermite part."""
    ok1 = sp.expand(quadratic_form(d) - recursion_form(d)) == 0
    ok2 = sp.expand(quadratic_form(d, b26=True) - b26_recursion_form(d)) == 0
    return bool(ok1 and ok2)


# --------------------------------------------------------------------------- scale-invariant class
@cache
def quadrant_moment() -> sp.Expr:
    """J(rho) = E[u^2 v^2; u > 0, v > 0] for unit variances, correlation rho = cos(theta): with
    (u, v) = r (cos a, cos(a - theta)) the wedge is theta - pi/2 < a < pi/2 and the radial integral is
    int r^5 e^(-r^2/2) dr = 8; returned in rho."""
    radial = sp.integrate(_r**5 * sp.exp(-_r**2 / 2), (_r, 0, sp.oo))
    ang = sp.integrate(sp.expand(sp.expand_trig(sp.cos(_alpha) ** 2 * sp.cos(_alpha - _theta) ** 2)),
                       (_alpha, _theta - sp.pi / 2, sp.pi / 2))
    J_theta = sp.simplify(radial * ang / (2 * sp.pi))
    J = sp.simplify(sp.expand_trig(J_theta).subs({sp.sin(_theta): sp.sqrt(1 - rho**2)}).subs(
        {sp.cos(_theta): rho}).subs(_theta, sp.acos(rho)))
    paper_form = (3 * rho * sp.sqrt(1 - rho**2) + (sp.pi - sp.acos(rho)) * (1 + 2 * rho**2)) / (2 * sp.pi)
    for probe in (sp.Rational(-9, 10), sp.Rational(-1, 3), 0, sp.Rational(1, 2), sp.Rational(97, 100)):
        if abs(sp.N((J - paper_form).subs(rho, probe), 30)) > 1e-25:
            raise ArithmeticError("the wedge integral is not the degree-2 arc-cosine kernel")
    return paper_form


def mixed_moment() -> sp.Expr:
    """E[v^2 phi(u)^2] for unit-variance (u, v) of correlation rho, any activation: v = rho u + sqrt(1 - rho^2) w
    with w independent, so the w-average leaves rho^2 <phi^2 u^2> + (1 - rho^2) <phi^2> (K = 1); minus
    <phi^2> it is rho^2 (<phi^2 u^2> - <phi^2>) = 2 rho^2 Phi'(1): pure second Hermite (B.26 keeps it)."""
    w = sp.Symbol("w", real=True)
    v = rho * _z + sp.sqrt(1 - rho**2) * w
    poly = sp.Poly(sp.expand(v**2), w, _z)  # times phi(u)^2: <phi^2 u^a> for a = 0, 2 (odd a pairs with odd w)
    out = sp.Integer(0)
    for (k_w, a), coef in poly.terms():
        if k_w % 2 == 0:
            out += coef * sp.factorial2(k_w - 1) * {0: mean_sigma_sq, 2: mean_sigma_sq_z_sq}[a]
    return sp.expand(out)


def _same(a: sp.Expr, b: sp.Expr) -> bool:
    """a == b as functions of rho (and the slopes) at rational probe points, to 1e-25."""
    for r0 in (sp.Rational(-9, 10), sp.Rational(-1, 3), 0, sp.Rational(1, 2), sp.Rational(97, 100)):
        for ap, am in ((1, 0), (1, sp.Rational(1, 2)), (sp.Rational(3, 2), -2)):
            if abs(sp.N((a - b).subs({rho: r0, a_plus: ap, a_minus: am}), 30)) > 1e-25:
                return False
    return True


def phi_sq_cross_moment_scale_invariant() -> sp.Expr:
    """E[phi(u)^2 phi(v)^2] = (a_+^4 + a_-^4) J(rho) + 2 a_+^2 a_-^2 J(-rho) (quadrants by symmetry)."""
    J = quadrant_moment()
    J_neg = (sp.acos(rho) * (1 + 2 * rho**2) - 3 * rho * sp.sqrt(1 - rho**2)) / (2 * sp.pi)  # acos(-r) = pi - acos r
    if not _same(J_neg, J.subs(rho, -rho)):
        raise ArithmeticError("J(-rho) rewritten wrongly")
    return (a_plus**4 + a_minus**4) * J + 2 * a_plus**2 * a_minus**2 * J_neg


def cross_layer_excess_scale_invariant() -> sp.Expr:
    """D(rho) = E[phi(u)^2 phi(v)^2] - A_2^2 - 2 A_2^2 rho^2: the covariance minus its second Hermite part
    (h_2 = sqrt 2 K Phi' = sqrt 2 A_2 at K = 1)."""
    A2 = (a_plus**2 + a_minus**2) / 2
    definition = phi_sq_cross_moment_scale_invariant() - A2**2 - 2 * A2**2 * rho**2
    # J(rho) + J(-rho) = (1 + 2 rho^2)/2 cancels A_2^2 (1 + 2 rho^2) exactly; what is left is the odd part of J
    # times (a_+^2 - a_-^2)^2: no difference of O(a^4) terms (the direct form lost 1e-6 at a = 228, rho = -1)
    odd = (a_plus**2 - a_minus**2) ** 2 * (sp.asin(rho) * (1 + 2 * rho**2) + 3 * rho * sp.sqrt(1 - rho**2)) \
        / (2 * sp.pi)
    if not _same(odd, definition):
        raise ArithmeticError("D(rho) rewritten wrongly")
    return odd


def excess_is_odd_part() -> bool:
    """For ReLU D(rho) = (J(rho) - J(-rho))/2, the odd part of J: Li, Nica & Roy's J2(theta) - J2(pi - theta)
    up to normalisation (their interlayer term), checked here."""
    D = cross_layer_excess_scale_invariant().subs({a_plus: 1, a_minus: 0})
    J = quadrant_moment()
    return _same(D, (J - J.subs(rho, -rho)) / 2)


def scale_invariant_recursions() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """At criticality (K fixed, chi = 1, C_W A_2 = 1 - gamma^2) Delta_l = C_W sum_(t=1)^l D(gamma^t): the state
    (V, S, g) with V_c' = V_c + nu_B29 K^2 + 2 C_W^2 S K^2, S' = S + D(gamma g), g' = gamma g (K = 1)."""
    A2 = (a_plus**2 + a_minus**2) / 2
    cw = (1 - gamma**2) / A2
    nu_b = B.nu_scale_invariant().subs({B.gamma: gamma, B.a_plus: a_plus, B.a_minus: a_minus})
    s = B._scale_invariant_subs()
    one = sp.simplify(chi().subs({mean_sigma_sq: s[B.mean_sigma_sq], mean_sigma_sq_z_sq: s[B.mean_sigma_sq_z_sq]})
                      .subs(C_W, cw))
    if one != 1:
        raise ArithmeticError(f"chi_par at criticality is {one}, not 1")
    v_next = V + nu_b + 2 * cw**2 * S
    s_next = S + cross_layer_excess_scale_invariant().subs(rho, gamma * g)
    return v_next, s_next, gamma * g


# --------------------------------------------------------------------------- the K* = 0 class keeps nu
def k0_fourth_channel_order() -> sp.Expr:
    """Leading h_4 of phi^2 for phi = sigma_1 z + sigma_3 z^3/6 at small K: O(K^2), so Delta_l = O(K_l^4) and
    Delta/K^2 = O(1/l^2) adds O(1) to R(d), nothing to nu (B.35 stands); odd channels vanish (phi^2 even)."""
    s1, s3, kk = sp.symbols("sigma_1 sigma_3 kappa", positive=True)
    phi2 = sp.expand((s1 * _x * sp.sqrt(kk) + s3 * (_x * sp.sqrt(kk)) ** 3 / 6) ** 2)
    he4 = sp.hermite_prob(4, _x)
    poly = sp.Poly(sp.expand(phi2 * he4), _x)
    mean = sum(coef * (0 if m[0] % 2 else sp.factorial2(m[0] - 1)) for m, coef in poly.terms())
    return sp.factor(sp.expand(mean) / sp.sqrt(24))


# --------------------------------------------------------------------------- fused recursions for codegen
def recursions() -> list[Recursion]:
    src = Source(PAPER, "B.3, B.15, B.26", "corrected: derived from the forward equation B.3")
    chi_def = chi()
    vertex = Recursion(
        "vertex_corrected", "corrected vertex V_c^(l) = 2 Q + V_P; K^(l), moments and Delta_l per layer", src,
        ((V, corrected_vertex_update()),),
        sequences=(K, gamma, C_W, mean_sigma_sq, mean_sigma_sq_z_sq, mean_sigma_4, Delta),
        definitions=((chi_par, chi_def),),
        domain="V real: array (shape (1,) for one input, V = 0 at the input); K > 0, gamma in [0, 1), C_W > 0, "
               "the Gaussian moments at K and Delta: (L,) arrays, one entry per layer",
        notes=("R(l) = 2 + V_c^(l)/K^(l)^2; Delta = 0 is B.26.",))
    channels = Recursion(
        "hermite_channels", "Hermite channels c_(l,n) of a neuron's influence (Mehler), n = 0..N as the batch",
        Source(PAPER, "B.3", "corrected: Hermite channels of the cross-layer covariance"),
        ((c, channel_update()),), rows=(corr, n, chi_par, C_W, h),
        domain="c real: (N + 1,) array (c = 0 at the input); rows (L, N + 1): corr in [0, 1], n = 0..N, "
               "chi_par real, C_W > 0, h = E[phi(z_l)^2 He_n(z_l/sqrt K_l)]/sqrt(n!) for n >= 1, h_0 = 0 (a row "
               "constant over the layers or over n is numpy.broadcast_to)",
        notes=("Delta_l = sum_(n != 0, 2) c_(l,n) h_(l,n).",))
    v_next, s_next, g_next = scale_invariant_recursions()
    si = Recursion(
        "vertex_corrected_scale_invariant", "corrected V_c/K^2 of the scale-invariant class at criticality", src,
        ((V, v_next), (S, s_next), (g, g_next)), sequences=(gamma, a_plus, a_minus),
        domain="V = S = 0, g = 1 at the input: arrays; gamma in [0, 1), a_plus, a_minus with "
               "a_plus^2 + a_minus^2 > 0: (L,) arrays",
        notes=("R(l) = 2 + V_c^(l) (K = 1; R is independent of K).",))
    return [vertex, channels, si]


# --------------------------------------------------------------------------- registry
def derive_pdlt_corrected() -> Derivation:
    dv = Derivation("pdlt_corrected", "Residual MLPs: corrected O(1/n) fluctuation of the kernel (PDLT App. B)",
                    PAPER)
    dv.declare(PARAMETERS)
    add = dv.adder()
    slopes = [Constraint(sp.Gt(sp.Abs(a_plus) + sp.Abs(a_minus), 0), "|a_plus| + |a_minus| > 0 (a nonzero activation)")]
    nxt = r"\ell+1"
    rec = second_moment_recursions()
    for check, what in ((gamma_zero_is_vanilla, "gamma = 0 is not the vanilla MLP"),
                        (depth_one_is_b26, "d = 1 is not B.26"),
                        (b26_is_corrected_without_delta, "Delta = 0 is not B.26"),
                        (lambda: b26_quadratic_form_check(3), "B.26 is not the truncated quadratic form"),
                        (excess_is_odd_part, "D is not the odd part of J for ReLU")):
        if not check():
            raise ArithmeticError(what)
    add("influence_update", influence_recursion(), [chi_par, P, C_W, X], "B.3", "P_(l+1) = chi_par P_l + C_W X_l",
        P_P.tex(nxt), "recursion",
        statement=r"A neuron's influence on the conditional kernel of the next layer is its influence on this "
                  r"layer times $\chi_{\parallel}$ plus $C_{W}$ times its own fluctuation of $\sigma^{2}$.")
    add("cross_moment_update", rec["Q"], [gamma, chi_par, Q, C_W, mean_sigma_sq_z_sq, K, mean_sigma_sq], "B.3",
        "Q' = E[P' (z'^2 - K')]", P_Q.tex(nxt), "recursion",
        statement=r"The correlation of a neuron's influence with its own squared pre-activation obeys the closed "
                  r"recursion below.")
    add("influence_variance_update", rec["V_P"], [chi_par, V_P, C_W, E_P, mean_sigma_4, mean_sigma_sq], "B.3",
        "V_P' = E[P'^2]", P_V_P.tex(nxt), "recursion",
        statement=r"The variance of the influence is sourced by the same-neuron covariance $E_{P}$ of the influence "
                  r"with $\sigma^{2}$.")
    add("ratio_from_correlators", ratio_from_correlators(), [Q, V_P, K], "B.3",
        "R = n Var[Y]/E[Y]^2 = 2 + (2 Q + V_P)/K^2", "R",
        statement=r"The normalised fluctuation of $\|z\|^{2}/n$ is two plus the influence terms.")
    add("channel_correlation", channel_correlation(), [gamma, K, K_next], "B.3",
        "rho_l = gamma sqrt(K_l/K_(l+1))", r"\rho",
        statement=r"A neuron's pre-activations at consecutive layers have the correlation below.")
    add("channel_update", channel_update(), [corr, n, chi_par, c, C_W, h], "B.3",
        "c_(l+1,n) = rho^n (chi c_(l,n) + C_W h_(l,n))", P_c.tex(nxt), "recursion",
        statement=r"In the Hermite basis the influence's correlation with the neuron's own pre-activation is "
                  r"diagonal: channel $n$ is damped by $\rho^{n}$ per layer.")
    add("second_hermite_coefficient", second_hermite_coefficient(), [mean_sigma_sq_z_sq, K, mean_sigma_sq], "B.15",
        "h_2 = sqrt 2 K Phi'(K)", r"h_{2}",
        statement=r"The second Hermite coefficient of $\sigma^{2}$ is $\sqrt{2} K$ times the derivative of "
                  r"$\langle\sigma^{2}\rangle_{K}$; the channel it feeds is $Q/(\sqrt{2} K)$.")
    add("vertex_corrected_update", corrected_vertex_update(),
        [V, K, C_W, gamma, chi_par, mean_sigma_4, mean_sigma_sq, Delta], "B.26",
        "V_c' = B.26 + 2 chi C_W Delta", P_V.tex(nxt), "recursion",
        statement=r"The corrected vertex $V_{c} = 2Q + V_{P}$ obeys B.26 plus a source from the non-second-Hermite "
                  r"part $\Delta$ of the same-neuron cross-layer covariance, which B.26 drops.")
    add("ratio_from_vertex", ratio_from_vertex(), [V, K], "B.22", "R = 2 + V_c/K^2", "R",
        statement=r"The normalised fluctuation is two plus the corrected vertex over $K^{2}$.")
    add("quadrant_moment", quadrant_moment(), [rho], "B.27",
        "J(rho) = E[u^2 v^2; u, v > 0], degree-2 arc-cosine kernel", "J",
        statement=r"The quadrant fourth moment of a unit bivariate Gaussian is the degree-2 arc-cosine kernel.")
    add("phi_sq_cross_moment_scale_invariant", phi_sq_cross_moment_scale_invariant(), [rho, a_plus, a_minus],
        "B.27", "E[phi(u)^2 phi(v)^2], unit variances", r"\langle \sigma^{2}_{u} \sigma^{2}_{v} \rangle",
        statement=r"For a scale-invariant activation the fourth moment across two correlated pre-activations "
                  r"combines the quadrant moments.")
    add("cross_layer_excess_scale_invariant", cross_layer_excess_scale_invariant(), [rho, a_plus, a_minus], "B.27",
        "D(rho): Cov(phi_u^2, phi_v^2) minus its rho^2 part, unit variances", "D", constraints=slopes,
        statement=r"The part of the covariance that B.26 drops is the excess below over the $\rho^{2}$ term.")
    dv.recursions = recursions()
    return dv
