"""Gaussian expectations of an activation, written symbolically inside a derivation (issue 26, item 3).

A derivation that needs ⟨φ(z)²⟩_q or ⟨φ'(u) φ'(v)⟩ under a 2 × 2 covariance writes them with the activation as a
parameter, an undefined SymPy function ``phi``:

    from resprop.derive.expectation import mean, mean2, phi, z, u, v
    length_map = sigma_w2 * mean(phi(z)**2, q) + sigma_b2                   # Schoenholz et al. (2017), eq. (3)
    chi_1 = sigma_w2 * mean(sp.diff(phi(z), z)**2, q)                      # eq. (7)
    c_map = sigma_w2 * mean2(phi(u) * phi(v), q_a, q_b, q_ab) + sigma_b2   # eq. (5)

:class:`GaussianMean` ⟨f(z)⟩ with z ~ N(0, q) and :class:`GaussianMean2` ⟨f(u, v)⟩ with (u, v) centred Gaussian of
covariance [[K_aa, K_ab], [K_ab, K_bb]] are SymPy functions whose derivatives are Price's theorem (R. Price, IRE
Trans. Inf. Theory 4 (1958) 69; Fischer et al. App. D, eq. D4):

    d⟨f(z)⟩_q / dq = ½ ⟨f''(z)⟩_q,   d⟨f⟩/dK_ab = ⟨∂_u ∂_v f⟩,   d⟨f⟩/dK_aa = ½ ⟨∂_u² f⟩,   d⟨f⟩/dK_bb = ½ ⟨∂_v² f⟩,

so ``sp.diff`` of an expression with expectations in it is again one (χ₁ = d q^{l+1}/d q^l at σ_b fixed is
``sp.diff(length_map, q)``, printed as ⟨φ'² + φ φ''⟩).

:func:`resolve` replaces ``phi`` by a concrete activation and each expectation by, in order: the derived closed
forms of resprop's foundation (erf and ReLU in :mod:`resprop.derive.gaussian`, GELU and exponential types in
:mod:`resprop.derive.closed_forms`), what SymPy integrates exactly (polynomials, exponentials, sin/cos, ReLU
pieces), and otherwise a :class:`TabulatedMean` / :class:`TabulatedMean2` node that the kernel printer emits as a
call of the engine's certified quadrature (``resprop.generated.gauss_hermite.expect1`` / ``expect2``, the same rules
behind the tabulated dual kernels of any activation).  :func:`per_activation` adds one generated kernel per
activation to a derivation.
"""
from __future__ import annotations

import sympy as sp

from resprop.derive import activations

#: the activation inside a derivation: an undefined function, replaced by :func:`resolve`
phi = sp.Function("phi")
#: the integration variables: z ~ N(0, q); (u, v) ~ N(0, [[K_aa, K_ab], [K_ab, K_bb]])
z, u, v = sp.symbols("z u v", real=True)
_x = activations.x

#: functions SymPy integrates against a Gaussian exactly and quickly (anything else goes to the quadrature)
_INTEGRABLE = (sp.exp, sp.sin, sp.cos, sp.sinh, sp.cosh, sp.Max, sp.Min, sp.Heaviside, sp.DiracDelta, sp.Piecewise,
               sp.Abs, sp.sign)


class GaussianMean(sp.Function):
    """⟨f(z)⟩ for z ~ N(0, q): ``GaussianMean(Lambda(z, f), q)``; build it with :func:`mean`."""

    nargs = 2
    #: a number: it commutes (SymPy would infer None from the Lambda argument and treat the node as an operator,
    #: so that solve returns [] and linsolve raises on expressions holding it)
    is_commutative = True

    @classmethod
    def eval(cls, f, q):
        if isinstance(f, sp.Lambda) and not f.expr.has(f.variables[0]):
            return f.expr  # the mean of a constant

    def fdiff(self, argindex=2):
        if argindex != 2:
            raise sp.ArgumentIndexError(self, argindex)
        f, q = self.args
        (w,) = f.variables
        return type(self)(sp.Lambda(w, sp.diff(f.expr, w, 2) / 2), q)  # Price: d<f>/dq = <f''>/2

    def _latex(self, printer, exp=None):
        f, q = self.args
        body = printer._print(f.expr)
        out = rf"\left\langle {body} \right\rangle_{{{printer._print(q)}}}"
        return out if exp is None else rf"{out}^{{{exp}}}"

    def _sympystr(self, printer):
        return f"<{printer._print(self.args[0].expr)}>_{printer._print(self.args[1])}"


