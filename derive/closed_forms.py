"""Closed-form Gaussian dual kernels beyond erf and ReLU: GELU, and activations of exponential type.

Notation as in :mod:`resprop.derive.gaussian`: (u, v) is a centred bivariate Gaussian with Var u = K_aa,
Var v = K_bb, Cov(u, v) = K_ab; on the diagonal u ~ N(0, K).  Every function returns the five expectations
the residual recursions need (:data:`KEYS`): ``mean_phi_phi`` = <phi(u) phi(v)> and ``mean_dphi_dphi`` =
<phi'(u) phi'(v)> in (K_aa, K_bb, K_ab), and ``mean_phi_sq`` = <phi(u)^2>, ``mean_dphi_sq`` = <phi'(u)^2>,
``price_diag`` = <phi'(u)^2 + phi(u) phi''(u)> = d<phi^2>/dK in K.

GELU (Hendrycks & Gimpel 2016, arXiv:1606.08415), phi(x) = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2.
Derived by Price's theorem (R. Price, "A useful theorem for nonlinear devices having Gaussian inputs", IRE
Trans. Inf. Theory 4 (1958) 69-72): d/dK_ab <f(u) g(v)> = <f'(u) g'(v)>.  Since phi''(x) = (2 - x^2) N(x) with
N the standard normal density, <phi''(u) phi''(v)> is a polynomial moment under the Gaussian with covariance
Sigma = K (I + K)^(-1) = I - (I + K)^(-1), divided by 2 pi sqrt(det(I + K)).  Parametrising
K_ab = sqrt(1 + K_aa) sqrt(1 + K_bb) sin(theta) makes det(I + K) = (1 + K_aa)(1 + K_bb) cos^2(theta), and the
integrand in theta a Laurent polynomial in cos(theta) which SymPy integrates term by term.  Integrating twice
from K_ab = 0 (where u and v are independent, <phi'(u)> = 1/2 and <phi(u)> = K_aa / sqrt(2 pi (1 + K_aa)), both
by the one-dimensional Price theorem d<f(u)>/dK = <f''(u)>/2) gives, with

    t = K_ab / (sqrt(1 + K_aa) sqrt(1 + K_bb)),     |t| <= sqrt(K_aa K_bb / ((1 + K_aa)(1 + K_bb))) < 1,

    <phi(u) phi(v)>   = K_ab / 4 + [K_ab asin(t) + (K_aa K_bb (1 - t^2) + t^2)
                                      / (sqrt(1 + K_aa) sqrt(1 + K_bb) sqrt(1 - t^2))] / (2 pi)
    <phi'(u) phi'(v)> = 1/4 + [asin(t) + t (1/(1 + K_aa) + 1/(1 + K_bb)
                                           + 1/((1 + K_aa)(1 + K_bb)(1 - t^2))) / sqrt(1 - t^2)] / (2 pi)
    <phi(u)^2>        = K/4 + K asin(K/(1+K)) / (2 pi) + K^2 / (pi (1 + K) sqrt(1 + 2K))
    <phi'(u)^2>       = 1/4 + asin(K/(1+K)) / (2 pi) + K (5K + 3) / (2 pi (1 + K) (1 + 2K)^(3/2))
    d<phi^2>/dK       = 1/4 + asin(K/(1+K)) / (2 pi) + K (4K^2 + 11K + 5) / (2 pi (1 + K)^2 (1 + 2K)^(3/2))

The pair forms are *separable* (as :mod:`resprop.derive.residual` needs them): sqrt(1 + K_aa) and sqrt(1 + K_bb)
are separate factors (evaluated once per row and column), and K_ab enters only through t, so the elementwise work is
one asin and one sqrt, the same transcendental count as erf's (2/pi) asin(2 K_ab / (sqrt(1+2K_aa) sqrt(1+2K_bb))).
:func:`gelu_dual` checks symbolically that these forms equal the raw Price-integrated ones
(:func:`gelu_price_integrated`); the tests check both against 30-digit two-dimensional quadrature.

Comparison with neural-tangents: ``stax.Gelu`` (neural_tangents/_src/stax/elementwise.py, NNGP after
arXiv:2002.08517) writes, with delta = sqrt((1+K_aa)(1+K_bb) - K_ab^2) and the angle atan2(K_ab, delta) = asin(t),
NNGP = K_ab/4 + [(K_ab^2 + K_aa K_bb delta^2) / ((1+K_aa)(1+K_bb) delta) + K_ab asin(t)] / (2 pi), the NTK factor
<phi' phi'> = 1/4 + asin(t)/(2 pi) + K_ab (1/delta^2 + (1 - K_aa K_bb)/((1+K_aa)(1+K_bb)) + 1) / (2 pi delta),
and on the diagonal K (1/4 + (K / ((K+1) sqrt(1+2K)) + atan(K / sqrt(1+2K)) / 2) / pi).  All three AGREE with the
forms above identically (tests/test_closed_forms.py compares them to 50 digits); neural-tangents evaluates
the non-separable sqrt((1+K_aa)(1+K_bb) - K_ab^2) per element and has no <phi'^2 + phi phi''>.

Exponential type: phi(x) = sum_i c_i exp(w_i x) with complex w_i, c_i and phi real (sin, cos, sinh, cosh, exp,
sin(a x + b), 2 sin x + cos 3x, ...).  The characteristic function <exp(alpha u + beta v)> =
exp((alpha^2 K_aa + 2 alpha beta K_ab + beta^2 K_bb) / 2) gives <phi(u) phi(v)> = sum_ij c_i c_j
exp(w_i^2 K_aa / 2) exp(w_j^2 K_bb / 2) exp(w_i w_j K_ab), written in real form with the factors of K_aa and of
K_bb kept separate and exp(+-m K_ab) pairs combined into cosh / sinh, e.g.
<sin u sin v> = exp(-K_aa/2) exp(-K_bb/2) sinh(K_ab), <cos u cos v> = exp(-K_aa/2) exp(-K_bb/2) cosh(K_ab).
"""
from __future__ import annotations

