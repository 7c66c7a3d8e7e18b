"""The one check of a user's activation (a SymPy expression in x), and its classification.

:func:`check_activation` is called by every entry point that takes an activation as text or as a SymPy
expression (``resprop.kernel`` through ``residual_kernel.recursions``, ``expectations.kernels`` /
``activation_expression`` and ``dual_tables.activation``).  It parses the text safely, checks that phi is a real,
finite, measurable function of x alone whose Gaussian expectations exist, and classifies it:

* ``smooth``: no breakpoints (tanh, sin(x), x*exp(-x**2/2), ...): the Hermite / Gauss--Hermite routes;
* ``piecewise``: Abs, Max, Min, sign, Heaviside, Piecewise, floor, ceiling, frac (anything SymPy rewrites to a
  Piecewise, ``expr.rewrite(Piecewise)`` + ``piecewise_fold``), with smooth pieces between known breakpoints.
  The breakpoints are the real solutions of each condition's boundary (``solveset``); for floor(a x + b),
  ceiling and frac they are the lattice (n - b) / a, n integer (infinitely many).  At each breakpoint the left
  and right pieces are compared: a *jump* (sign, Heaviside, floor) makes phi' contain a Dirac delta, so
  E[phi'(u) phi'(v)] is infinite and the NTK does not exist; a *kink* (abs, Max(x, 0)) leaves phi' a step.

Every refusal is a :class:`ParameterError` naming ``activation`` and why.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import sympy as sp
from sympy.calculus.util import continuous_domain
from sympy.core.function import AppliedUndef

from resprop.derive.activations import BUILTIN_EXPRESSIONS, KNOWN
from resprop.derive.activations import x as X
from resprop.numeric.engine.validation import ParameterError

#: longest activation text accepted
MAX_TEXT = 2000
#: |phi(x)| for |x| <= 1 above which phi^2 overflows float64 (E[phi^2] ~ phi^2)
MAX_SCALE = 1e150
#: exp(c x^2)-like growth: refused when log|phi(x)| / x^2 > GROWTH_C at |x| = 10 GROWTH_AT and is not falling
#: (>= 0.9 times its value at GROWTH_AT; exp(x) falls by 10)
GROWTH_AT = 10**4
GROWTH_C = 1e-6
#: the functions rewritten to Piecewise
_PIECEWISE_FUNCS = (sp.Abs, sp.Max, sp.Min, sp.sign, sp.Heaviside)
#: unevaluated objects refused after ``doit``
_UNEVALUATED = (sp.Integral, sp.Derivative, sp.Sum, sp.Product, sp.Limit)


def _refuse(why: str) -> ParameterError:
    return ParameterError("activation", why)


@dataclass(frozen=True)
class CheckedActivation:
    """A checked activation.  ``kind`` is ``"smooth"`` or ``"piecewise"``; for a piecewise one ``pw`` is the
    expression with Abs/Max/Min/sign/Heaviside rewritten to Piecewise and ceiling/frac to floor, ``breakpoints``
    its finite breakpoints and ``lattices`` the (period, offset) of floor's infinitely many ones; ``jumps`` the
    breakpoints (a sample for lattices) where phi is discontinuous; ``relu`` is True for an expression equal to
    max(x, 0); ``polynomial`` is True when every piece is a polynomial in x."""

    expr: sp.Expr
    kind: str
    pw: sp.Expr
    breakpoints: tuple[float, ...] = ()
    lattices: tuple[tuple[float, float], ...] = ()
    jumps: tuple[float, ...] = ()
    relu: bool = False
    polynomial: bool = True

    @property
    def piecewise(self) -> bool:
        return self.kind == "piecewise"

    @property
    def discontinuous(self) -> bool:
        return bool(self.jumps)

    def breakpoints_in(self, lo: float, hi: float) -> np.ndarray:
        """The sorted breakpoints in [lo, hi] (the finite ones and the lattice points there)."""
        pts = [t for t in self.breakpoints if lo <= t <= hi]
        for period, offset in self.lattices:
            n0, n1 = math.ceil((lo - offset) / period), math.floor((hi - offset) / period)
            if n1 - n0 > 10**6:
                raise _refuse(f"{self.expr} has more than 10^6 breakpoints in [{lo:g}, {hi:g}]")
            pts.extend((offset + period * np.arange(n0, n1 + 1)).tolist())
        return _dedupe(np.array(sorted(pts), dtype=float))

    def piece(self, at: float) -> sp.Expr:
        """The smooth expression equal to phi on the open interval between breakpoints that contains ``at``."""
        return _piece(self.pw, at)

    def require_finite_dphi(self) -> None:
        """ParameterError unless E[phi'(u) phi'(v)] is finite (no jump of phi)."""
        if self.jumps:
            t = self.jumps[0]
            where = f"x = {_show(t)}" + (" (and every breakpoint of the lattice)" if self.lattices else "")
            raise _refuse(f"phi' of {self.expr} contains a Dirac delta at {where}: E[phi'(u) phi'(v)] is infinite, "
                          "so the NTK (and every quantity built on phi') does not exist for a discontinuous "
                          "activation; its NNGP (ntk=False) is available")


def _show(t: float) -> str:
    return f"{t:.12g}"


def _dedupe(pts: np.ndarray) -> np.ndarray:
    if pts.size < 2:
        return pts
    keep = np.concatenate([[True], np.diff(pts) > 1e-12 * np.maximum(1.0, np.abs(pts[1:]))])
    return pts[keep]


# --------------------------------------------------------------------------- parsing
def _guard_powers(text: str) -> None:
    """Refuse numeric powers too large to evaluate (sympify would compute 9**9**9 exactly)."""
    try:
        raw = sp.parse_expr(text, local_dict={"x": X}, evaluate=False)
    except Exception:  # noqa: BLE001  (reported by sympify below)
        return
    if not isinstance(raw, sp.Basic):
        return
    for node in sp.preorder_traversal(raw):
        if isinstance(node, sp.Pow) and node.base.is_number and node.exp.is_number:
            try:
                e = abs(complex(sp.N(node.exp, 15)))
                b = abs(complex(sp.N(node.base, 15)))
            except Exception:  # noqa: BLE001
                continue
            if b > 0 and b != 1 and e * abs(math.log2(b)) > 1e5:
                raise _refuse(f"the number {node} in {text!r} is too large to evaluate")


def parse(activation) -> sp.Expr:
    """The SymPy expression in ``resprop.derive.activations.x`` of a name, a text or an expression."""
    if isinstance(activation, str):
        text = activation.strip()
        if text in BUILTIN_EXPRESSIONS:
            return BUILTIN_EXPRESSIONS[text]
        if not text:
            raise _refuse("is empty; give a name (" + ", ".join(KNOWN) + ") or a SymPy expression in x")
        if len(text) > MAX_TEXT:
            raise _refuse(f"expression is longer than {MAX_TEXT} characters")
        if "__" in text:  # sympify evaluates its input: no dunder access from a user string
            raise _refuse(f"not a SymPy expression in x: {text!r}")
        _guard_powers(text)
        try:
            expr = sp.sympify(text, locals={"x": X})
        except Exception as exc:  # noqa: BLE001  (SympifyError, SyntaxError, TokenError, TypeError, ...)
            raise _refuse(f"cannot parse {text!r} as a SymPy expression in x ({type(exc).__name__}); allowed: "
                          f"{', '.join(KNOWN)} or a SymPy expression in x") from None
    elif isinstance(activation, sp.Basic):
        expr = activation
    else:
        raise _refuse(f"must be a name ({', '.join(KNOWN)}) or a SymPy expression in x, got {activation!r}")
    if not isinstance(expr, sp.Expr) or isinstance(expr, sp.Tuple):
        raise _refuse(f"must be a SymPy expression in x (a function of x), got {expr!r} "
                      f"({type(expr).__name__}); allowed: {', '.join(KNOWN)} or an expression such as sin(x)")
    plain = [s for s in expr.free_symbols if s.name == "x" and s != X]
    if plain:
        expr = expr.subs({s: X for s in plain})
    return expr


# --------------------------------------------------------------------------- checks
def check_activation(activation) -> CheckedActivation:
    """Check and classify an activation (a built-in name, a text or a SymPy expression in x); cached.

    Refuses with a ParameterError naming ``activation``: unparsable text or dunder access; anything that is not
    an expression in x alone; complex values for real x (I*x, x + I, sqrt(x), log(x)); non-finite values (zoo,
    nan, oo, 1/x); an Integral/Derivative/Sum SymPy cannot evaluate; an undefined function; a DiracDelta
    (a distribution, not a function); breakpoints SymPy cannot locate or infinitely many outside a lattice;
    exp(c x^2)-like growth (log|phi(x)| / x^2 > 1e-6 at |x| = 1e4: Gaussian expectations infinite at the
    variances used); |phi| > 1e150 on [-1, 1] (phi^2 overflows float64)."""
    expr = parse(activation)
    return _check(cache_key(expr))


@functools.lru_cache(maxsize=1024)
def cache_key(expr: sp.Basic) -> str:
    """``sp.srepr(expr)``, the key of the activation caches, printed once per expression: the engine asks for it
    per layer, and SymPy's printer allocates (and its caches keep) ~1 KiB a call."""
    return sp.srepr(expr)