class GaussianMean2(sp.Function):
    """⟨f(u, v)⟩ for (u, v) ~ N(0, [[K_aa, K_ab], [K_ab, K_bb]]): ``GaussianMean2(Lambda((u, v), f), K_aa, K_bb,
    K_ab)``; build it with :func:`mean2`."""

    nargs = 4
    is_commutative = True

    @classmethod
    def eval(cls, f, K_aa, K_bb, K_ab):
        if isinstance(f, sp.Lambda) and not f.expr.has(*f.variables):
            return f.expr

    def fdiff(self, argindex=4):
        f, K_aa, K_bb, K_ab = self.args
        a, b = f.variables
        if argindex == 2:
            g = sp.diff(f.expr, a, 2) / 2
        elif argindex == 3:
            g = sp.diff(f.expr, b, 2) / 2
        elif argindex == 4:
            g = sp.diff(f.expr, a, b)
        else:
            raise sp.ArgumentIndexError(self, argindex)
        return type(self)(sp.Lambda((a, b), g), K_aa, K_bb, K_ab)

    def _latex(self, printer, exp=None):
        f = self.args[0]
        out = rf"\left\langle {printer._print(f.expr)} \right\rangle"
        return out if exp is None else rf"{out}^{{{exp}}}"

    def _sympystr(self, printer):
        return f"<{printer._print(self.args[0].expr)}>_({', '.join(map(printer._print, self.args[1:]))})"


class TabulatedMean(sp.Function):
    """An expectation no closed form was found for, with the activation substituted: printed as a call of the
    engine's quadrature ``resprop.generated.gauss_hermite.expect1(lambda z: f(z), q)``."""

    nargs = 2
    is_commutative = True

    def _numpycode(self, printer):
        f, q = self.args
        (w,) = f.variables
        body = printer._print(f.expr)
        return f"resprop.generated.gauss_hermite.expect1(lambda {printer._print(w)}: {body}, {printer._print(q)})"

    def _mpmathcode(self, printer):
        """mpmath's quadrature of the same integral (an independent route for tests: ``lambdify(..., "mpmath")``,
        whose namespace holds mpmath's names unqualified)."""
        f, q = self.args
        (w,) = f.variables
        body, var = printer._print(f.expr), printer._print(q)
        return (f"quad(lambda _t: (lambda {printer._print(w)}: {body})(sqrt({var}) * _t) * "
                f"npdf(_t), [-inf, 0, inf])")

    _latex = GaussianMean._latex
    _sympystr = GaussianMean._sympystr


