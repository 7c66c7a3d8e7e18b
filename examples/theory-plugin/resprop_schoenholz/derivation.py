"""Derivation of Schoenholz et al. (2017) for a fully connected network of any activation phi.

Network (the paper's Sec. 2): z^(l+1)_i = sum_j W_ij phi(z^(l)_j) + b_i with W_ij ~ N(0, sigma_w^2 / N) and
b_i ~ N(0, sigma_b^2).  At infinite width the pre-activations of two inputs a, b are Gaussian with covariance
[[q_aa, q_ab], [q_ab, q_bb]], and one layer maps it by

    q^(l+1)    = sigma_w^2 <phi(z)^2>_{q^(l)} + sigma_b^2                       (length map)
    q_ab^(l+1) = sigma_w^2 <phi(u) phi(v)> + sigma_b^2                          (covariance map)
    c^(l+1)    = q_ab^(l+1) / q*        with q_aa = q_bb = q*, q_ab = c q*      (correlation map)

The expectations are written as such, with the activation phi an undefined function
(:mod:`resprop.derive.expectation`: ``mean(phi(z)**2, q)``, ``mean2(phi(u)*phi(v), q_aa, q_bb, q_ab)``), and
everything else is derived from them by SymPy:

* ``chi_q``: the slope of the length map at q*, ``sp.diff`` of the length map in q.  The derivative of an
  expectation is Price's theorem, d<f>_q/dq = <f''>_q / 2, so chi_q = sigma_w^2 <phi'^2 + phi phi''>_{q*}.
* ``chi_c``: the slope of the correlation map at c*, d/dc of the covariance map at (q*, q*, c q*) divided by q*:
  the chain rule gives d<phi(u) phi(v)>/dq_ab * dq_ab/dc / q* and Price's theorem d<f>/dq_ab = <d_u d_v f>, so
  chi_c = sigma_w^2 <phi'(u) phi'(v)>.  ``chi_1`` is that slope at c = 1, where u = v: sigma_w^2 <phi'(z)^2>_{q*}.
* The independent check, inside :func:`derive_schoenholz`: the same slopes by differentiating under the integral
  (z = sqrt(q) z_1, u = sqrt(q) z_1, v = sqrt(q) (c z_1 + sqrt(1 - c^2) z_2)) and Gaussian integration by parts
  (Stein's lemma, <z h(z)> = <h'(z)>, :func:`stein`) must give the same expressions in the expectations.
* ``xi_q``, ``xi_c``: a deviation obeying e^(l+1) = chi e^(l) (rsolve) decays as exp(-l / xi) with
  xi = -1 / log(chi) (solve).  ``xi_c_near_critical``: the series of -1/log(chi) at chi = 1, 1/(1 - chi) - 1/2:
  since chi_c - 1 crosses zero linearly in sigma_w^2, xi_c ~ |sigma_w^2 - sigma_c^2|^-1.
* ``critical_sigma_w2``, ``critical_sigma_b2``: the order-to-chaos line, {q* = length map(q*), chi_1 = 1} solved
  for (sigma_w^2, sigma_b^2) as functions of q* (solve, the expectations as coefficients): the line parametrised
  by q*.

Two kinds of generated kernels come out:

* per activation (:data:`ACTIVATIONS`: erf, tanh, relu, gelu), ``<result>_<activation>`` for the maps, the slopes
  and the critical line: :func:`resprop.derive.expectation.per_activation` resolves each expectation to resprop's
  derived closed form (erf, ReLU, GELU) or to the engine's quadrature, which the kernel calls (tanh);
* activation-generic, the expectations as inputs (``phi_sq``, ``phi_ab``, ``dphi_sq``, ``ddphi_phi``,
  ``dphi_ab``: :func:`as_inputs` replaces each expectation of the symbolic result by its declared input), for
  the driver to evaluate with resprop's expectation engine for any other activation (a SymPy expression).

Equation tags are the paper's sections (Sec. 2: the maps and chi_1; Sec. 3: the depth scales).
"""
from __future__ import annotations

import sympy as sp

from resprop.derive.expectation import (
    GaussianMean,
    GaussianMean2,
    TabulatedMean,
    TabulatedMean2,
    mean,
    mean2,
    per_activation,
    phi,
    resolve,
    u,
    v,
    z,
)
from resprop.derive.results import Derivation
from resprop.derive.symbols import Parameter