@functools.lru_cache(maxsize=256)
def _check(key: str) -> CheckedActivation:
    expr = sp.sympify(key)
    if expr.has(*_UNEVALUATED):
        try:
            expr = expr.doit()
        except Exception:  # noqa: BLE001
            pass
        if expr.has(*_UNEVALUATED):
            kinds = sorted({type(a).__name__ for a in expr.atoms(*_UNEVALUATED)})
            raise _refuse(f"{expr} contains an unevaluated {', '.join(kinds)} that SymPy cannot evaluate; give "
                          "phi explicitly")
    undefined = expr.atoms(AppliedUndef)
    if undefined:
        raise _refuse(f"{expr} contains the undefined function(s) {', '.join(sorted(map(str, undefined)))}")
    if expr.has(sp.zoo, sp.nan, sp.oo, -sp.oo, sp.AccumBounds):
        raise _refuse(f"{expr} is not finite (it contains zoo, nan or oo)")
    others = expr.free_symbols - {X}
    if others:
        raise _refuse(f"expression must depend on x only, got the symbol(s) {', '.join(sorted(map(str, others)))}")
    if X not in expr.free_symbols:
        raise _refuse(f"expression must depend on x (got the constant {expr})")
    if expr.has(sp.DiracDelta):
        raise _refuse(f"{expr} contains a DiracDelta: a distribution, not a function of x")
    if expr.has(sp.I) and expr.is_real is False:
        raise _refuse(f"{expr} is not real for real x (it has a nonzero imaginary part)")
    pw = _rewrite(expr)
    if not pw.has(sp.Piecewise, sp.floor):
        _check_smooth(expr)
        _check_values(expr, pw)
        return CheckedActivation(expr=expr, kind="smooth", pw=expr)
    out = _classify(expr, pw)
    _check_values(expr, pw)
    return out