class TabulatedMean2(sp.Function):
    """⟨a(u) b(v)⟩ without a closed form: ``resprop.generated.gauss_hermite.expect2(lambda u: a, lambda v: b, K_aa,
    K_bb, K_ab)`` (one separable term; :func:`resolve` splits a sum into such terms)."""

    nargs = 4
    is_commutative = True

    def _numpycode(self, printer):
        f, K_aa, K_bb, K_ab = self.args
        a, b = f.variables
        left, right = _separate(f.expr, a, b)
        ks = ", ".join(printer._print(k) for k in (K_aa, K_bb, K_ab))
        return (f"resprop.generated.gauss_hermite.expect2(lambda {printer._print(a)}: {printer._print(left)}, "
                f"lambda {printer._print(b)}: {printer._print(right)}, {ks})")

    def _mpmathcode(self, printer):
        """mpmath's 2-D quadrature of the same integral, u = sqrt(K_aa) t1, v = K_ab / sqrt(K_aa) t1 +
        sqrt(K_bb - K_ab^2 / K_aa) t2 (an independent route for tests)."""
        f, K_aa, K_bb, K_ab = self.args
        a, b = f.variables
        ka, kb, kab = (printer._print(k) for k in (K_aa, K_bb, K_ab))
        body = printer._print(f.expr)
        return (f"quad(lambda _t1, _t2: (lambda {printer._print(a)}, {printer._print(b)}: {body})("
                f"sqrt({ka}) * _t1, ({kab}) / sqrt({ka}) * _t1 + "
                f"sqrt(mpf({kb}) - ({kab})**2 / ({ka})) * _t2) * npdf(_t1) * npdf(_t2), "
                f"[-inf, 0, inf], [-inf, 0, inf])")

    _latex = GaussianMean2._latex
    _sympystr = GaussianMean2._sympystr


def _expression(name: str, value) -> sp.Expr:
    try:
        out = sp.sympify(value, strict=not isinstance(value, str))
    except (sp.SympifyError, TypeError, SyntaxError) as exc:
        raise ValueError(f"{name}: must be a SymPy expression, got {value!r} ({type(exc).__name__})") from None
    if not isinstance(out, sp.Expr):
        raise ValueError(f"{name}: must be a SymPy expression, got {value!r}")
    return out


def _variance(name: str, value, positive: bool = False) -> sp.Expr:
    out = _expression(name, value)
    if out.is_extended_real is False or out.is_negative or (positive and out.is_zero) or out.has(sp.nan, sp.zoo):
        raise ValueError(f"{name}: a variance must be {'> 0' if positive else '>= 0'} and real, got {value!r}")
    return out


def mean(f: sp.Expr, q: sp.Expr, variable: sp.Symbol = z) -> sp.Expr:
    """⟨f⟩ with ``variable`` ~ N(0, q) (``f`` may contain ``phi(variable)`` and its derivatives); a ValueError
    naming ``q`` for a variance that is negative or not real, naming ``f`` for what is not an expression."""
    return GaussianMean(sp.Lambda(z, _expression("f", f).xreplace({variable: z})), _variance("q", q))


def mean2(f: sp.Expr, K_aa: sp.Expr, K_bb: sp.Expr, K_ab: sp.Expr, variables=(u, v)) -> sp.Expr:
    """⟨f⟩ with ``variables`` = (u, v) centred Gaussian of covariance [[K_aa, K_ab], [K_ab, K_bb]]; a ValueError
    naming the entry of a covariance that cannot be one (a negative variance, |K_ab| > sqrt(K_aa K_bb) where
    that is decidable)."""
    a, b = variables
    K_aa, K_bb = _variance("K_aa", K_aa, positive=True), _variance("K_bb", K_bb, positive=True)
    K_ab = _expression("K_ab", K_ab)
    if (K_ab**2 - K_aa * K_bb).is_positive or K_ab.is_extended_real is False:
        raise ValueError(f"K_ab: must satisfy |K_ab| <= sqrt(K_aa K_bb), got K_ab = {K_ab} with K_aa = {K_aa}, "
                         f"K_bb = {K_bb}")
    return GaussianMean2(sp.Lambda((u, v), _expression("f", f).xreplace({a: u, b: v})), K_aa, K_bb, K_ab)


# --------------------------------------------------------------------------- resolution
def activation_of(activation: str | sp.Expr) -> sp.Expr:
    """The activation as an expression in ``resprop.derive.activations.x`` (a built-in name or an expression)."""
    if isinstance(activation, str) and activation in activations.KNOWN:
        return activations.activation_expr(activation)
    expr = _expression("activation", activation)
    if expr.has(_x):  # an expression in resprop's x; other symbols are the activation's parameters (slopes, ...)
        return expr
    free = expr.free_symbols
    if len(free) > 1:
        raise ValueError(f"activation: must be an expression in one variable (or in resprop.derive.activations.x "
                         f"with parameters), got {activation!r}")
    return expr.xreplace({s: _x for s in free})


