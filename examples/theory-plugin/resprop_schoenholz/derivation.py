"""Derivation of Schoenholz et al. (2017) for a fully connected network of any activation phi.

Network (the paper's Sec. 2): z^(l+1)_i = sum_j W_ij phi(z^(l)_j) + b_i with W_ij ~ N(0, sigma_w^2 / N) and
b_i ~ N(0, sigma_b^2).  At infinite width the pre-activations of two inputs a, b are Gaussian with covariance
[[q_aa, q_ab], [q_ab, q_bb]], and one layer maps it by

    q^(l+1)    = sigma_w^2 <phi(z)^2>_{q^(l)} + sigma_b^2                       (length map)
    q_ab^(l+1) = sigma_w^2 <phi(u_a) phi(u_b)> + sigma_b^2                      (covariance map)
    c^(l+1)    = q_ab^(l+1) / q*                  at the fixed point q* of the lengths (correlation map)

The Gaussian expectations <...> are inputs of the generated kernels (declared Parameters): the driver evaluates
them for any activation through resprop's expectation engine.  What is derived here, by SymPy, rather than typed:

* ``chi_q``: the slope of the length map at q*.  d/dq <phi(sqrt(q) z)^2> is differentiated under the integral,
  which leaves z h(z); Gaussian integration by parts (Stein's lemma, <z h(z)> = <h'(z)>) turns it into
  <phi'^2> + <phi phi''> (:func:`stein`).  So chi_q = chi_1 + sigma_w^2 <phi'' phi>, the paper's xi_q rate.
* ``chi_c``: the slope of the correlation map, d c^(l+1) / d c^(l) at c*, by the same steps in two variables
  (u_a = sqrt(q) z_1, u_b = sqrt(q) (c z_1 + sqrt(1 - c^2) z_2)): the phi phi'' terms cancel and
  sigma_w^2 <phi'(u_a) phi'(u_b)> remains.  ``chi_1`` is that slope at c = 1 (u_a = u_b).
* ``xi_q``, ``xi_c``: a deviation obeying e^(l+1) = chi e^(l) (rsolve) decays as exp(-l / xi) with
  xi = -1 / log(chi) (solve).  ``xi_c_near_critical``: the series of -1/log(chi) at chi = 1, 1/(1 - chi) - 1/2:
  since chi_c - 1 crosses zero linearly in sigma_w^2, xi_c ~ |sigma_w^2 - sigma_c^2|^-1.
* ``critical_sigma_w2``, ``critical_sigma_b2``: the order-to-chaos line, {q* = length map(q*), chi_1 = 1} solved
  for (sigma_w^2, sigma_b^2) as functions of q* (solve): the line parametrised by q*.

Equation tags are the paper's sections (Sec. 2: the maps and chi_1; Sec. 3: the depth scales).
"""
from __future__ import annotations

import sympy as sp

from resprop.derive.results import Derivation
from resprop.derive.symbols import Parameter

PAPER = "schoenholz2017"

_P = Parameter
#: every input, declared once (symbol, domain, the paper's LaTeX, meaning); the expectations are inputs for now
PARAMETERS = (
    _P("sigma_w2", "(0, inf)", r"\sigma_{w}^{2}", "weight variance sigma_w^2", convention="W_ij ~ N(0, sigma_w^2/N)"),
    _P("sigma_b2", "[0, inf)", r"\sigma_{b}^{2}", "bias variance sigma_b^2", convention="b_i ~ N(0, sigma_b^2)"),
    _P("phi_sq", "[0, inf)", r"\langle \phi(z)^{2} \rangle_{q^{(LAYER)}}", "<phi(z)^2>, z ~ N(0, q^(l))",
       layer=r"\ell"),
    _P("phi_ab", "real", r"\langle \phi(u_{a}) \phi(u_{b}) \rangle_{q^{(LAYER)}}",
       "<phi(u_a) phi(u_b)>, (u_a, u_b) ~ N(0, [[q_aa, q_ab], [q_ab, q_bb]]) at layer l", layer=r"\ell"),
    _P("q_star", "(0, inf)", r"q^{*}", "fixed point q* of the length map"),
    _P("dphi_sq", "(0, inf)", r"\langle \phi'(z)^{2} \rangle_{q^{*}}", "<phi'(z)^2>, z ~ N(0, q*)"),
    _P("ddphi_phi", "real", r"\langle \phi''(z) \phi(z) \rangle_{q^{*}}", "<phi''(z) phi(z)>, z ~ N(0, q*)"),
    _P("dphi_ab", "real", r"\langle \phi'(u_{a}) \phi'(u_{b}) \rangle_{q^{*}, c^{*}}",
       "<phi'(u_a) phi'(u_b)> at the fixed point (q*, c*)"),
    _P("chi_q", "(0, 1)", r"\chi_{q}", "contraction rate chi_q of the length map at q* (0 < chi_q < 1)"),
    _P("chi_c", "(0, 1)", r"\chi_{c}", "contraction rate chi_c of the correlation map at c* (0 < chi_c < 1)"),
)
sigma_w2, sigma_b2, phi_sq, phi_ab, q_star, dphi_sq, ddphi_phi, dphi_ab, chi_q, chi_c = (p.symbol for p in PARAMETERS)