PAPER = "schoenholz2017"
#: the activations with kernels of their own (closed forms for erf, ReLU, GELU; the engine's quadrature for tanh)
ACTIVATIONS = ("erf", "tanh", "relu", "gelu")

_P = Parameter
#: every input, declared once (symbol, domain, the paper's LaTeX, meaning)
PARAMETERS = (
    _P("sigma_w2", "(0, inf)", r"\sigma_{w}^{2}", "weight variance sigma_w^2", convention="W_ij ~ N(0, sigma_w^2/N)"),
    _P("sigma_b2", "[0, inf)", r"\sigma_{b}^{2}", "bias variance sigma_b^2", convention="b_i ~ N(0, sigma_b^2)"),
    # the variances the expectations are taken at
    _P("q", "(0, inf)", r"q^{(LAYER)}", "variance q^(l) of a pre-activation at layer l", layer=r"\ell"),
    _P("q_aa", "(0, inf)", r"q_{aa}^{(LAYER)}", "variance q_aa^(l) of the pre-activation of input a at layer l",
       layer=r"\ell"),
    _P("q_bb", "(0, inf)", r"q_{bb}^{(LAYER)}", "variance q_bb^(l) of the pre-activation of input b at layer l",
       layer=r"\ell"),
    _P("q_ab", "|q_ab| <= sqrt(q_aa q_bb)", r"q_{ab}^{(LAYER)}",
       "covariance q_ab^(l) of the pre-activations of inputs a and b at layer l", layer=r"\ell"),
    _P("q_star", "(0, inf)", r"q^{*}", "fixed point q* of the length map"),
    _P("c", "[-1, 1]", r"c^{(LAYER)}", "correlation c^(l) of the pre-activations of two inputs at layer l",
       layer=r"\ell"),
    # the expectations as inputs of the activation-generic kernels (the driver's route for any other activation)
    _P("phi_sq", "[0, inf)", r"\langle \phi(z)^{2} \rangle_{q^{(LAYER)}}", "<phi(z)^2>, z ~ N(0, q^(l))",
       layer=r"\ell"),
    _P("phi_ab", "real", r"\langle \phi(u_{a}) \phi(u_{b}) \rangle_{q^{(LAYER)}}",
       "<phi(u_a) phi(u_b)>, (u_a, u_b) ~ N(0, [[q_aa, q_ab], [q_ab, q_bb]]) at layer l", layer=r"\ell"),
    _P("dphi_sq", "(0, inf)", r"\langle \phi'(z)^{2} \rangle_{q^{*}}", "<phi'(z)^2>, z ~ N(0, q*)"),
    _P("ddphi_phi", "real", r"\langle \phi''(z) \phi(z) \rangle_{q^{*}}", "<phi''(z) phi(z)>, z ~ N(0, q*)"),
    _P("dphi_ab", "real", r"\langle \phi'(u_{a}) \phi'(u_{b}) \rangle_{q^{*}, c^{*}}",
       "<phi'(u_a) phi'(u_b)> at the fixed point (q*, c*)"),
    _P("chi_q", "(0, 1)", r"\chi_{q}", "contraction rate chi_q of the length map at q* (0 < chi_q < 1)"),
    _P("chi_c", "(0, 1)", r"\chi_{c}", "contraction rate chi_c of the correlation map at c* (0 < chi_c < 1)"),
)
(sigma_w2, sigma_b2, q, q_aa, q_bb, q_ab, q_star, c, phi_sq, phi_ab, dphi_sq, ddphi_phi, dphi_ab, chi_q,
 chi_c) = (p.symbol for p in PARAMETERS)

#: the standard Gaussian variables of the Stein check; its names for phi' and phi''
z1, z2 = sp.symbols("z_1 z_2", real=True)
_dphi, _ddphi = sp.Function("dphi"), sp.Function("ddphi")
_q = sp.Symbol("q", positive=True)
_c = sp.Symbol("c", real=True)
_l = sp.Symbol("l", integer=True, nonnegative=True)
_chi, _xi, _eps = sp.symbols("chi xi epsilon", positive=True)


def _d(w: sp.Symbol, order: int = 1) -> sp.Expr:
    return sp.diff(phi(w), w, order)


# --------------------------------------------------------------------------- the maps and their slopes
def length_map(variance: sp.Expr = q) -> sp.Expr:
    """q^(l+1) = sigma_w^2 <phi(z)^2>_{q^(l)} + sigma_b^2."""
    return sigma_w2 * mean(phi(z) ** 2, variance) + sigma_b2