from collections import defaultdict
from functools import cache

import sympy as sp

from resprop.derive.activations import BUILTIN_EXPRESSIONS, x
from resprop.derive.gaussian import K, K_aa, K_ab, K_bb, polynomial_expectation

#: the keys of every dual-kernel dictionary
KEYS = ("mean_phi_phi", "mean_dphi_dphi", "mean_phi_sq", "mean_dphi_sq", "price_diag")

#: GELU, x Phi(x) (the expression of :mod:`resprop.derive.activations`)
GELU = BUILTIN_EXPRESSIONS["gelu"]

_theta = sp.Symbol("theta", real=True)  # K_ab = sqrt(1 + K_aa) sqrt(1 + K_bb) sin(theta), |theta| < pi/2
_t = sp.Symbol("t", real=True)  # sin(theta), the correlation-like variable of the separable forms
_s = sp.Symbol("s", positive=True)  # 1 - t^2 = cos(theta)^2
_k = sp.Symbol("k", positive=True)  # integration variable of the one-dimensional Price theorem
_u, _v = sp.symbols("u v", real=True)
_density = sp.exp(-x**2 / 2) / sp.sqrt(2 * sp.pi)

_sqrt_a, _sqrt_b = sp.sqrt(1 + K_aa), sp.sqrt(1 + K_bb)
#: the correlation-like variable of the GELU pair forms, in separable form
GELU_T = K_ab / (_sqrt_a * _sqrt_b)


# --------------------------------------------------------------------------- Gaussian integrals
def _density_polynomial(f: sp.Expr) -> sp.Expr:
    """p with f = p(x) N(x) and p a polynomial in x; an error if f is not of that form."""
    p = sp.simplify(f / _density)
    if not p.is_polynomial(x):
        raise ValueError(f"{f} is not a polynomial times the normal density")
    return sp.expand(p)