#: the activation (undefined: the derivation holds for any phi) and the standard Gaussian variables
phi = sp.Function("phi")
_dphi, _ddphi = sp.Function("dphi"), sp.Function("ddphi")
z, z1, z2 = sp.symbols("z z_1 z_2", real=True)
_q = sp.Symbol("q", positive=True)
_c = sp.Symbol("c", real=True)
_l = sp.Symbol("l", integer=True, nonnegative=True)
_chi, _xi, _eps = sp.symbols("chi xi epsilon", positive=True)


def _named_derivatives(expr: sp.Expr) -> sp.Expr:
    """phi', phi'' as the functions dphi, ddphi of the same argument (SymPy writes them as Subs objects)."""
    def rename(e):
        order = e.expr.derivative_count
        return {1: _dphi, 2: _ddphi}[order](e.point[0])
    return expr.replace(lambda e: isinstance(e, sp.Subs) and isinstance(e.expr, sp.Derivative), rename)


def stein(expr: sp.Expr, var: sp.Symbol) -> sp.Expr:
    """Gaussian integration by parts in the standard normal ``var``: every term ``var * h(var)`` of ``expr``
    becomes ``h'(var)`` (<var h(var)> = <h'(var)>, Stein's lemma); terms without a bare factor ``var`` stay."""
    out = sp.S.Zero
    for term in sp.Add.make_args(sp.expand(expr)):
        factors = sp.Mul.make_args(term)
        bare = sum(1 for f in factors if f == var)
        if bare == 0:
            out += term
        elif bare == 1:
            out += sp.diff(sp.Mul(*[f for f in factors if f != var]), var)
        else:
            raise ArithmeticError(f"stein: {term} has {var} to a power; integrate by parts twice")
    return sp.expand(out.doit())


def expectation(expr: sp.Expr, table: dict[sp.Expr, sp.Symbol]) -> sp.Expr:
    """<expr> by linearity: each term is a coefficient free of the Gaussian variables times a product of phi,
    dphi, ddphi whose expectation is the declared input ``table[product]``."""
    def canonical(e):  # one spelling of each argument: sqrt(q) (c z_1 + ...) and c sqrt(q) z_1 + ... alike
        return e.replace(lambda f: isinstance(f, (phi, _dphi, _ddphi)), lambda f: f.func(sp.expand(f.args[0])))

    table = {canonical(k): v for k, v in table.items()}
    out = sp.S.Zero
    for term in sp.Add.make_args(sp.expand(canonical(_named_derivatives(expr)))):
        coeff, product = term.as_independent(phi, _dphi, _ddphi, as_Add=False)
        if product not in table or coeff.free_symbols & {z, z1, z2}:
            raise ArithmeticError(f"expectation: no declared input for <{product}> (term {term})")
        out += coeff * table[product]
    return out


def length_map() -> sp.Expr:
    """q^(l+1) = sigma_w^2 <phi(z)^2>_{q^(l)} + sigma_b^2."""
    return sigma_w2 * phi_sq + sigma_b2