def _rewrite(expr: sp.Expr) -> sp.Expr:
    pw = expr
    for f in _PIECEWISE_FUNCS:
        if pw.has(f):
            pw = pw.rewrite(f, sp.Piecewise)
    pw = pw.replace(lambda e: isinstance(e, sp.ceiling), lambda e: -sp.floor(-e.args[0]))
    pw = pw.replace(lambda e: isinstance(e, sp.frac), lambda e: e.args[0] - sp.floor(e.args[0]))
    if pw.has(sp.Piecewise):
        pw = sp.piecewise_fold(pw)
    return pw


def _check_smooth(e: sp.Expr, lo=-sp.oo, hi=sp.oo, what: str = "") -> None:
    """phi real and continuous on [lo, hi] (closed at finite ends), by SymPy's continuous_domain."""
    domain = sp.Interval(lo, hi)
    try:
        cont = continuous_domain(e, X, domain)
    except Exception:  # noqa: BLE001  (NotImplementedError for functions SymPy cannot analyse)
        return  # the numeric probe below and the routes' own checks decide
    if cont != domain:
        gap = domain - cont
        raise _refuse(f"{e}{what} is not real and finite for every real x: it is singular or complex for x in "
                      f"{gap} (e.g. sqrt(x), log(x) or 1/x); wrap it, e.g. sqrt(Abs(x)) or log(1 + x**2)")


def _probe_points() -> list[sp.Expr]:
    return [sp.Rational(p) for p in ("-7.3", "-2.1", "-1", "-0.37", "0", "0.29", "1", "1.9", "6.1")]


def _value(e: sp.Expr, at: sp.Expr) -> complex | None:
    try:
        v = complex(sp.N(e.subs(X, at), 20))
    except Exception:  # noqa: BLE001  (a value SymPy cannot reduce to a number)
        return None
    return v