def covariance_map() -> sp.Expr:
    """q_ab^(l+1) = sigma_w^2 <phi(u) phi(v)> + sigma_b^2, (u, v) ~ N(0, [[q_aa, q_ab], [q_ab, q_bb]])."""
    return sigma_w2 * mean2(phi(u) * phi(v), q_aa, q_bb, q_ab) + sigma_b2


#: both lengths at their fixed point, the covariance c q*
AT_FIXED_POINT = {q_aa: q_star, q_bb: q_star, q_ab: c * q_star}


def correlation_map() -> sp.Expr:
    """c^(l+1) = q_ab^(l+1) / sqrt(q_aa^(l+1) q_bb^(l+1)) with the lengths at their fixed point q* (q_aa = q_bb =
    q*, q_ab = c q*)."""
    return covariance_map().subs(AT_FIXED_POINT) / sp.sqrt(q_star * q_star)


def length_slope() -> sp.Expr:
    """chi_q = d q^(l+1) / d q^(l) at q*: the derivative of the expectation is Price's theorem."""
    return sp.diff(length_map(q), q).subs(q, q_star)


def correlation_slope() -> sp.Expr:
    """chi_c = d c^(l+1) / d c^(l): d(covariance map)/dq_ab (Price) times dq_ab/dc = q*, over q*."""
    slope = sp.diff(covariance_map(), q_ab).subs(AT_FIXED_POINT) * sp.diff(AT_FIXED_POINT[q_ab], c) / q_star
    if sp.simplify(slope - sp.diff(correlation_map(), c)) != 0:  # the chain rule through GaussianMean2
        raise ArithmeticError(f"chi_c: {slope} is not d/dc of the correlation map")
    return slope


def on_the_diagonal(expr: sp.Expr) -> sp.Expr:
    """Each two-point expectation at a covariance [[K, K], [K, K]] as the one-point expectation it is (u = v)."""
    def one_point(node):
        f, K_aa, K_bb, K_ab = node.args
        if not (K_aa == K_bb == K_ab):
            return node
        a, b = f.variables
        return mean(f.expr.xreplace({a: z, b: z}).doit(), K_aa)
    return expr.replace(lambda e: isinstance(e, GaussianMean2), one_point)


def chi_1() -> sp.Expr:
    """chi_1 = the correlation slope at c = 1, where u = v: sigma_w^2 <phi'(z)^2>_{q*}."""
    return on_the_diagonal(correlation_slope().subs(c, 1))


def critical_line() -> tuple[sp.Expr, sp.Expr]:
    """(sigma_w^2, sigma_b^2) on the order-to-chaos line as functions of q*: solve q* = sigma_w^2 <phi^2>_{q*} +
    sigma_b^2 together with chi_1 = 1 (the expectations are coefficients of the linear system)."""
    sw, sb = sp.symbols("s_w s_b", real=True)
    eqs = [sp.Eq(q_star, length_map(q_star).subs({sigma_w2: sw, sigma_b2: sb})), sp.Eq(chi_1().subs(sigma_w2, sw), 1)]
    (sol,) = sp.solve(eqs, [sw, sb], dict=True)
    return sol[sw], sp.expand(sol[sb])


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


# --------------------------------------------------------------------------- the expectations as inputs
def input_table() -> dict[sp.Expr, sp.Symbol]:
    """Each expectation the results hold -> the declared input that stands for it in the generic kernels."""
    return {
        mean(phi(z) ** 2, q): phi_sq,
        mean(phi(z) ** 2, q_star): phi_sq,  # read at q* (critical_sigma_b2 prints it there)
        mean(_d(z) ** 2, q_star): dphi_sq,
        mean(phi(z) * _d(z, 2), q_star): ddphi_phi,
        mean2(phi(u) * phi(v), q_aa, q_bb, q_ab): phi_ab,
        mean2(phi(u) * phi(v), q_star, q_star, c * q_star): phi_ab,
        mean2(_d(u) * _d(v), q_star, q_star, c * q_star): dphi_ab,
    }


def by_linearity(expr: sp.Expr) -> sp.Expr:
    """Every expectation of a sum as the sum of the expectations of its terms, constant factors outside."""
    def split(node):
        f, *rest = node.args
        variables = f.variables
        out = sp.S.Zero
        for term in sp.Add.make_args(sp.expand(f.expr)):
            coeff, g = term.as_independent(*variables, as_Add=False)
            out += coeff * type(node)(sp.Lambda(variables, g), *rest)
        return out
    return expr.replace(lambda e: isinstance(e, (GaussianMean, GaussianMean2)), split)