def _substitute(f: sp.Expr, act: sp.Expr) -> sp.Expr:
    return f.subs(phi, sp.Lambda(_x, act)).doit()


def _separate(f: sp.Expr, a: sp.Symbol, b: sp.Symbol) -> tuple[sp.Expr, sp.Expr]:
    """f = left(a) * right(b) for one product term (a ValueError when f is not separable)."""
    left, right = sp.Integer(1), sp.Integer(1)
    for factor in sp.Mul.make_args(f):
        if factor.has(a) and factor.has(b):
            raise ValueError(f"not separable in {a}, {b}: {f}")
        if factor.has(b):
            right *= factor
        else:
            left *= factor
    return left, right


def _foundation_duals(act: sp.Expr) -> dict[str, sp.Expr] | None:
    """The foundation's derived closed forms of ``act`` (keys of closed_forms.KEYS, in gaussian.K_aa, K_bb, K_ab
    and K), or None."""
    from resprop.derive import closed_forms, gaussian

    if act == activations.activation_expr("erf"):
        return {"mean_phi_phi": gaussian.erf_mean_phi_phi(), "mean_dphi_dphi": gaussian.erf_mean_dphi_dphi(),
                "mean_phi_sq": gaussian.erf_mean_phi_sq(), "price_diag": gaussian.erf_price_diag(),
                "mean_dphi_sq": gaussian.erf_mean_dphi_dphi().subs({gaussian.K_aa: gaussian.K,
                                                                     gaussian.K_bb: gaussian.K,
                                                                     gaussian.K_ab: gaussian.K})}
    if act == activations.activation_expr("relu"):  # the arc-cosine kernels of degree 1 and 0 (Cho & Saul 2009)
        return {"mean_phi_phi": gaussian._relu_kernel(1), "mean_dphi_dphi": gaussian._relu_kernel(0),
                "mean_phi_sq": gaussian.K / 2, "mean_dphi_sq": sp.Rational(1, 2), "price_diag": sp.Rational(1, 2),
}
    try:
        return closed_forms.closed_form_dual(act)
    except Exception:  # noqa: BLE001 - no closed form: the other routes decide
        return None


def _dual_patterns(w: sp.Symbol) -> dict[str, sp.Expr]:
    d1, d2 = sp.diff(phi(w), w), sp.diff(phi(w), w, 2)
    return {"mean_phi_sq": phi(w) ** 2, "mean_dphi_sq": d1 ** 2, "price_diag": d1 ** 2 + phi(w) * d2}


def _exact(value: sp.Expr) -> bool:
    """SymPy's integral came out in closed form: no unevaluated Integral, no infinity or NaN."""
    return not (value.has(sp.Integral) or value.has(sp.oo, -sp.oo, sp.zoo, sp.nan))


def _integrable(g: sp.Expr) -> bool:
    funcs = {type(f) for f in g.atoms(sp.Function)} | {type(f) for f in g.atoms(sp.Max, sp.Min, sp.Heaviside)}
    allowed = {f if isinstance(f, type) else type(f) for f in _INTEGRABLE}
    return all(any(issubclass(f, a) for a in allowed) for f in funcs)


def _integrate1(g: sp.Expr, w: sp.Symbol, q: sp.Expr) -> sp.Expr | None:
    """⟨g(w)⟩, w ~ N(0, q), by exact integration, or None."""
    if not _integrable(g):
        return None
    s = sp.Symbol("s", positive=True)  # s^2 = q
    t = sp.Symbol("t", real=True)
    exact = _integrate_halves(g, w, s)
    if exact is not None:
        return sp.simplify(exact.xreplace({s: sp.sqrt(q)}))
    g = g.xreplace({w: s * t})
    if not g.has(sp.DiracDelta):  # (a point mass rewritten as a Piecewise would integrate to 0)
        g = sp.piecewise_fold(g.rewrite(sp.Piecewise))
    integrand = g * sp.exp(-t**2 / 2) / sp.sqrt(2 * sp.pi)
    try:
        value = sp.integrate(integrand, (t, -sp.oo, sp.oo), conds="none")
    except Exception:  # noqa: BLE001 - SymPy gives up in many ways: fall back to the quadrature
        return None
    if not _exact(value):
        return None
    return sp.simplify(value.xreplace({s: sp.sqrt(q)}))