def covariance_map() -> sp.Expr:
    """q_ab^(l+1) = sigma_w^2 <phi(u_a) phi(u_b)> + sigma_b^2."""
    return sigma_w2 * phi_ab + sigma_b2


def correlation_map() -> sp.Expr:
    """c^(l+1) = q_ab^(l+1) / sqrt(q_aa^(l+1) q_bb^(l+1)) with q_aa = q_bb = q* (the lengths at their fixed point)."""
    return covariance_map() / sp.sqrt(q_star * q_star)


def length_slope() -> sp.Expr:
    """chi_q = d q^(l+1) / d q^(l) at q*: differentiate sigma_w^2 <phi(sqrt(q) z)^2> in q, then Stein in z."""
    u = sp.sqrt(_q) * z
    d_integrand = sp.diff(sigma_w2 * phi(u) ** 2, _q)
    by_parts = stein(d_integrand, z)
    table = {_dphi(u) ** 2: dphi_sq, phi(u) * _ddphi(u): ddphi_phi}
    return sp.factor(expectation(by_parts, table))


def _correlation_slope_integrand() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """d/dc of the integrand of c^(l+1) = (sigma_w^2 <phi(u_a) phi(u_b)> + sigma_b^2) / q, integrated by parts in
    z_1 and z_2; returns (that expression, u_a, u_b)."""
    ua = sp.sqrt(_q) * z1
    ub = sp.sqrt(_q) * (_c * z1 + sp.sqrt(1 - _c**2) * z2)
    d_integrand = sp.diff(sigma_w2 * phi(ua) * phi(ub) / _q, _c)
    return sp.simplify(stein(stein(d_integrand, z1), z2)), ua, ub


def correlation_slope() -> sp.Expr:
    """chi_c = d c^(l+1) / d c^(l) at c*: sigma_w^2 <phi'(u_a) phi'(u_b)> (the phi phi'' terms cancel)."""
    slope, ua, ub = _correlation_slope_integrand()
    return expectation(slope, {_dphi(ua) * _dphi(ub): dphi_ab})


def chi_1() -> sp.Expr:
    """chi_1 = the correlation slope at c = 1, where u_b = u_a: sigma_w^2 <phi'(z)^2>_{q*}."""
    slope, ua, _ = _correlation_slope_integrand()
    return expectation(slope.subs(_c, 1), {_dphi(ua) ** 2: dphi_sq})


def depth_scale() -> sp.Expr:
    """xi(chi): a deviation e^(l+1) = chi e^(l) is e^(0) chi^l (rsolve); equating it with e^(0) exp(-l / xi)
    gives xi = -1 / log(chi)."""
    e = sp.Function("e")
    sol = sp.rsolve(e(_l + 1) - _chi * e(_l), e(_l), {e(0): _eps})
    if sp.simplify(sol - _eps * _chi**_l) != 0:
        raise ArithmeticError(f"rsolve gave {sol}, not e^(0) chi^l")
    (xi,) = sp.solve(sp.Eq((sol / _eps).subs(_l, 1), sp.exp(-1 / _xi)), _xi)
    return xi


def near_critical() -> sp.Expr:
    """The two leading terms of -1/log(chi) at chi = 1 - eps: 1/eps - 1/2 (then O(eps))."""
    series = sp.series(depth_scale().subs(_chi, 1 - _eps), _eps, 0, 1).removeO()
    return series.subs(_eps, 1 - _chi)


def critical_line() -> tuple[sp.Expr, sp.Expr]:
    """(sigma_w^2, sigma_b^2) on the order-to-chaos line as functions of q*: solve q* = sigma_w^2 <phi^2>_{q*} +
    sigma_b^2 together with chi_1 = 1."""
    sw, sb = sp.symbols("s_w s_b", real=True)
    eqs = [sp.Eq(q_star, length_map().subs({sigma_w2: sw, sigma_b2: sb})), sp.Eq(chi_1().subs(sigma_w2, sw), 1)]
    (sol,) = sp.solve(eqs, [sw, sb], dict=True)
    return sol[sw], sp.expand(sol[sb])