def as_inputs(expr: sp.Expr) -> sp.Expr:
    """``expr`` with each expectation replaced by its declared input (:func:`input_table`); an ArithmeticError
    naming the expectation that has none."""
    out = by_linearity(expr).xreplace(input_table())
    left = out.atoms(GaussianMean, GaussianMean2)
    if left:
        raise ArithmeticError(f"as_inputs: no declared input for {sorted(map(str, left))}")
    return out


# --------------------------------------------------------------------------- the independent route: Stein's lemma
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


def stein_length_slope() -> sp.Expr:
    """chi_q by Stein: differentiate sigma_w^2 <phi(sqrt(q) z)^2> under the integral in q, integrate by parts in z;
    in the declared inputs."""
    w = sp.sqrt(_q) * z
    by_parts = stein(sp.diff(sigma_w2 * phi(w) ** 2, _q), z)
    return sp.factor(expectation(by_parts, {_dphi(w) ** 2: dphi_sq, phi(w) * _ddphi(w): ddphi_phi}))


def _stein_correlation_integrand() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """d/dc of the integrand of c^(l+1) = (sigma_w^2 <phi(u) phi(v)> + sigma_b^2) / q, integrated by parts in z_1
    and z_2; returns (that expression, u, v)."""
    ua = sp.sqrt(_q) * z1
    ub = sp.sqrt(_q) * (_c * z1 + sp.sqrt(1 - _c**2) * z2)
    d_integrand = sp.diff(sigma_w2 * phi(ua) * phi(ub) / _q, _c)
    return sp.simplify(stein(stein(d_integrand, z1), z2)), ua, ub


def stein_correlation_slope() -> sp.Expr:
    """chi_c by Stein in two variables (the phi phi'' terms cancel), in the declared inputs."""
    slope, ua, ub = _stein_correlation_integrand()
    return expectation(slope, {_dphi(ua) * _dphi(ub): dphi_ab})


def stein_chi_1() -> sp.Expr:
    """chi_1 by Stein: the correlation slope's integrand at c = 1 (u = v), in the declared inputs."""
    slope, ua, _ = _stein_correlation_integrand()
    return expectation(slope.subs(_c, 1), {_dphi(ua) ** 2: dphi_sq})


def price_equals_stein() -> dict[str, sp.Expr]:
    """chi_q, chi_c, chi_1 by Price's theorem (the derivatives of the expectations) and by Stein's lemma
    (differentiating under the integral, integrating by parts) in the declared inputs: an ArithmeticError unless
    the two routes agree; returns the slopes."""
    out = {"chi_q": as_inputs(length_slope()), "chi_c": as_inputs(correlation_slope()), "chi_1": as_inputs(chi_1())}
    stein_ = {"chi_q": stein_length_slope(), "chi_c": stein_correlation_slope(), "chi_1": stein_chi_1()}
    for name, expr in out.items():
        if sp.simplify(expr - stein_[name]) != 0:
            raise ArithmeticError(f"{name}: Price's theorem gives {expr}, Stein's lemma {stein_[name]}")
    return out


# --------------------------------------------------------------------------- the results
def _tex() -> dict[sp.Symbol, str]:
    return {p.symbol: p.tex() for p in PARAMETERS}


def expectation_tex(expr: sp.Expr, overrides: dict | None = None) -> dict[sp.Expr, str]:
    """Each expectation left to the engine's quadrature in a resolved ``expr`` -> its LaTeX, as resprop's LaTeX
    export prints it (``<tanh(z)^2>_{q}``).  Given to the result as LaTeX overrides, this makes the conformance
    suite's LaTeX round trip treat such an expectation as it treats a declared input (a placeholder): SymPy's LaTeX
    parser cannot read \\langle ... \\rangle."""
    from resprop.derive.latex import _PaperPrinter

    printer = _PaperPrinter({**_tex(), **(overrides or {})})
    nodes = sorted(expr.atoms(TabulatedMean, TabulatedMean2), key=sp.default_sort_key)
    return {node: printer.doprint(node) for node in nodes}