def _mean_poly_density_1d(p: sp.Expr, var: sp.Expr) -> sp.Expr:
    """E[p(u) N(u)] for u ~ N(0, var): completing the square, N(0, var) times N(u) is N(0, var/(1+var)) times
    1/sqrt(2 pi (1 + var))."""
    sigma2 = var / (1 + var)
    moment = polynomial_expectation(p.subs(x, _u), (_u, _v), sigma2, 1, 0)
    return sp.simplify(moment / sp.sqrt(2 * sp.pi * (1 + var)))


def _mean_1d(f: sp.Expr, var: sp.Expr) -> sp.Expr:
    """E[f(u)] for u ~ N(0, var) by the one-dimensional Price theorem d/dK E[f] = E[f'']/2, from f(0) at K = 0.
    f'' must be a polynomial times N(x)."""
    p = _density_polynomial(sp.diff(f, x, 2))
    rate = _mean_poly_density_1d(p, _k) / 2
    return sp.simplify(f.subs(x, 0) + sp.integrate(rate, (_k, 0, var)))


def _integrate_from_zero(f: sp.Expr, var: sp.Symbol) -> sp.Expr:
    """int_0^var f, term by term (each term's factor free of ``var`` pulled out first, so SymPy's trigonometric
    integrator sees bare monomials in sin and cos); an antiderivative continuous on |theta| < pi/2."""
    out = sp.Integer(0)
    for term in sp.Add.make_args(sp.expand(f)):
        coeff, g = sp.factor(term).as_independent(var, as_Add=False)
        F = sp.integrate(g, var)
        if F.has(sp.Integral):
            raise RuntimeError(f"SymPy could not integrate {g}")
        out += coeff * (F - F.subs(var, 0))
    return out


def _to_t(e: sp.Expr) -> sp.Expr:
    """Back from theta to t = sin(theta): cos(theta) = sqrt(1 - t^2) on |theta| < pi/2."""
    e = e.subs(sp.tan(_theta), sp.sin(_theta) / sp.cos(_theta))
    return e.subs({sp.sin(_theta): _t, sp.cos(_theta): sp.sqrt(1 - _t**2)}).subs(_theta, sp.asin(_t))


# --------------------------------------------------------------------------- GELU
@cache
def _gelu_price_integrated_t() -> tuple[sp.Expr, sp.Expr]:
    """(<phi' phi'>, <phi phi>) of GELU as SymPy integrates them, in (K_aa, K_bb, t)."""
    p2 = _density_polynomial(sp.diff(GELU, x, 2))  # phi'' = (2 - x^2) N(x)
    R = _sqrt_a * _sqrt_b
    IK = sp.Matrix([[1 + K_aa, R * _t], [R * _t, 1 + K_bb]])  # I + K at K_ab = R t
    det = sp.factor(IK.det())
    if sp.simplify(det - R**2 * (1 - _t**2)) != 0:
        raise RuntimeError(f"det(I + K) = {det}")
    Sigma = sp.eye(2) - IK.adjugate() / det  # K (I + K)^(-1)
    moment = polynomial_expectation(p2.subs(x, _u) * p2.subs(x, _v), (_u, _v), Sigma[0, 0], Sigma[1, 1], Sigma[0, 1])
    # <phi'' phi''> = moment / (2 pi R cos(theta)) and dK_ab = R cos(theta) dtheta: the integrand in theta is
    # moment / (2 pi), even in t, a Laurent polynomial in s = 1 - t^2 = cos^2(theta)
    moment_s = sp.apart(sp.factor(moment.subs(_t**2, 1 - _s)), _s)
    if moment_s.has(_t):
        raise RuntimeError(f"<phi'' phi''> is not even in t: {moment}")
    integrand = moment_s.subs(_s, sp.cos(_theta) ** 2) / (2 * sp.pi)
    d_a, d_b = _mean_1d(sp.diff(GELU, x), K_aa), _mean_1d(sp.diff(GELU, x), K_bb)  # both 1/2
    m_a, m_b = _mean_1d(GELU, K_aa), _mean_1d(GELU, K_bb)
    dphi_dphi = d_a * d_b + _integrate_from_zero(integrand, _theta)
    phi_phi = m_a * m_b + _integrate_from_zero(dphi_dphi * R * sp.cos(_theta), _theta)
    return _to_t(dphi_dphi), _to_t(phi_phi)