def _check_values(expr: sp.Expr, pw: sp.Expr) -> None:
    """Real and finite at sample points, not too large on [-1, 1], no exp(c x^2) growth."""
    for at in _probe_points():
        v = _value(pw, at)
        if v is None:
            continue
        if not (math.isfinite(v.real) and math.isfinite(v.imag)):
            raise _refuse(f"{expr} is not finite at x = {at}")
        if abs(v.imag) > 1e-12 * max(1.0, abs(v.real)):
            raise _refuse(f"{expr} is not real for real x: phi({at}) = {v:.6g}")
        if abs(at) <= 1 and abs(v.real) > MAX_SCALE:
            raise _refuse(f"{_brief(expr)} is too large for float64: phi({at}) = {v.real:.3g}, so E[phi^2] ~ "
                          f"{v.real ** 2 if abs(v.real) < 1e154 else float('inf'):.3g} overflows (|phi| must "
                          f"stay below {MAX_SCALE:g} on [-1, 1])")
    # growth class from two far points: log|phi(x)| / x^2 constant for exp(c x^2), falling like 1/x for exp(x)
    far = pw.replace(lambda e: isinstance(e, sp.floor), lambda e: e.args[0])  # same growth class
    for sgn in (1, -1):
        cs = []
        for at in (sgn * GROWTH_AT, sgn * 10 * GROWTH_AT):
            piece = _piece(far, float(at)) if far.has(sp.Piecewise) else far
            try:
                logabs = sp.N(sp.log(sp.Abs(piece.subs(X, at))), 15)
                cs.append(float(logabs) / at**2 if logabs.is_finite else None)
            except Exception:  # noqa: BLE001  (growth SymPy cannot evaluate: left to the routes' checks)
                cs.append(None)
        c1, c2 = cs
        if c1 is not None and c2 is not None and c2 > GROWTH_C and c2 >= 0.9 * c1:
            raise _refuse(f"{_brief(expr)} grows like exp({c2:.3g} x^2) (log|phi(x)| / x^2 = {c2:.3g} at "
                          f"|x| = {10 * GROWTH_AT}): its Gaussian expectations are infinite for variances >= "
                          f"{1 / (4 * c2):.3g}")


def _brief(e: sp.Expr) -> str:
    text = sp.sstr(e)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------------------- piecewise classification
def _piece(pw: sp.Expr, at: float) -> sp.Expr:
    """pw with every Piecewise replaced by its branch at x = ``at`` and every floor(g) by floor(g(at))."""
    def branch(p: sp.Piecewise) -> sp.Expr:
        for e, c in p.args:
            cond = c.subs(X, at) if isinstance(c, sp.Basic) else c
            if cond == sp.true or cond is True:
                return e
        raise _refuse(f"{p} is undefined at x = {at:g} (no condition holds)")

    out = pw
    while out.has(sp.Piecewise):
        out = out.replace(lambda e: isinstance(e, sp.Piecewise) and not any(
            a.has(sp.Piecewise) for a in e.args), branch)
    return out.replace(lambda e: isinstance(e, sp.floor),
                       lambda e: sp.Integer(math.floor(float(e.args[0].subs(X, at)))))


def _boundaries(cond: sp.Basic, text: sp.Expr) -> list[float]:
    out: list[float] = []
    for rel in cond.atoms(sp.core.relational.Relational):
        g = rel.lhs - rel.rhs
        if not g.has(X):
            continue
        try:
            sol = sp.solveset(g, X, sp.Reals)
        except Exception:  # noqa: BLE001
            sol = None
        if sol is None or not isinstance(sol, sp.FiniteSet):
            if sol == sp.S.EmptySet:
                continue
            raise _refuse(f"cannot locate the breakpoints of the condition {rel} in {text} (finitely many real "
                          f"solutions of {g} = 0 are needed; SymPy found {sol})")
        for s in sol:
            try:
                out.append(float(s))
            except TypeError:
                raise _refuse(f"the breakpoint {s} of {text} is not a real number") from None
    return out