def over_pi(expr: sp.Expr) -> sp.Expr:
    """``expr`` with the terms of each sum that carry a factor 1/pi collected over one pi: GELU's
    1/4 + (... + asin(q/(q + 1))/2)/pi.  (Besides reading better, the LaTeX export then prints no pi juxtaposed with
    a parenthesised power, ``2 \\pi \\left(q + 1\\right)^{2}``, which SymPy's LaTeX parser in the conformance
    suite reads as the square of a function pi(q + 1): GELU's chi_q parsed back with pi^2.)"""
    return expr.replace(lambda e: e.is_Add and e.has(sp.pi), lambda e: sp.collect(e, 1 / sp.pi))


def _per_activation(add, name, expr, order, eq, desc, lhs, statement, tex=None, **kwargs) -> list[str]:
    """``per_activation`` for each of :data:`ACTIVATIONS`, with the LaTeX overrides ``tex`` and those of that
    activation's quadrature nodes (passed by wrapping ``add``: per_activation's own ``tex`` is the left-hand side),
    and the resolved expression's 1/pi terms collected (:func:`over_pi`)."""
    names = []
    for act in ACTIVATIONS:
        overrides = {**(tex or {}), **expectation_tex(resolve(expr, act), tex)}

        def add_with_tex(label, resolved, *args, overrides=overrides, **kw):
            return add(label, over_pi(resolved), *args, tex=overrides, **kw)

        names += per_activation(add_with_tex, name, expr, order, eq, desc, lhs, (act,), statement=statement,
                                **kwargs)
    return names