def _gelu_separable_t() -> tuple[sp.Expr, sp.Expr]:
    """The separable GELU pair forms in (K_aa, K_bb, t), K_ab = sqrt(1 + K_aa) sqrt(1 + K_bb) t."""
    R = _sqrt_a * _sqrt_b
    root = sp.sqrt(1 - _t**2)
    inverse_sum = 1 / (1 + K_aa) + 1 / (1 + K_bb) + 1 / ((1 + K_aa) * (1 + K_bb) * (1 - _t**2))
    dphi_dphi = sp.Rational(1, 4) + (sp.asin(_t) + _t * inverse_sum / root) / (2 * sp.pi)
    phi_phi = R * _t / 4 + (R * _t * sp.asin(_t) + (K_aa * K_bb * (1 - _t**2) + _t**2) / (R * root)) / (2 * sp.pi)
    return dphi_dphi, phi_phi


def _from_t(e: sp.Expr) -> sp.Expr:
    """Substitute t = K_ab / (sqrt(1 + K_aa) sqrt(1 + K_bb)) (R t becomes K_ab)."""
    return e.subs(_t, GELU_T)


def gelu_price_integrated() -> dict[str, sp.Expr]:
    """The raw Price-integrated GELU pair expectations (as SymPy's term-by-term integration returns them), in
    (K_aa, K_bb, K_ab): keys ``mean_dphi_dphi`` and ``mean_phi_phi``.  :func:`gelu_dual` holds the same functions
    in separable form."""
    dd, pp = _gelu_price_integrated_t()
    return {"mean_phi_phi": _from_t(pp), "mean_dphi_dphi": _from_t(dd)}


def _require_equal(a: sp.Expr, b: sp.Expr, what: str) -> None:
    """Raise unless a - b simplifies to zero."""
    if sp.simplify(a - b) != 0:
        raise RuntimeError(f"{what}: the separable form differs from the derived one")


def gelu_dual() -> dict[str, sp.Expr]:
    """The five GELU dual kernels (see the module docstring), Price-integrated and written in separable form.

    The separable pair forms are checked symbolically against :func:`gelu_price_integrated` (in the variables
    K_aa, K_bb, t), the diagonal forms against the pair forms at K_aa = K_bb = K_ab = K, and ``price_diag`` is
    the derivative of ``mean_phi_sq`` (Price's theorem on the diagonal, d<phi^2>/dK = <(phi^2)''>/2).  The
    derivation runs once per process (cached); each call returns a new dict.
    """
    return dict(_gelu_dual())


@cache
def _gelu_dual() -> tuple[tuple[str, sp.Expr], ...]:
    raw_dd, raw_pp = _gelu_price_integrated_t()
    sep_dd, sep_pp = _gelu_separable_t()
    _require_equal(raw_dd, sep_dd, "GELU <phi' phi'>")
    _require_equal(raw_pp, sep_pp, "GELU <phi phi>")

    q = K / (1 + K)  # t on the diagonal
    root = sp.sqrt(1 + 2 * K)
    phi_sq = K / 4 + K * sp.asin(q) / (2 * sp.pi) + K**2 / (sp.pi * (1 + K) * root)
    dphi_sq = sp.Rational(1, 4) + sp.asin(q) / (2 * sp.pi) + K * (5 * K + 3) / (2 * sp.pi * (1 + K) * root**3)
    price = sp.Rational(1, 4) + sp.asin(q) / (2 * sp.pi) + K * (4 * K**2 + 11 * K + 5) / (
        2 * sp.pi * (1 + K) ** 2 * root**3)
    diag = {K_aa: K, K_bb: K}
    _require_equal(sep_pp.subs(diag).subs(_t, q), phi_sq, "GELU <phi^2>")
    _require_equal(sep_dd.subs(diag).subs(_t, q), dphi_sq, "GELU <phi'^2>")
    _require_equal(sp.diff(phi_sq, K), price, "GELU d<phi^2>/dK")
    return (
        ("mean_phi_phi", _from_t(sep_pp)),
        ("mean_dphi_dphi", _from_t(sep_dd)),
        ("mean_phi_sq", phi_sq),
        ("mean_dphi_sq", dphi_sq),
        ("price_diag", price),
    )