def derive_schoenholz() -> Derivation:
    dv = Derivation("schoenholz", "Schoenholz et al.: deep information propagation (mean-field depth scales)",
                    PAPER)
    dv.declare(PARAMETERS)
    add = dv.adder()
    at_fixed_point = {phi_sq: r"\langle \phi(z)^{2} \rangle_{q^{*}}"}
    add("length_map", length_map(), [sigma_w2, sigma_b2, phi_sq], "Sec. 2", "q^(l+1) from q^(l)",
        r"q^{(\ell+1)}", "recursion",
        statement="The variance of a pre-activation obeys, at infinite width, the length map")
    add("covariance_map", covariance_map(), [sigma_w2, sigma_b2, phi_ab], "Sec. 2", "q_ab^(l+1) from layer l",
        r"q_{ab}^{(\ell+1)}", "recursion",
        statement="The covariance of the pre-activations of two inputs obeys the covariance map")
    add("correlation_map", correlation_map(), [sigma_w2, sigma_b2, phi_ab, q_star], "Sec. 2",
        "c^(l+1) from layer l, lengths at q*", r"c^{(\ell+1)}", "recursion",
        tex={phi_ab: r"\langle \phi(u_{a}) \phi(u_{b}) \rangle_{q^{*}, c^{(\ell)}}"},
        statement="With both lengths at their fixed point $q^{*}$ the correlation of two inputs obeys the map")
    add("chi_1", chi_1(), [sigma_w2, dphi_sq], "Sec. 2", "chi_1 = d c^(l+1)/d c^(l) at c = 1", r"\chi_{1}",
        statement="The slope of the correlation map at $c = 1$, which decides between order ($\\chi_{1} < 1$) and "
                  "chaos ($\\chi_{1} > 1$), is")
    add("chi_q", length_slope(), [sigma_w2, dphi_sq, ddphi_phi], "Sec. 3", "chi_q = d q^(l+1)/d q^(l) at q*",
        r"\chi_{q}",
        statement="Differentiating the length map and integrating by parts (Stein's lemma) gives its slope at "
                  "$q^{*}$")
    add("chi_c", correlation_slope(), [sigma_w2, dphi_ab], "Sec. 3", "chi_c = d c^(l+1)/d c^(l) at c*",
        r"\chi_{c}",
        statement="The same steps in two Gaussian variables give the slope of the correlation map at $c^{*}$")
    xi = depth_scale()
    add("xi_q", xi.subs(_chi, chi_q), [chi_q], "Sec. 3", "xi_q: |q^(l) - q*| ~ exp(-l/xi_q)", r"\xi_{q}",
        statement="The length approaches its fixed point as $e^{-\\ell/\\xi_{q}}$ with the depth scale")
    add("xi_c", xi.subs(_chi, chi_c), [chi_c], "Sec. 3", "xi_c: |c^(l) - c*| ~ exp(-l/xi_c)", r"\xi_{c}",
        statement="The correlation approaches its fixed point as $e^{-\\ell/\\xi_{c}}$ with the depth scale")
    add("xi_c_near_critical", near_critical().subs(_chi, chi_c), [chi_c], "Sec. 3",
        "xi_c to O(1 - chi_c) near criticality", r"\xi_{c}",
        statement="Near the order-to-chaos line, where $\\chi_{c} \\to 1$ linearly in $\\sigma_{w}^{2}$, the depth "
                  "scale diverges as")
    sw_crit, sb_crit = critical_line()
    add("critical_sigma_w2", sw_crit, [dphi_sq], "Sec. 2", "sigma_w^2 on the order-to-chaos line at q*",
        r"\sigma_{w,c}^{2}",
        statement="On the order-to-chaos line ($\\chi_{1} = 1$ at the fixed point $q^{*}$) the weight variance is")
    add("critical_sigma_b2", sb_crit, [q_star, phi_sq, dphi_sq], "Sec. 2",
        "sigma_b^2 on the order-to-chaos line at q*", r"\sigma_{b,c}^{2}", tex=at_fixed_point,
        statement="The bias variance that puts the fixed point of the length map at $q^{*}$ is then")
    return dv