def derive_schoenholz() -> Derivation:
    dv = Derivation("schoenholz", "Schoenholz et al.: deep information propagation (mean-field depth scales)",
                    PAPER)
    dv.declare(PARAMETERS)
    add = dv.adder()
    slopes = price_equals_stein()  # Price's theorem checked against Stein's lemma
    sw_crit, sb_crit = critical_line()
    at_fixed_point = {phi_sq: r"\langle \phi(z)^{2} \rangle_{q^{*}}"}
    correlation_tex = {phi_ab: r"\langle \phi(u_{a}) \phi(u_{b}) \rangle_{q^{*}, c^{(\ell)}}"}
    # activation-generic: the expectations as inputs (the driver evaluates them for any other activation)
    add("length_map", as_inputs(length_map()), [sigma_w2, sigma_b2, phi_sq], "Sec. 2", "q^(l+1) from q^(l)",
        r"q^{(\ell+1)}", "recursion",
        statement="The variance of a pre-activation obeys, at infinite width, the length map")
    add("covariance_map", as_inputs(covariance_map()), [sigma_w2, sigma_b2, phi_ab], "Sec. 2",
        "q_ab^(l+1) from layer l", r"q_{ab}^{(\ell+1)}", "recursion",
        statement="The covariance of the pre-activations of two inputs obeys the covariance map")
    add("correlation_map", as_inputs(correlation_map()), [sigma_w2, sigma_b2, phi_ab, q_star], "Sec. 2",
        "c^(l+1) from layer l, lengths at q*", r"c^{(\ell+1)}", "recursion", tex=correlation_tex,
        statement="With both lengths at their fixed point $q^{*}$ the correlation of two inputs obeys the map")
    add("chi_1", slopes["chi_1"], [sigma_w2, dphi_sq], "Sec. 2", "chi_1 = d c^(l+1)/d c^(l) at c = 1", r"\chi_{1}",
        statement="The slope of the correlation map at $c = 1$, which decides between order ($\\chi_{1} < 1$) and "
                  "chaos ($\\chi_{1} > 1$), is")
    add("chi_q", slopes["chi_q"], [sigma_w2, dphi_sq, ddphi_phi], "Sec. 3", "chi_q = d q^(l+1)/d q^(l) at q*",
        r"\chi_{q}",
        statement="Differentiating the length map (Price's theorem, or Stein's lemma under the integral) gives its "
                  "slope at $q^{*}$")
    add("chi_c", slopes["chi_c"], [sigma_w2, dphi_ab], "Sec. 3", "chi_c = d c^(l+1)/d c^(l) at c*",
        r"\chi_{c}",
        statement="Differentiating the covariance map in $q_{ab}$ gives the slope of the correlation map at $c^{*}$")
    xi = depth_scale()
    add("xi_q", xi.subs(_chi, chi_q), [chi_q], "Sec. 3", "xi_q: |q^(l) - q*| ~ exp(-l/xi_q)", r"\xi_{q}",
        statement="The length approaches its fixed point as $e^{-\\ell/\\xi_{q}}$ with the depth scale")
    add("xi_c", xi.subs(_chi, chi_c), [chi_c], "Sec. 3", "xi_c: |c^(l) - c*| ~ exp(-l/xi_c)", r"\xi_{c}",
        statement="The correlation approaches its fixed point as $e^{-\\ell/\\xi_{c}}$ with the depth scale")
    add("xi_c_near_critical", near_critical().subs(_chi, chi_c), [chi_c], "Sec. 3",
        "xi_c to O(1 - chi_c) near criticality", r"\xi_{c}",
        statement="Near the order-to-chaos line, where $\\chi_{c} \\to 1$ linearly in $\\sigma_{w}^{2}$, the depth "
                  "scale diverges as")
    add("critical_sigma_w2", as_inputs(sw_crit), [dphi_sq], "Sec. 2", "sigma_w^2 on the order-to-chaos line at q*",
        r"\sigma_{w,c}^{2}",
        statement="On the order-to-chaos line ($\\chi_{1} = 1$ at the fixed point $q^{*}$) the weight variance is")
    add("critical_sigma_b2", as_inputs(sb_crit), [q_star, phi_sq, dphi_sq], "Sec. 2",
        "sigma_b^2 on the order-to-chaos line at q*", r"\sigma_{b,c}^{2}", tex=at_fixed_point,
        statement="The bias variance that puts the fixed point of the length map at $q^{*}$ is then")
    # per activation: the same symbolic results with the expectations resolved
    c_star = {c: r"c^{*}"}
    _per_activation(add, "length_map", length_map(), [q, sigma_w2, sigma_b2], "Sec. 2", "q^(l+1) from q^(l)",
                    r"q^{(\ell+1)}", "The length map, its expectation resolved for the activation", kind="recursion")
    _per_activation(add, "covariance_map", covariance_map(), [q_aa, q_bb, q_ab, sigma_w2, sigma_b2], "Sec. 2",
                    "q_ab^(l+1) from layer l", r"q_{ab}^{(\ell+1)}",
                    "The covariance map, $(u, v)$ centred Gaussian with variances $q_{aa}^{(\\ell)}$, "
                    "$q_{bb}^{(\\ell)}$ and covariance $q_{ab}^{(\\ell)}$, resolved for the activation",
                    kind="recursion")
    _per_activation(add, "correlation_map", correlation_map(), [q_star, c, sigma_w2, sigma_b2], "Sec. 2",
                    "c^(l+1) from c^(l), lengths at q*", r"c^{(\ell+1)}",
                    "The correlation map with both lengths at $q^{*}$, $(u, v)$ with variances $q^{*}$ and covariance "
                    "$c^{(\\ell)} q^{*}$, resolved for the activation", kind="recursion")
    _per_activation(add, "chi_1", chi_1(), [q_star, sigma_w2], "Sec. 2", "chi_1 = d c^(l+1)/d c^(l) at c = 1",
                    r"\chi_{1}", "The slope of the correlation map at $c = 1$, resolved for the activation")
    _per_activation(add, "chi_q", length_slope(), [q_star, sigma_w2], "Sec. 3", "chi_q = d q^(l+1)/d q^(l) at q*",
                    r"\chi_{q}", "The slope of the length map at $q^{*}$ by Price's theorem, resolved for the "
                    "activation")
    _per_activation(add, "chi_c", correlation_slope(), [q_star, c, sigma_w2], "Sec. 3",
                    "chi_c = d c^(l+1)/d c^(l) at c*", r"\chi_{c}",
                    "The slope of the correlation map at $c^{*}$, $(u, v)$ with variances $q^{*}$ and covariance "
                    "$c^{*} q^{*}$, resolved for the activation", tex=c_star)
    _per_activation(add, "critical_sigma_w2", sw_crit, [q_star], "Sec. 2",
                    "sigma_w^2 on the order-to-chaos line at q*", r"\sigma_{w,c}^{2}",
                    "The weight variance on the order-to-chaos line at the fixed point $q^{*}$, resolved for the "
                    "activation")
    _per_activation(add, "critical_sigma_b2", sb_crit, [q_star], "Sec. 2",
                    "sigma_b^2 on the order-to-chaos line at q*", r"\sigma_{b,c}^{2}",
                    "The bias variance on the order-to-chaos line at the fixed point $q^{*}$, resolved for the "
                    "activation")
    return dv