_KINKED = (sp.Max, sp.Min, sp.Heaviside, sp.Abs, sp.sign, sp.Piecewise)


def _integrate_halves(g: sp.Expr, w: sp.Symbol, s: sp.Symbol) -> sp.Expr | None:
    """⟨g(w)⟩ over the two half-lines w = +s t and w = -s t, t > 0, where every kink of g is at 0 (ReLU, leaky
    ReLU, |x|, ...): with the sign of w known, max/min/Heaviside evaluate themselves and each half is a smooth
    integral (much faster than SymPy's Piecewise integration); None where a kink is elsewhere or there is a
    point mass."""
    if not g.has(*_KINKED) or g.has(sp.DiracDelta):
        return None
    t = sp.Symbol("t", positive=True)
    halves = [g.xreplace({w: s * t}), g.xreplace({w: -s * t})]
    if any(h.has(*_KINKED) for h in halves):
        return None
    density = sp.exp(-t**2 / 2) / sp.sqrt(2 * sp.pi)
    try:
        value = sum(sp.integrate(sp.expand(h) * density, (t, 0, sp.oo), conds="none") for h in halves)
    except Exception:  # noqa: BLE001 - fall back to the general route
        return None
    if not _exact(value):
        return None
    return value


def _sift(term: sp.Expr, w: sp.Symbol, q: sp.Expr) -> sp.Expr | None:
    """⟨term⟩ for a term with a point mass DiracDelta(w) times a function smooth at 0 (exactly, by sifting)."""
    s = sp.Symbol("s", positive=True)
    t = sp.Symbol("t", real=True)
    try:
        value = sp.integrate(term.xreplace({w: s * t}) * sp.exp(-t**2 / 2) / sp.sqrt(2 * sp.pi), (t, -sp.oo, sp.oo),
                             conds="none")
    except Exception:  # noqa: BLE001
        return None
    if not _exact(value) or value.has(sp.DiracDelta):
        return None
    return sp.simplify(value.xreplace({s: sp.sqrt(q)}))


def _resolve1(node: GaussianMean, act: sp.Expr, duals) -> sp.Expr:
    from resprop.derive import gaussian

    f, q = node.args
    (w,) = f.variables
    if duals is not None:
        for key, pattern in _dual_patterns(w).items():
            if key in duals and sp.simplify(sp.expand(f.expr - pattern)) == 0:
                return duals[key].xreplace({gaussian.K: q})
    raw = _substitute(f.expr, act)
    g = sp.expand(raw)
    exact = _integrate1(g, w, q)
    if exact is not None:
        return exact
    if not g.has(sp.DiracDelta):  # the quadrature of the integrand as derived: expanding (1 - tanh^2)^2 into
        return TabulatedMean(sp.Lambda(w, raw), q)  # powers would cancel digits at large variance
    # term by term: a point mass (the second derivative of a kink) sifts exactly; the rest may need the quadrature
    point_masses = [term for term in sp.Add.make_args(g) if term.has(sp.DiracDelta)]
    rest = sp.Add(*(term for term in sp.Add.make_args(g) if not term.has(sp.DiracDelta)))
    out = sp.Integer(0)
    for term in point_masses:
        value = _sift(term, w, q)
        if value is None:
            raise ValueError(f"activation: <{term}> for phi = {act} has a point mass that neither sifting nor the "
                             "quadrature can take; give the activation a closed form or write the expectation "
                             "without it")
        out += value
    if rest != 0:
        exact = _integrate1(rest, w, q)
        out += exact if exact is not None else TabulatedMean(sp.Lambda(w, rest), q)
    return out