# --------------------------------------------------------------------------- exponential type
Complex = tuple[sp.Expr, sp.Expr]


def _as_x_expr(expr: sp.Expr) -> sp.Expr:
    """Use the activation symbol x: a plain Symbol('x') without assumptions is replaced by it."""
    others = [s for s in expr.free_symbols if s.name == x.name and s != x]
    return expr.subs({s: x for s in others})


def _exponential_terms(expr: sp.Expr) -> dict[sp.Expr, sp.Expr] | None:
    """{w: c} with expr = sum c exp(w x), or None if expr is not a finite combination of that form."""
    e = sp.expand(sp.sympify(expr).rewrite(sp.exp))
    terms: dict[sp.Expr, sp.Expr] = defaultdict(lambda: sp.Integer(0))
    for term in sp.Add.make_args(e):
        exponent, coeff = sp.Integer(0), sp.Integer(1)
        for factor in sp.Mul.make_args(term):
            if not factor.has(x):
                coeff *= factor
                continue
            base, power = factor.as_base_exp()
            if isinstance(base, sp.exp):
                arg = base.args[0] * power
            elif not base.has(x):
                arg = power * sp.log(base)
            else:
                return None
            if not arg.is_polynomial(x) or sp.degree(arg, x) > 1:
                return None
            slope = sp.expand(sp.diff(arg, x))
            exponent += slope
            coeff *= sp.exp(sp.expand(arg - slope * x))
        terms[sp.expand(exponent)] += coeff
    out = {w: sp.simplify(c) for w, c in terms.items()}
    out = {w: c for w, c in out.items() if c != 0}
    # phi real on the real line <=> the terms are closed under complex conjugation
    for w, c in out.items():
        wc = sp.conjugate(w)
        partner = next((w2 for w2 in out if _negligible(w2 - wc, w)), None)
        if partner is None or not _negligible(out[partner] - sp.conjugate(c), c):
            return None
    return out


def _negligible(e: sp.Expr, scale: sp.Expr) -> bool:
    """e == 0: exactly, or, for floating-point numbers, to 1e-12 relative to |scale|."""
    e = sp.simplify(sp.expand_complex(e))
    if e == 0:
        return True
    if e.is_number and scale.is_number:
        return abs(complex(e)) <= 1e-12 * max(abs(complex(scale)), 1.0)
    return False


def _re_im(z: sp.Expr) -> Complex:
    re, im = sp.expand_complex(z).as_real_imag()
    return sp.simplify(re), sp.simplify(im)


def _cexp(z: sp.Expr, var: sp.Symbol) -> Complex:
    """exp(z var) for a complex constant z and a real symbol var, as (real part, imaginary part)."""
    p, q = _re_im(z)
    modulus = sp.exp(p * var)
    return modulus * sp.cos(q * var), modulus * sp.sin(q * var)


def _cmul(*zs: Complex) -> Complex:
    re, im = sp.Integer(1), sp.Integer(0)
    for a, b in zs:
        re, im = re * a - im * b, re * b + im * a
    return re, im


def _split_by_symbol(term: sp.Expr, symbols: tuple[sp.Symbol, ...]) -> tuple[sp.Expr, ...]:
    """(constant, factor in symbols[0], factor in symbols[1], ...) of a product whose factors each depend on one
    symbol at most."""
    parts = [sp.Integer(1)] * (len(symbols) + 1)
    for factor in sp.Mul.make_args(term):
        which = [i for i, s in enumerate(symbols) if factor.has(s)]
        if len(which) > 1:
            raise RuntimeError(f"factor {factor} is not separable")
        parts[which[0] + 1 if which else 0] *= factor
    return tuple(parts)