def _lattices(pw: sp.Expr, text: sp.Expr) -> list[tuple[float, float]]:
    out = []
    for f in pw.atoms(sp.floor):
        g = sp.expand(f.args[0])
        if not g.has(X):
            continue
        if not (g.is_polynomial(X) and sp.degree(g, X) == 1):
            raise _refuse(f"{text}: floor/ceiling/frac of a non-linear argument ({g}) is not supported (only "
                          "a x + b)")
        a, b = float(g.coeff(X, 1)), float(g.coeff(X, 0))
        if a == 0 or not (math.isfinite(a) and math.isfinite(b)):
            raise _refuse(f"{text}: floor/ceiling/frac argument {g} must have a finite nonzero slope")
        out.append((1.0 / abs(a), -b / a))
    return sorted(set(out))


def _classify(expr: sp.Expr, pw: sp.Expr) -> CheckedActivation:
    finite: list[float] = []
    for p in pw.atoms(sp.Piecewise):
        for _, c in p.args:
            if isinstance(c, sp.Basic):
                finite.extend(_boundaries(c, expr))
    lattices = _lattices(pw, expr)
    finite_arr = _dedupe(np.array(sorted(set(finite)), dtype=float))
    finite_arr = finite_arr[np.isfinite(finite_arr)]
    checked = CheckedActivation(expr=expr, kind="piecewise", pw=pw, breakpoints=tuple(finite_arr.tolist()),
                                lattices=tuple(lattices))
    # the breakpoints near the origin (all finite ones, a few periods of each lattice) for the piece checks
    span = max([1.0] + [abs(t) for t in checked.breakpoints] + [abs(o) + 4 * p for p, o in lattices])
    pts = checked.breakpoints_in(-span, span)
    if pts.size > 400:  # a fine lattice: check the pieces around a sample of its points
        pts = pts[np.linspace(0, pts.size - 1, 400).astype(int)]
    edges = [-math.inf, *pts.tolist(), math.inf]
    pieces = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        mid = (lo + hi) / 2 if math.isfinite(lo) and math.isfinite(hi) else (hi - 1 if math.isfinite(hi) else
                                                                              lo + 1 if math.isfinite(lo) else 0.0)
        piece = checked.piece(mid)
        if piece.has(sp.Piecewise, sp.floor, *_PIECEWISE_FUNCS):
            raise _refuse(f"{expr}: cannot reduce it to smooth pieces between breakpoints (got {piece})")
        slo = sp.Float(lo) if math.isfinite(lo) else -sp.oo
        shi = sp.Float(hi) if math.isfinite(hi) else sp.oo
        where = f" (the piece of {expr} on ({lo:g}, {hi:g}))"
        _check_smooth(piece, slo, shi, where)
        d1 = sp.diff(piece, X)
        for end in (lo, hi):
            if math.isfinite(end):
                v = _value(d1, sp.Float(end))
                if v is not None and not (math.isfinite(v.real) and math.isfinite(v.imag)):
                    raise _refuse(f"phi' of {expr} is unbounded at the breakpoint x = {_show(end)}: the piecewise "
                                  "route needs pieces smooth up to their breakpoints")
        pieces.append(piece)
    jumps = []
    for t, left, right in zip(pts.tolist(), pieces[:-1], pieces[1:]):
        a, b = _value(left, sp.Float(t)), _value(right, sp.Float(t))
        if a is None or b is None:
            raise _refuse(f"cannot evaluate {expr} on both sides of the breakpoint x = {_show(t)}")
        if abs(a - b) > 1e-12 * max(1.0, abs(a), abs(b)):
            jumps.append(t)
    polynomial = all(p.is_polynomial(X) for p in pieces)
    relu = (not lattices and checked.breakpoints == (0.0,) and len(pieces) == 2
            and sp.simplify(pieces[0]) == 0 and sp.simplify(pieces[1] - X) == 0)
    return CheckedActivation(expr=expr, kind="piecewise", pw=pw, breakpoints=checked.breakpoints,
                             lattices=checked.lattices, jumps=tuple(sorted(jumps, key=abs)), relu=relu,
                             polynomial=polynomial)


def require_ntk(activation) -> None:
    """ParameterError naming ``activation`` when phi jumps (phi' has a Dirac delta: no finite NTK)."""
    if isinstance(activation, str) and activation.strip() in BUILTIN_EXPRESSIONS:
        return
    check_activation(activation).require_finite_dphi()


__all__ = ["CheckedActivation", "check_activation", "parse", "require_ntk"]