def _resolve2(node: GaussianMean2, act: sp.Expr, duals) -> sp.Expr:
    from resprop.derive import gaussian

    f, K_aa, K_bb, K_ab = node.args
    a, b = f.variables
    ks = {gaussian.K_aa: K_aa, gaussian.K_bb: K_bb, gaussian.K_ab: K_ab}
    if duals is not None:
        patterns = {"mean_phi_phi": phi(a) * phi(b),
                    "mean_dphi_dphi": sp.diff(phi(a), a) * sp.diff(phi(b), b)}
        for key, pattern in patterns.items():
            if key in duals and sp.expand(f.expr - pattern) == 0:
                return duals[key].xreplace(ks)
    raw = _substitute(f.expr, act)
    g = sp.expand(raw)
    if g.is_polynomial(a, b):
        return gaussian.polynomial_expectation(g, (a, b), K_aa, K_bb, K_ab)
    try:  # one product a(u) b(v) as derived, (1 - tanh(u)^2)(1 - tanh(v)^2), is one quadrature, not four
        _separate(raw, a, b)
        terms: tuple = (raw,)
    except ValueError:
        terms = sp.Add.make_args(g)
    out = sp.Integer(0)
    for term in terms:
        left, right = _separate(term, a, b)
        coeff, left = left.as_independent(a, as_Add=False)
        coeff2, right = right.as_independent(b, as_Add=False)
        if not left.has(a) or not right.has(b):  # a one-point mean times a constant or another one-point mean
            m_left = _resolve1(GaussianMean(sp.Lambda(a, left), K_aa), _x, None) if left.has(a) else left
            m_right = _resolve1(GaussianMean(sp.Lambda(b, right), K_bb), _x, None) if right.has(b) else right
            out += coeff * coeff2 * m_left * m_right
        else:
            out += coeff * coeff2 * TabulatedMean2(sp.Lambda((a, b), left * right), K_aa, K_bb, K_ab)
    return out


def resolve(expr: sp.Expr, activation: str | sp.Expr) -> sp.Expr:
    """``expr`` with ``phi`` = ``activation`` and every :class:`GaussianMean` / :class:`GaussianMean2` replaced by a
    closed form (derived, or integrated by SymPy) or by a :class:`TabulatedMean` / :class:`TabulatedMean2` node
    (the engine's quadrature in generated code).  Inner expectations are resolved first."""
    act = activation_of(activation)
    duals = _foundation_duals(act)
    expr = _expression("expr", expr)

    def walk(e):
        if not e.args or not e.has(GaussianMean, GaussianMean2, phi):
            return e
        if isinstance(e, GaussianMean):
            return _resolve1(type(e)(e.args[0], walk(e.args[1])), act, duals)
        if isinstance(e, GaussianMean2):
            return _resolve2(type(e)(e.args[0], *(walk(k) for k in e.args[1:])), act, duals)
        return e.func(*(walk(a) for a in e.args))

    out = walk(expr)
    if out.has(phi):
        out = _substitute(out, act)
    return out


def per_activation(add, name: str, expr: sp.Expr, args, equation: str, paper_symbol: str, tex: str,
                   activations_: tuple[str, ...], statement: str = "", **kwargs) -> list[str]:
    """Add one result per activation to a derivation (``add`` = ``Derivation.adder(...)``): ``{name}_{activation}``
    is ``expr`` resolved for that activation; returns the names added."""
    names = []
    for act in activations_:
        label = f"{name}_{act}"
        add(label, resolve(expr, act), args, equation, paper_symbol, tex,
            statement=(statement + f" ({act})") if statement else f"{name} for phi = {act}", **kwargs)
        names.append(label)
    return names


__all__ = ["phi", "z", "u", "v", "GaussianMean", "GaussianMean2", "TabulatedMean", "TabulatedMean2", "mean",
           "mean2", "resolve", "per_activation", "activation_of"]