def _combine_pair(coeffs: dict[sp.Expr, sp.Expr], var: sp.Symbol) -> sp.Expr:
    """sum over {g(var): c} with exp(m var) and exp(-m var) combined into cosh(m var) and sinh(m var)."""
    pure: dict[sp.Expr, sp.Expr] = {}
    out = sp.Integer(0)
    for g, c in coeffs.items():
        m = sp.Integer(0) if g == 1 else sp.expand(g.args[0] / var) if isinstance(g, sp.exp) else None
        if m is not None and not m.has(var):
            pure[m] = c
        else:
            out += sp.simplify(c) * g
    done = set()
    for m, c in pure.items():
        if m in done:
            continue
        mirror = sp.expand(-m)
        if m == 0 or mirror not in pure:
            out += sp.simplify(c) * sp.exp(m * var)
            done.add(m)
            continue
        if m.could_extract_minus_sign():
            m, mirror = mirror, m
        alpha, beta = pure[m], pure[mirror]
        even, odd = sp.simplify(alpha + beta), sp.simplify(alpha - beta)
        out += even * sp.cosh(m * var) + odd * sp.sinh(m * var)
        done.update((m, mirror))
    return out


def _pair_kernel(a: dict[sp.Expr, sp.Expr]) -> sp.Expr:
    """<f(u) f(v)> for f = sum_w a[w] exp(w x): real part of sum c_i c_j exp(w_i^2 K_aa/2) exp(w_j^2 K_bb/2)
    exp(w_i w_j K_ab), grouped by the K_aa and K_bb factors."""
    real = sp.Integer(0)
    for wi, ci in a.items():
        for wj, cj in a.items():
            re, _ = _cmul(_re_im(ci * cj), _cexp(wi**2 / 2, K_aa), _cexp(wj**2 / 2, K_bb), _cexp(wi * wj, K_ab))
            real += re
    groups: dict[tuple[sp.Expr, sp.Expr], dict[sp.Expr, sp.Expr]] = defaultdict(
        lambda: defaultdict(lambda: sp.Integer(0)))
    for term in sp.Add.make_args(sp.expand(real, power_exp=False)):
        const, fa, fb, fab = _split_by_symbol(term, (K_aa, K_bb, K_ab))
        groups[(fa, fb)][fab] += const
    out = sp.Integer(0)
    for (fa, fb), coeffs in groups.items():
        inner = _combine_pair(coeffs, K_ab)
        if inner != 0:
            out += sp.Mul(fa, fb, inner)
    return out


def _diag_kernel(a: dict[sp.Expr, sp.Expr]) -> sp.Expr:
    """<f(u)^2> for u ~ N(0, K): real part of sum c_i c_j exp((w_i + w_j)^2 K / 2), collected by function of K."""
    real = sp.Integer(0)
    for wi, ci in a.items():
        for wj, cj in a.items():
            real += _cmul(_re_im(ci * cj), _cexp((wi + wj) ** 2 / 2, K))[0]
    return _collect_diag(real)


def _collect_diag(e: sp.Expr) -> sp.Expr:
    coeffs: dict[sp.Expr, sp.Expr] = defaultdict(lambda: sp.Integer(0))
    for term in sp.Add.make_args(sp.expand(e, power_exp=False)):
        const, fk = _split_by_symbol(term, (K,))
        coeffs[fk] += const
    return sp.Add(*(sp.simplify(c) * g for g, c in coeffs.items()))


def exponential_type_dual(expr: sp.Expr) -> dict[str, sp.Expr] | None:
    """The five dual kernels of a real activation that is a finite combination of exp(w x + c), w, c complex
    (sin, cos, sinh, cosh, exp, sin(a x + b), 2 sin x + cos 3x, ...), in closed form from the characteristic function
    <exp(alpha u + beta v)> = exp((alpha^2 K_aa + 2 alpha beta K_ab + beta^2 K_bb)/2); None for anything else
    (polynomials, x exp(-x^2/2), tanh, ...).  Symbolic parameters should be declared real."""
    expr = _as_x_expr(sp.sympify(expr))
    if not expr.has(x):
        return None
    a = _exponential_terms(expr)
    if not a:
        return None
    da = {w: sp.simplify(w * c) for w, c in a.items() if w != 0}
    phi_sq = _diag_kernel(a)
    zero = sp.Integer(0)
    return {
        "mean_phi_phi": _pair_kernel(a),
        "mean_dphi_dphi": _pair_kernel(da) if da else zero,
        "mean_phi_sq": phi_sq,
        "mean_dphi_sq": _diag_kernel(da) if da else zero,
        "price_diag": _collect_diag(sp.diff(phi_sq, K)),
    }


# --------------------------------------------------------------------------- numerically stable forms
def _real_number(e: sp.Expr) -> sp.Expr | None:
    """e as a real SymPy number/expression (None if its imaginary part is not zero)."""
    re, im = _re_im(sp.sympify(e))
    return re if im == 0 else None


def _stable_pair(a: dict[sp.Expr, sp.Expr]) -> sp.Expr | None:
    """<f(u) f(v)> for f = sum_w a[w] exp(w x) in a form that is finite and loses no digits at large and at tiny
    variances, or None when some exponent is complex (w neither real nor imaginary, or w_i w_j not real).

    With alpha_i = w_i^2 / 2 and gamma_ij = w_i w_j, <f f> = m(K_aa) m(K_bb) + sum_ij c_i c_j exp(alpha_i K_aa +
    alpha_j K_bb) expm1(gamma_ij K_ab), m(K) = <f(u)> = f(0) + sum_i c_i expm1(alpha_i K).  The terms of +-g
    (g = |gamma| > 0) with the same (alpha_i, alpha_j) combine into an even part C_e (expm1(g K_ab) + expm1(-g K_ab))
    = C_e exp(g |K_ab|) expm1(-g |K_ab|)^2 and an odd part C_o sign(K_ab) exp(g |K_ab|) (-expm1(-2 g |K_ab|)); the
    exponential factors are merged into ONE exponent alpha_i K_aa + alpha_j K_bb + g |K_ab| (<= 0 for a bounded f),
    so nothing overflows (e.g. sin^2 at K = 500: exp(-2 K_aa) exp(-2 K_bb) cosh(4 K_ab) is 0 * inf) and nothing
    cancels at K ~ 1e-8 (sin^2: 1/4 - exp(-2 K_aa)/4 - ... is O(K^2) from O(1) terms)."""
    from sympy.codegen.cfunctions import expm1

    alpha: dict[sp.Expr, sp.Expr] = {}
    for w in a:
        al = _real_number(w ** 2 / 2)
        if al is None:
            return None
        alpha[w] = al
    def m(var: sp.Symbol) -> sp.Expr:
        groups: dict[sp.Expr, sp.Expr] = defaultdict(lambda: sp.Integer(0))
        for w, c in a.items():
            groups[alpha[w]] += c
        out = sp.Integer(0)
        const = _real_number(sum(a.values(), sp.Integer(0)))
        if const is None:
            return sp.nan
        out += const
        for al, c in groups.items():
            cr = _real_number(sp.simplify(c))
            if al != 0 and cr != 0:
                if cr is None:
                    return sp.nan
                out += cr * expm1(al * var)
        return out
    ma, mb = m(K_aa), m(K_bb)
    if ma.has(sp.nan) or mb.has(sp.nan):
        return None
    cross: dict[tuple[sp.Expr, sp.Expr, sp.Expr], list] = defaultdict(lambda: [sp.Integer(0), sp.Integer(0)])
    for wi, ci in a.items():
        for wj, cj in a.items():
            gam = _real_number(wi * wj)
            if gam is None:
                return None
            if gam == 0:
                continue
            g = sp.Abs(gam)
            cross[(alpha[wi], alpha[wj], g)][0 if gam > 0 else 1] += ci * cj
    out = ma * mb
    kab = sp.Abs(K_ab)
    for (al_i, al_j, g), (cp, cm) in cross.items():
        even, odd = _real_number(sp.simplify((cp + cm) / 2)), _real_number(sp.simplify((cp - cm) / 2))
        if even is None or odd is None:
            return None
        merged = sp.exp(al_i * K_aa + al_j * K_bb + g * kab)
        if even != 0:
            out += even * merged * expm1(-g * kab) ** 2
        if odd != 0:
            out += -odd * sp.sign(K_ab) * merged * expm1(-2 * g * kab)
    return out


def stable_dual(expr: sp.Expr) -> dict[str, sp.Expr] | None:
    """The dual kernels of :func:`closed_form_dual` for evaluation in float64: for an exponential-type activation
    with real exponents w^2/2 and w_i w_j (sin, cos, sin^2, sin(a x + b), sinh, exp, ...) the forms of
    :func:`_stable_pair` (one merged exponent per term, expm1 where terms cancel at small K; the diagonal the pair
    form at K_aa = K_bb = K_ab = K, price_diag its derivative); otherwise (GELU, complex exponents such as
    exp(x) cos(x)) the forms of :func:`closed_form_dual` with the exponentials of every product merged into one
    (no 0 * inf).  None when there is no closed form.  The same functions as :func:`closed_form_dual` (checked
    against it in tests/test_large_variance_tables.py)."""
    expr = _as_x_expr(sp.sympify(expr))
    forms = closed_form_dual(expr)
    if forms is None:
        return None
    a = None if _is_gelu(expr) else _exponential_terms(expr)
    if a:
        da = {w: sp.simplify(w * c) for w, c in a.items() if w != 0}
        pp = _stable_pair(a)
        dd = _stable_pair(da) if da else sp.Integer(0)
        if pp is not None and dd is not None:
            Kp = sp.Symbol(K.name, positive=True)
            diag = {K_aa: Kp, K_bb: Kp, K_ab: Kp}
            sq = pp.xreplace(diag).subs(Kp, K)
            return {"mean_phi_phi": pp, "mean_dphi_dphi": dd, "mean_phi_sq": sq,
                    "mean_dphi_sq": dd.xreplace(diag).subs(Kp, K) if da else sp.Integer(0),
                    "price_diag": sp.diff(pp.xreplace(diag), Kp).subs(Kp, K)}
    return {k: sp.powsimp(sp.expand(v, power_exp=False), combine="exp") if v.has(sp.exp) else v
            for k, v in forms.items()}


# --------------------------------------------------------------------------- dispatch
def _is_gelu(expr: sp.Expr) -> bool:
    if not expr.has(sp.erf, sp.erfc):
        return False
    return sp.simplify((expr - GELU).rewrite(sp.erf)) == 0


def closed_form_dual(name_or_expr: str | sp.Expr) -> dict[str, sp.Expr] | None:
    """The closed-form dual kernels of an activation given by name (``"gelu"`` or a built-in name of
    :mod:`resprop.derive.activations`) or by an expression in x: :func:`gelu_dual` for GELU,
    :func:`exponential_type_dual` for combinations of exponentials, otherwise None."""
    if isinstance(name_or_expr, str):
        if name_or_expr.strip().lower() == "gelu":
            return gelu_dual()
        if name_or_expr not in BUILTIN_EXPRESSIONS:
            return None
        expr = BUILTIN_EXPRESSIONS[name_or_expr]
    else:
        expr = _as_x_expr(sp.sympify(name_or_expr))
    if _is_gelu(expr):
        return gelu_dual()
    return exponential_type_dual(expr)


__all__ = ["KEYS", "GELU", "GELU_T", "gelu_dual", "gelu_price_integrated", "exponential_type_dual",
           "closed_form_dual", "stable_dual"]
