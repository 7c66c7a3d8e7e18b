"""Code generation: results -> Jinja2 templates -> source text of `generated/` modules.

The path is a short sequence of steps, each callable on its own:
``function_spec`` (one result -> printed NumPy expression) ->
``render_theory_module`` / ``render_activation_module`` (template -> text) ->
``generated_files`` (everything, in memory) -> ``write_generated`` / ``stale_files``.

``generated_files`` keys name where each file lives (:func:`file_path`):

- plain paths (``gaussian.py``, ``latex/gaussian.tex``, ``parameters.py``) are the shared foundation, relative to
  resprop's ``generated/``;
- ``docs/...`` (``ROOT_PREFIX``: the foundation's kernel reference ``docs/reference/kernels.md`` and parameter
  reference ``docs/reference/parameters.md``) are relative to the repository root;
- ``theories/<slug>/...`` (``registry.OWN_PREFIX``) are a theory's own files, relative to its generated package
  (``Theory.generated_package``: ``numeric/theories/<slug>/generated/`` in-tree, the plugin's own package for a
  plugin): its kernels, recursions and compiled kernels, its parameters module, LaTeX, and its kernel and
  parameter reference pages.  No file depends on which other theories are installed.
"""
from __future__ import annotations

import difflib
import functools
import math
import re
from pathlib import Path

import sympy as sp
from sympy.printing.numpy import SciPyPrinter

from resprop import registry
from resprop.derive import activations
from resprop.derive.results import COVARIANCE_RTOL, Derivation, Result
from resprop.derive.templating import (  # noqa: F401
    _HASH_LINE,
    HEADER,
    content_hash,
    environment,
    md_cell,
    md_text,
    recorded_hash_problem,
    render,
    template_loader,
    template_source,
    tex_escape,
)

#: Activations that get a generated Gauss--Hermite module.
GENERATED_ACTIVATIONS = ("erf", "tanh", "gelu")

PANELS_1D = 600
HALF_WIDTH_1D = 9.0
GH_ORDER_2D = 128
#: the graded Gauss--Legendre rule of generated/gauss_hermite.py (see its docstring)
GL_ORDER = 16
Z_MAX = 8.5
Z_EDGES = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.5)
FEATURE = 0.25
J_MAX = 48
BLOCK_2D = 8
#: certified lattice (trapezoidal) fast path of the 2-D rule (see generated/gauss_hermite.py)
TRAP_STEPS = (0.5, 0.25, 0.125, 0.0625)
TRAP_RADIUS = 9.0
TRAP_RTOL = 1e-10
TRAP_SPACING = 0.5
BLOCK_BYTES = 1 << 24
#: generated_files() keys under this prefix are relative to the repository root, not to generated/
ROOT_PREFIX = "docs/"
KERNEL_REFERENCE = "docs/reference/kernels.md"
#: per generated directory (resprop's generated/, each theory's generated package): what its files were rendered
#: from and their hashes, so that `resprop derive --check` can skip re-deriving (`fingerprint_holds`)
FINGERPRINT = "fingerprint.json"
PARAMETER_REFERENCE = "docs/reference/parameters.md"


class KernelPrinter(SciPyPrinter):
    """NumPy/SciPy printer with fully qualified module names (numpy., scipy.special.).

    ``correlation_symbols`` are the inputs of correlation type (domain [-1, 1] or the covariance constraint):
    a fractional power (square root) of an argument that involves one is printed of max(argument, 0), since
    1 - rho^2 or K_aa K_bb - K_ab^2 is exactly 0 on the closed boundary and round-off makes it -1e-17.
    Inverse sines and cosines always clip their argument into [-1, 1].  log(gamma(x)) is printed as gammaln
    (no overflow of gamma), 1 - exp(u) and exp(u) - 1 as expm1 and log(1 + x) as log1p (no cancellation).

    :meth:`explicit_forms` makes those last three rewrites explicit in the expression (expm1, log1p, loggamma
    nodes), so that common-subexpression elimination (:func:`function_spec`) cannot split them: ``sympy.cse``
    would otherwise pull exp(u) out of exp(u) - 1 and print the cancelling difference.
    """

    def __init__(self, correlation_symbols=()) -> None:
        super().__init__({"fully_qualified_modules": True, "inline": True, "allow_unknown_functions": False})
        self._correlation = frozenset(correlation_symbols)

    @staticmethod
    def explicit_forms(expr: sp.Basic) -> sp.Basic:
        """``expr`` with the printer's cancellation-free forms as explicit nodes (mathematically identical):
        exp(u) - 1 -> expm1(u), 1 - exp(u) -> -expm1(u), log(1 + x) -> log1p(x), log(gamma(a)) -> loggamma(a)
        (the same patterns ``_print_Add`` and ``_print_log`` recognise), sqrt(a^2 + b^2) -> hypot(a, b) (no
        underflow of the squares: alpha/sqrt(alpha^2 + lam^2) at alpha = 1e-200 is 1, not 1e-200/0), and in a sum
        of three or more terms c - c x (x an input, c a number) is grouped and computed first: 1 - rho is exact
        for rho near 1 (Sterbenz), while the flat a - rho + 1 evaluated left to right cancels.  Two more:
        sqrt(b^2 + c) - b -> c/(sqrt(b^2 + c) + b) where b >= 0 (c factored: 1 - gamma^2 as (1 - gamma)(1 + gamma)),
        the root of a quadratic without cancellation for either sign of b; and log(1 + B^e) with an exponent that
        may be positive -> logaddexp(0, e log B), which neither overflows B^e nor loses log1p's accuracy."""
        from sympy.codegen.cfunctions import expm1, hypot, log1p
        from sympy.codegen.numpy_nodes import logaddexp

        def root(t):  # r with r^2 = t for a term that is a square of a real expression, else None
            if t.is_Pow and t.exp.is_Integer and t.exp.is_even and t.base.is_extended_real is not False:
                return t.base ** (t.exp / 2)
            if t.is_Number and t.is_positive:
                return sp.sqrt(t)
            if t.is_Mul:
                roots = [root(f) for f in t.args]
                return None if None in roots else sp.Mul(*roots)
            return None

        def grouped(e):  # an Add of >= 3 terms with c and -c x: (c - c x) unevaluated, so it is printed first
            if not (e.is_Add and len(e.args) >= 3):
                return None
            for c in (a for a in e.args if a.is_Number and a != 0):
                for t in e.args:
                    if (t / -c).is_Symbol:
                        rest = [rewrite(a) for a in e.args if a is not c and a is not t]
                        return sp.Add(*rest, sp.UnevaluatedExpr(sp.Add(c, t)))
            return None

        def root_minus(e):  # sqrt(b^2 + c) - b as a branch that never subtracts nearly equal numbers
            if not (e.is_Add and len(e.args) == 2):
                return None
            for r, t in (e.args, e.args[::-1]):
                if r.is_Pow and r.exp == sp.S.Half and r.base.is_Add and t.free_symbols:
                    full, c = sp.expand(r.base), sp.expand(r.base - t**2)
                    if len(sp.Add.make_args(c)) < len(sp.Add.make_args(full)):
                        b, c = rewrite(-t), rewrite(sp.factor(c))
                        root_ = sp.sqrt(b**2 + c)
                        return sp.Piecewise((c / (root_ + b), b >= 0), (root_ - b, True))
            return None

        def rewrite(e):
            if not e.args:
                return e
            if (g := grouped(e)) is not None:
                return g
            if (g := root_minus(e)) is not None:
                return g
            if isinstance(e, sp.log) and e.args[0].is_Add and len(e.args[0].args) == 2 and sp.S.One in e.args[0].args:
                (x,) = [a for a in e.args[0].args if a != 1]
                if x.is_Pow and x.exp.free_symbols and not x.exp.is_nonpositive and x.base.is_positive:
                    return logaddexp(0, rewrite(x.exp * sp.log(x.base)))
            if e.is_Pow and e.exp.is_Rational and e.exp.q == 2 and e.base.is_Add and len(e.base.args) == 2:
                a, b = (root(t) for t in e.base.args)
                if a is not None and b is not None and a.free_symbols and b.free_symbols:
                    return hypot(rewrite(a), rewrite(b)) ** (2 * e.exp)
            if isinstance(e, sp.log):
                arg = e.args[0]
                if isinstance(arg, sp.gamma):
                    return sp.loggamma(rewrite(arg.args[0]))
                if arg.is_Add and sp.S.One in arg.args and not KernelPrinter._exp_minus_one(arg):
                    return log1p(rewrite(arg - 1))
            form = KernelPrinter._exp_minus_one(e)
            if form:
                sign, u = form
                return sign * expm1(rewrite(u))
            return e.func(*[rewrite(a) for a in e.args])

        return rewrite(expr)

    @staticmethod
    def _exp_minus_one(e):
        """(1, u) for exp(u) - 1 and (-1, u) for 1 - exp(u) (printed as +-expm1(u)); None otherwise."""
        if e.is_Add and len(e.args) == 2 and (sp.S.One in e.args or sp.S.NegativeOne in e.args):
            const = sp.S.One if sp.S.One in e.args else sp.S.NegativeOne
            (other,) = [a for a in e.args if a != const]
            if const == 1 and isinstance(-other, sp.exp):
                return -1, (-other).args[0]
            if const == -1 and isinstance(other, sp.exp):
                return 1, other.args[0]
        return None

    @staticmethod
    def numerics_notes(expr: sp.Basic, correlation_symbols=()) -> list[str]:
        """Sentences for a kernel's docstring naming the cancellation-free, log-space and clipped forms that the
        printed code of ``expr`` (after :meth:`explicit_forms`) uses."""
        from sympy.codegen.cfunctions import expm1, hypot, log1p
        from sympy.codegen.numpy_nodes import logaddexp

        def forms(cls):
            return sorted({", ".join(map(sp.sstr, a.args)) for a in expr.atoms(cls)}, key=lambda t: (len(t), t))

        notes = []
        pieces = [f"exp(u) - 1 as expm1(u) for u = {u}" for u in forms(expm1)]
        pieces += [f"log(1 + x) as log1p(x) for x = {x}" for x in forms(log1p)]
        if pieces:
            notes.append("Cancellation-free forms (no digits lost to a difference near 0): " + "; ".join(pieces)
                         + ".")
        grouped = sorted({sp.sstr(g.args[0]) for g in expr.atoms(sp.UnevaluatedExpr)})
        if grouped:
            notes.append("Computed first, before the other terms of their sums (exact when the input is near the "
                         "constant, no cancellation against the rest): " + ", ".join(f"({g})" for g in grouped) + ".")
        softplus = sorted({sp.sstr(a.args[1]) for a in expr.atoms(logaddexp)})
        if softplus:
            notes.append("log(1 + e^u) as logaddexp(0, u) for u = " + ", ".join(softplus)
                         + ": finite for any u, where the power e^u overflows.")
        roots = [p for p in expr.atoms(sp.Piecewise) if len(p.args) == 2 and p.args[1].expr.is_Add
                 and any(a.is_Pow and a.exp == sp.S.Half for a in p.args[1].expr.args)]
        if roots:
            notes.append("Root of a quadratic, sqrt(b^2 + c) - b, as c/(sqrt(b^2 + c) + b) where b >= 0 (no "
                         "cancellation for either sign of b): b = " + ", ".join(
                             sorted(sp.sstr(p.args[0].cond.lhs) for p in roots)) + ".")
        pairs = forms(hypot)
        if pairs:
            notes.append("sqrt(a^2 + b^2) as hypot(a, b) for (a, b) = " + "; ".join(f"({ab})" for ab in pairs)
                         + ": the squares cannot underflow or overflow.")
        gammas = forms(sp.loggamma)
        if gammas:
            notes.append("Log space: ln Gamma(a) as gammaln(a) for a = " + ", ".join(gammas) + " (Gamma(a) "
                         "overflows float64 beyond a = 171.6); the logarithm is summed and exponentiated once.")
        corr = set(correlation_symbols)
        names = sorted(c.name for c in corr)
        if corr and (expr.atoms(sp.asin, sp.acos) or any(
                p.exp.is_Rational and not p.exp.is_Integer and p.base.free_symbols & corr for p in expr.atoms(sp.Pow))):
            notes.append(f"Correlation input{'s' if len(names) > 1 else ''} {', '.join(names)}: arcsin/arccos "
                         "arguments are clipped into [-1, 1] and square roots that vanish at correlation +-1 "
                         "(sqrt(1-rho^2), sqrt(K_aa*K_bb-K_ab^2)) are taken of max(., 0), so the boundary and its "
                         "last-ulp round-off give finite values.")
        return notes

    def _print_asin(self, expr):
        # |argument| <= 1 holds mathematically (Cauchy-Schwarz); clip the last-ulp round-off
        # that appears when the correlation of two inputs approaches 1 at large depth.
        return f"numpy.arcsin(numpy.clip({self._print(expr.args[0])}, -1.0, 1.0))"

    def _print_acos(self, expr):
        return f"numpy.arccos(numpy.clip({self._print(expr.args[0])}, -1.0, 1.0))"

    def _print_Pow(self, expr, rational=False):
        base, exp = expr.args
        if self._correlation & base.free_symbols and exp.is_Rational and not exp.is_Integer:
            clipped = f"numpy.maximum({self._print(base)}, 0.0)"
            if exp == sp.S.Half:
                return f"numpy.sqrt({clipped})"
            if exp == -sp.S.Half:
                return f"(1/numpy.sqrt({clipped}))"
            return f"{clipped}**({self._print(exp)})"
        return super()._print_Pow(expr, rational=rational)

    def _print_Or(self, expr):  # pairwise, so that operands of different shapes broadcast
        return functools.reduce(lambda a, b: f"numpy.logical_or({a}, {b})", map(self._print, expr.args))

    def _print_And(self, expr):
        return functools.reduce(lambda a, b: f"numpy.logical_and({a}, {b})", map(self._print, expr.args))

    def _print_log(self, expr):
        arg = expr.args[0]
        if isinstance(arg, sp.gamma):
            return f"scipy.special.gammaln({self._print(arg.args[0])})"
        if arg.is_Add and sp.S.One in arg.args and not self._exp_minus_one(arg):  # log(1 + x) = log1p(x)
            return f"numpy.log1p({self._print(arg - 1)})"           # (log(1 - exp(u)) = log(-expm1(u)) instead)
        return super()._print_log(expr)

    def _print_Add(self, expr, order=None):
        form = self._exp_minus_one(expr)
        if form:                                                    # exp(u) - 1 = expm1(u), 1 - exp(u) = -expm1(u)
            sign, u = form
            return f"numpy.expm1({self._print(u)})" if sign == 1 else f"(-numpy.expm1({self._print(u)}))"
        return super()._print_Add(expr, order=order)

    def _print_Max(self, expr):  # elementwise, so the kernels broadcast
        return "numpy.maximum({}, {})".format(*[self._print(a) for a in expr.args]) if len(expr.args) == 2 \
            else super()._print_Max(expr)


def print_numpy(expr: sp.Expr, correlation_symbols=()) -> str:
    return KernelPrinter(correlation_symbols).doprint(expr)


def _float_literal(x: float) -> str:
    return {math.inf: "numpy.inf", -math.inf: "-numpy.inf"}.get(x, repr(float(x)))


def domain_checks(result: Result) -> list[str]:
    """The lines that validate and convert each argument (intervals first, then covariances, then compound
    constraints), as calls of `resprop.generated._domain`."""
    lines = []
    for i in result.inputs:
        d = i.parsed
        if d.kind == "covariance":
            continue
        if math.isinf(d.lo) and math.isinf(d.hi):
            lines.append(f"{i.name} = _domain.as_float({i.name!r}, {i.name}, {d.text!r})")
        else:
            lines.append(f"{i.name} = _domain.interval({i.name!r}, {i.name}, {_float_literal(d.lo)}, "
                         f"{_float_literal(d.hi)}, {d.lo_closed}, {d.hi_closed}, {d.text!r})")
    for i in result.inputs:
        d = i.parsed
        if d.kind == "covariance":
            lines.append(f"{i.name} = _domain.covariance({i.name!r}, {i.name}, {d.var_a}, {d.var_b}, {d.text!r})")
    printer = KernelPrinter()
    for c in result.constraints:
        names = ", ".join(i.name for i in result.inputs if i.symbol in c.condition.free_symbols)
        lines.append("with numpy.errstate(all=\"ignore\"):")
        lines.append(f"    _domain.constraint({printer.doprint(c.condition)}, {names!r}, {c.text!r})")
    return lines


def function_spec(result: Result) -> dict:
    """The template's view of one result.  ``lines`` is the body of the bare kernel: one assignment per common
    subexpression (``sympy.cse``, so a repeated subexpression is computed once) and the ``return`` line;
    ``code`` is that body as one string.  Correlation-type inputs stay clipped through the temporaries: a
    temporary defined from one counts as one for the printer."""
    from resprop.derive.expectation import TabulatedMean, TabulatedMean2

    correlation = {i.symbol for i in result.inputs if i.parsed.correlation_type}
    # an expectation left to the engine's quadrature is a call with a lambda: computed first, kept whole (common
    # subexpression elimination must not pull its integration variable out of the lambda)
    tabulated = sorted(result.expr.atoms(TabulatedMean, TabulatedMean2), key=sp.default_sort_key)
    holders = {node: sp.Symbol(f"_mean{i}", real=True) for i, node in enumerate(tabulated)}
    expr = KernelPrinter.explicit_forms(result.expr.xreplace(holders))
    replacements, (reduced,) = sp.cse(expr, symbols=sp.numbered_symbols("_x", real=True))

    def trivial(sub):  # constants, -x, 2*x, x/2, 1/x: cheaper (and clearer) inline than as a temporary
        scaled = sub.is_Mul and len(sub.args) == 2 and sub.args[0].is_Number and sub.args[1].is_Symbol
        return not sub.free_symbols or scaled or (sub.is_Pow and sub.exp == -1 and sub.base.is_Symbol)

    kept: list = []
    inline: dict = {}
    for sym, sub in replacements:
        sub = sub.xreplace(inline)
        if trivial(sub):
            inline[sym] = sub
        else:
            kept.append((sym, sub))
    rename = dict(zip((sym for sym, _ in kept), sp.numbered_symbols("_x", real=True)))  # _x0, _x1, ... again
    replacements = [(rename[sym], sub.xreplace(rename)) for sym, sub in kept]
    reduced = reduced.xreplace(inline).xreplace(rename)
    lines = [f"{h.name} = {print_numpy(node, correlation)}" for node, h in holders.items()]
    for sym, sub in replacements:
        if sub.free_symbols & correlation:
            correlation.add(sym)
        lines.append(f"{sym.name} = {print_numpy(sub, correlation)}")
    value = print_numpy(reduced, correlation)
    if not result.inputs:
        value = f"numpy.float64({value})"
    unused = [i.name for i in result.inputs if i.symbol not in result.expr.free_symbols]
    if unused:  # keep the broadcast shape of every argument
        value = f"({value}) + 0 * ({' + '.join(unused)})"
    lines.append(f"return {value}")
    numerics = KernelPrinter.numerics_notes(expr, [i.symbol for i in result.inputs if i.parsed.correlation_type])
    return {
        "name": result.name,
        "args": result.argnames,
        "inputs": result.inputs,
        "domains": {i.name: i.domain for i in result.inputs},
        "checks": domain_checks(result),
        "constraints": result.constraints,
        "constraint_texts": [c.text for c in result.constraints],
        "has_covariance": any(i.parsed.kind == "covariance" for i in result.inputs),
        "source": result.source.cite(),
        "kind": result.kind,
        "description": result.description,
        "lines": lines,
        "code": "\n".join(lines),
        "numerics": numerics,
    }


def scipy_imports(*codes: str) -> list[str]:
    """The SciPy submodules (``scipy.special``, ``scipy.constants``) that printed code uses, sorted: a generated
    module imports exactly these (no unused import, none missing)."""
    return sorted({m.group(1) for code in codes for m in re.finditer(r"\b(scipy\.[a-z_]+)\.", code)})


def resprop_imports(*codes: str) -> list[str]:
    """The resprop modules printed code calls by their full name (the engine's quadrature of an expectation without
    a closed form, `resprop.derive.expectation`): imported in the first-party block of a generated module."""
    return sorted({m.group(1) for code in codes for m in re.finditer(r"\b(resprop\.generated\.gauss_hermite)\.", code)})


def render_theory_module(d: Derivation, derivation_path: str) -> str:
    functions = [function_spec(r) for r in d.results]
    return render("numpy_module.py.j2", functions=functions,
                   scipy_imports=scipy_imports(*(f["code"] for f in functions)),
                   resprop_imports=resprop_imports(*(f["code"] for f in functions)),
                   derivation_path=derivation_path, title=d.title, paper=d.paper, covariance_rtol=COVARIANCE_RTOL)


def render_domain_module() -> str:
    return render("domain_module.py.j2")


#: where the printed phi, phi', phi'' are probed for float64 overflow (far-field series replace them there)
FAR_PROBE = (-1e7, -1e5, -2e3, -750.0, 750.0, 2e3, 1e5, 1e7)


def far_field_series(e: sp.Expr) -> tuple[sp.Expr, sp.Expr] | None:
    """The asymptotic series of ``e`` at +oo and at -oo (SymPy, 4 terms), if its printed form overflows at large
    |x| in float64 (e.g. log(1 + exp(x)) at x > 709); None if it does not.  A series SymPy cannot find (or one
    that itself overflows) raises ValueError."""
    with_numpy = sp.lambdify(activations.x, e, modules=["scipy", "numpy"])
    import numpy as np

    with np.errstate(all="ignore"):
        vals = np.asarray(with_numpy(np.array(FAR_PROBE)), dtype=float) + 0 * np.array(FAR_PROBE)
    if np.all(np.isfinite(vals)):
        return None
    t = sp.Symbol("t", positive=True)
    sides = []
    for sign in (1, -1):
        ser = None
        for form in (e, e.rewrite(sp.exp)):
            try:
                ser = sp.series(form.subs(activations.x, sign * t), t, sp.oo, n=4).removeO()
                break
            except Exception:  # noqa: BLE001  (PoleError, NotImplementedError, ...)
                continue
        far = np.array([p for p in FAR_PROBE if p * sign > 0])
        with np.errstate(all="ignore"):
            ok = ser is not None and bool(np.all(np.isfinite(
                np.asarray(sp.lambdify(t, ser, modules=["scipy", "numpy"])(sign * far), dtype=float))))
        if not ok or ser is None:
            raise ValueError(f"{e} overflows in float64 at large |x| and SymPy finds no usable asymptotic series")
        sides.append(ser.subs(t, sign * activations.x))
    return sides[0], sides[1]


def render_activation_module(name: str, expr: sp.Expr | None = None) -> str:
    if expr is None:
        expr = activations.activation_expr(name)
    phi, dphi, ddphi = activations.derivatives(expr)
    codes = {"phi": print_numpy(phi), "dphi": print_numpy(dphi), "ddphi": print_numpy(ddphi)}
    far = []
    for key, e in (("phi", phi), ("dphi", dphi), ("ddphi", ddphi)):
        series = far_field_series(e)
        pair = (e, e) if series is None else series
        far += [{"name": f"{key}_plus", "code": print_numpy(pair[0])},
                {"name": f"{key}_minus", "code": print_numpy(pair[1])}]
    if all(f["code"] == codes[f["name"].rsplit("_", 1)[0]] for f in far):
        far = []
    return render("activation_module.py.j2", name=name, expr=str(expr), dexpr=str(dphi), ddexpr=str(ddphi),
                  scipy_imports=scipy_imports(*codes.values(), *(f["code"] for f in far)), far=far, **codes)


def render_recursion_module(d: Derivation, derivation_path: str, recursions=None) -> str:
    """The fused depth recursions of a derivation (``d.recursions``; see :mod:`resprop.derive.recursion`)."""
    from resprop.derive.recursion import recursion_spec, recursions_of

    specs = [recursion_spec(r, KernelPrinter()) for r in (recursions_of(d) if recursions is None else recursions)]
    codes = [line for s in specs for line in (*(p["expr"] for p in s["prelude"]), *s["body"])]
    return render("recursion_module.py.j2", recursions=specs, scipy_imports=scipy_imports(*codes),
                  derivation_path=derivation_path, title=d.title, paper=d.paper)


def render_compiled_module(d: Derivation, derivation_path: str) -> str | None:
    """The fused compiled (Numba) kernels of the recursions of ``d`` that `resprop.derive.compiled` lowers (pair
    recursions without callbacks other than rho tables, elementwise recursions without callbacks); None when there
    are none."""
    from resprop.derive import approximations as A
    from resprop.derive.compiled import JB, LANES, compilable, compiled_spec, elementwise_compilable, elementwise_spec
    from resprop.derive.recursion import recursions_of

    specs = [compiled_spec(r) for r in recursions_of(d) if compilable(r)]
    elementwise = [elementwise_spec(r) for r in recursions_of(d) if elementwise_compilable(r)]
    if not specs and not elementwise:
        return None
    coeffs = A.asin_coefficients()
    horner = repr(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        horner = f"({horner}) * z + {c!r}"
    return render("compiled_module.py.j2", recursions=specs, derivation_path=derivation_path, title=d.title,
                  paper=d.paper, numpy_module=f"{registry.generated_module(d.theory)}_recursions", jb=JB,
                  degree=A.DEGREE, coefficients=[repr(c) for c in coeffs], horner=horner, ulp=A.max_ulp_error(),
                  n_points=len(A.test_points()), fastmath='{"contract"}', lanes=LANES, pio2_hi=repr(A.PIO2_HI),
                  pio2_lo=repr(A.PIO2_LO), pi_hi=repr(A.PI_HI), pi_lo=repr(A.PI_LO),
                  sequences=(specs or elementwise)[0].sequences, elementwise=elementwise)


def render_fluctuation_module() -> str:
    """generated/fluctuation_step.py: one layer of the finite-width kernel recursion (`derive/fluctuations.py`)."""
    from resprop.derive import fluctuations

    return render("fluctuation_module.py.j2", **fluctuations.context())


def render_gauss_hermite_module() -> str:
    return render("gauss_hermite.py.j2", panels_1d=PANELS_1D, half_width=HALF_WIDTH_1D, order_2d=GH_ORDER_2D,
                  gl_order=GL_ORDER, z_max=Z_MAX, z_edges=Z_EDGES, feature=FEATURE, j_max=J_MAX, block_2d=BLOCK_2D,
                  fixed_edges=2 * len(Z_EDGES) + 2, trap_steps=TRAP_STEPS, trap_radius=TRAP_RADIUS,
                  trap_rtol=TRAP_RTOL, trap_spacing=TRAP_SPACING, block_bytes=BLOCK_BYTES)


def _plain_paper(key: str) -> str:
    """The paper's citation from PAPERS without TeX escapes (for Markdown)."""
    return registry.papers().get(key, key).replace("\\&", "&")


def _scope(slug: str | None) -> dict[str, str]:
    """The words a shared-template page uses for its scope: the foundation (slug None) or one theory."""
    if slug is None:
        return {"scope": "the shared foundation's derivations (resprop/registry.py FOUNDATION)", "heading":
                "the shared foundation", "others": "Each theory's own kernels and parameters are in its generated "
                "package: `numeric/theories/<slug>/generated/kernels.md` and `parameters.md` for the built-in "
                "theories (`resprop theories --json` lists them), the plugin's own package for a plugin."}
    th = registry.theory(slug)
    return {"scope": f"the derivations of the theory {slug!r} ({th.title})", "heading": f"the theory {slug}",
            "others": "The shared foundation's kernels and parameters (Gaussian expectations, the residual "
                      "kernel) are in resprop's docs/reference/kernels.md and parameters.md."}


def _names(slug: str | None) -> list[str]:
    """The derivation names of the foundation (slug None) or of the theory ``slug``."""
    owner = "foundation" if slug is None else slug
    return [name for name, (_, o) in registry.derivations().items() if o == owner]


def render_kernel_reference(slug: str | None = None) -> str:
    """The kernel reference of the foundation (docs/reference/kernels.md) or of the theory ``slug`` (its
    generated package's kernels.md): every generated kernel with signature, domains, source and LaTeX equation."""
    from resprop.derive.latex import equation_tex

    theories = []
    for theory in _names(slug):
        d, path = registry.derivation(theory), registry.derivation_source(theory)
        rows = [{
            "name": r.name, "anchor": f"{theory}-{r.name}".lower(), "description": r.description, "kind": r.kind,
            "signature": f"{r.name}(" + ", ".join(f"{i.name}: {i.domain}" for i in r.inputs) + ")",
            "inputs": r.inputs, "source": r.source.cite(), "paper": _plain_paper(r.source.paper),
            "equation": r.source.equation, "note": r.source.note, "equation_tex": equation_tex(r, d),
        } for r in d.results]
        theories.append({"theory": theory, "anchor": f"module-{theory}".lower(), "title": d.title,
                         "module": registry.generated_module(theory).removeprefix("resprop."),
                         "derivation_path": path, "paper": _plain_paper(d.paper), "results": rows})
    return render("kernel_reference.md.j2", theories=theories, total=sum(len(t["results"]) for t in theories),
                  **_scope(slug))


def render_parameter_reference(slug: str | None = None) -> str:
    """The parameter reference of the foundation (docs/reference/parameters.md) or of the theory ``slug`` (its
    generated package's parameters.md): every declared parameter (name, LaTeX, domain, meaning, convention, layer
    and the kernels that take it), read from the ``PARAMETERS`` declarations."""
    derivations = []
    for theory in _names(slug):
        d, path = registry.derivation(theory), registry.derivation_source(theory)
        params = [{"name": p.name, "tex": p.tex(), "domain": p.domain, "integer": p.integer, "meaning": p.meaning,
                   "convention": p.convention, "layer": p.layer,
                   "kernels": [r.name for r in d.results if any(i.name == p.name for i in r.inputs)]}
                  for p in d.parameters]
        derivations.append({"name": theory, "anchor": f"parameters-{theory}".lower(), "title": d.title,
                            "path": path, "parameters": params})
    return render("parameter_reference.md.j2", derivations=derivations,
                  total=sum(len(d["parameters"]) for d in derivations), **_scope(slug))


def render_parameters_module(slug: str | None = None) -> str:
    """The run-time declarations (``validation.Declared``) of the foundation (generated/parameters.py) or of the
    theory ``slug`` (its generated package's parameters.py), read by the CLI and the drivers."""
    derivations = []
    for theory in _names(slug):
        params = [{"name_repr": repr(p.name), "args": ", ".join(repr(v) for v in (
            p.name, p.domain, p.meaning, p.convention, p.latex, p.integer, p.layer))}
            for p in registry.derivation(theory).parameters]
        derivations.append({"name_repr": repr(theory), "parameters": params})
    return render("parameters_module.py.j2", derivations=derivations, scope=_scope(slug)["scope"])


def render_generated_package(slug: str) -> str:
    """The ``__init__.py`` of a theory's generated package."""
    th = registry.theory(slug)
    return render("generated_package.py.j2", slug=slug, title=th.title, package=th.generated_package,
                  derivations=list(th.derivations))


def derivations_of(slugs) -> list[str]:
    """The derivation names of the theories ``slugs`` ("foundation" for the shared ones); a ParameterError naming
    ``slug`` for an unknown one."""
    from resprop.numeric.engine.validation import ParameterError

    table = registry.derivations()
    known = {*registry.slugs(), "foundation"}
    unknown = [s for s in slugs if s not in known]
    if unknown:
        raise ParameterError("slug", f"unknown theory {', '.join(map(repr, unknown))}; allowed: "
                                     f"{', '.join(sorted(known))}")
    return [name for name, (_, owner) in table.items() if owner in set(slugs)]


def derive_with_progress(slugs=None, progress=None) -> int:
    """Run the derivations behind ``generated_files(slugs)`` one at a time (each is computed once per process,
    ``registry.derivation``), so that a caller can show how far `derive`, `derive --check` and the report's freshness
    step are; returns the number of steps.  ``progress(done, total, label)`` is called with ``done = 0`` first, then
    after each derivation (``label``: its name); the last step is the rendering, reported by the caller
    (``generated_files``: ``progress(total, total, "rendered")``).  The derivations are nearly all of the time: the
    templates then render in about a second."""
    names = list(registry.derivations()) if slugs is None else derivations_of(slugs)
    total = len(names) + 1
    if progress is not None:
        progress(0, total, "")
        for i, name in enumerate(names, 1):
            registry.derivation(name)
            progress(i, total, name)
    return total


def _files(slugs, progress) -> dict[str, str]:
    """``generated_files(slugs)``, passing ``progress`` only when given (stand-ins that take ``slugs`` keep working)."""
    return generated_files(slugs) if progress is None else generated_files(slugs, progress=progress)


def generated_files(slugs=None, progress=None) -> dict[str, str]:
    """Key -> text, for everything `resprop derive` writes (see the module docstring for the keys); with ``slugs``
    (theory slugs, or "foundation"), only the files of those: a theory's files are its own package's, and the
    foundation's (the activation, Gauss-Hermite and domain modules, the shared derivations, their parameters and
    references) depend on no theory, so installing or removing a theory leaves every other one fresh.
    """
    from resprop.derive.latex import render_latex_document

    total = derive_with_progress(slugs, progress)  # ``progress``: see there
    chosen = [*registry.slugs(), "foundation"] if slugs is None else list(slugs)
    derivations_of(chosen)  # a ParameterError naming an unknown slug
    files: dict[str, str] = {}
    if "foundation" in chosen:
        files = {"gauss_hermite.py": render_gauss_hermite_module(), "_domain.py": render_domain_module(),
                 "parameters.py": render_parameters_module(), "fluctuation_step.py": render_fluctuation_module()}
        for name in GENERATED_ACTIVATIONS:
            files[f"activation_{name}.py"] = render_activation_module(name)
    for slug in (s for s in chosen if s != "foundation"):
        files[f"{registry.OWN_PREFIX}{slug}/__init__.py"] = render_generated_package(slug)
    for theory in derivations_of(chosen):
        owner = registry.derivations()[theory][1]
        prefix = "" if owner == "foundation" else f"{registry.OWN_PREFIX}{owner}/"
        d, path = registry.derivation(theory), registry.derivation_source(theory)
        files[f"{prefix}{theory}.py"] = render_theory_module(d, path)
        files[f"{prefix}latex/{theory}.tex"] = render_latex_document(d, path)
        if getattr(d, "recursions", None):
            files[f"{prefix}{theory}_recursions.py"] = render_recursion_module(d, path)
            compiled = render_compiled_module(d, path)
            if compiled is not None:
                files[f"{prefix}{theory}_compiled.py"] = compiled
    for slug in (s for s in chosen if s != "foundation"):
        prefix = f"{registry.OWN_PREFIX}{slug}/"
        files[f"{prefix}parameters.py"] = render_parameters_module(slug)
        files[f"{prefix}kernels.md"] = render_kernel_reference(slug)
        files[f"{prefix}parameters.md"] = render_parameter_reference(slug)
    if "foundation" in chosen:
        files[KERNEL_REFERENCE] = render_kernel_reference()
        files[PARAMETER_REFERENCE] = render_parameter_reference()
    if progress is not None:
        progress(total, total, "rendered")
    return files


def generated_dir() -> Path:
    from resprop import generated

    return Path(generated.__file__).parent


def source_root() -> Path | None:
    """The repository root (parent of generated/) in a source tree, None in an installed package."""
    root = generated_dir().parent
    return root if (root / "pyproject.toml").is_file() and (root / "derive").is_dir() else None


def file_path(rel: str, target: Path | None = None) -> Path | None:
    """Where the generated file ``rel`` lives.

    With an explicit ``target`` every file goes below it (``target/docs/...`` and ``target/theories/<slug>/...``
    included).  By default foundation files are below generated/, ``docs/`` files below the repository root (None
    outside a source tree: skipped), and a theory's own files in its generated package.
    """
    if target is not None:
        return target / rel
    if rel.startswith(ROOT_PREFIX):
        root = source_root()
        return None if root is None else root / rel
    if rel.startswith(registry.OWN_PREFIX):
        slug, _, own = rel.removeprefix(registry.OWN_PREFIX).partition("/")
        return registry.theory(slug).generated_dir() / own
    return generated_dir() / rel


def display_path(rel: str) -> str:
    """The path as shown in messages: generated/<rel> for the foundation, docs/... as is, and a theory's own
    file as the path of its generated package (numeric/theories/<slug>/generated/<file> in-tree)."""
    return registry.display_path(rel)


def owner_of(rel: str) -> str:
    """The owner of the generated file ``rel``: a theory slug for ``theories/<slug>/...``, else "foundation"."""
    if rel.startswith(registry.OWN_PREFIX):
        return rel.removeprefix(registry.OWN_PREFIX).partition("/")[0]
    return "foundation"


def owner_dir(owner: str, target: Path | None = None) -> Path:
    """The generated directory of ``owner`` (resprop's generated/ for "foundation", a theory's generated package),
    below ``target`` when given (as `file_path` places files there)."""
    if target is not None:
        return target if owner == "foundation" else target / f"{registry.OWN_PREFIX}{owner}"
    return generated_dir() if owner == "foundation" else registry.theory(owner).generated_dir()


def _package_sources(package: str, skip_generated: bool = False) -> list[tuple[str, Path]]:
    """(name, path) of every .py and .j2 file of the importable package ``package``, named relative to it."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None:
        return []
    roots = list(spec.submodule_search_locations or []) or ([str(Path(spec.origin).parent)] if spec.origin else [])
    out = []
    for root in map(Path, roots):
        for path in sorted(p for ext in ("*.py", "*.j2") for p in root.rglob(ext)):
            parts = path.relative_to(root).parts
            if "__pycache__" in parts or (skip_generated and "generated" in parts):
                continue
            out.append((f"{package}/{'/'.join(parts)}", path))
    return out


def input_fingerprint(owner: str) -> str:
    """A hash of everything the generated files of ``owner`` are rendered from: the sources of resprop.derive and
    the templates, the registry, the domain parser and the parameter checks they call, the versions of SymPy,
    mpmath, Jinja2 and NumPy, and for a theory its registry entry and (for a plugin) every source file of the
    package of its derivations (its generated/ excluded).  Files are named by package, so a wheel install and the
    checkout give the same fingerprint."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256()
    sources = _package_sources("resprop.derive") + _package_sources("resprop.templates")
    import importlib

    for module in ("resprop.registry", "resprop.domains", "resprop.numeric.engine.validation"):
        sources.append((module, Path(str(importlib.import_module(module).__file__))))
    if owner != "foundation":
        th = registry.theory(owner)
        h.update(repr((th.slug, th.title, th.paper, th.citation_tex, sorted(th.derivations.items()),
                       th.package)).encode())
        for package in sorted({ref.partition(":")[0].split(".")[0] for ref in th.derivations.values()} - {"resprop"}):
            sources += _package_sources(package, skip_generated=True)
    for name, path in sorted(set(sources)):
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    for dist in ("sympy", "mpmath", "jinja2", "numpy"):
        try:
            h.update(f"{dist}=={version(dist)};".encode())
        except PackageNotFoundError:
            h.update(f"{dist}=?;".encode())
    return h.hexdigest()[:32]


def _text_hash(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _write_fingerprints(files: dict[str, str], target: Path | None) -> None:
    """Record, per owner of ``files``, the input fingerprint and each file's text hash (`FINGERPRINT`)."""
    import json

    by_owner: dict[str, dict[str, str]] = {}
    for rel, text in files.items():
        by_owner.setdefault(owner_of(rel), {})[rel] = _text_hash(text)
    for owner, hashes in by_owner.items():
        record = {"comment": "written by `resprop derive`: what the generated files were rendered from (inputs) and "
                             "their hashes; `resprop derive --check` skips re-deriving when both still hold",
                  "inputs": input_fingerprint(owner), "files": dict(sorted(hashes.items()))}
        path = owner_dir(owner, target) / FINGERPRINT
        text = json.dumps(record, indent=1) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


def fingerprint_holds(owner: str, target: Path | None = None) -> bool:
    """True when the generated files of ``owner`` are certainly fresh without re-deriving: the recorded input
    fingerprint (`FINGERPRINT`, written by `resprop derive`) equals today's, and every recorded file is on disk
    with the recorded text hash.  False means "unknown" (re-derive and compare), not "stale"."""
    import json

    try:
        record = json.loads((owner_dir(owner, target) / FINGERPRINT).read_text())
        if record["inputs"] != input_fingerprint(owner) or not record["files"]:
            return False
        for rel, digest in record["files"].items():
            path = file_path(rel, target)
            if path is None:
                continue  # docs/ outside a checkout
            if owner_of(rel) != owner or _text_hash(path.read_text()) != digest:
                return False
        return True
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def write_generated(target: Path | None = None, slugs=None, progress=None) -> list[Path]:
    """Write the generated files (of the theories ``slugs`` only, see `generated_files`) and each owner's
    `FINGERPRINT`; returns the files changed."""
    written = []
    files = _files(slugs, progress)
    for rel, text in files.items():
        path = file_path(rel, target)
        if path is None:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    _write_fingerprints(files, target)
    return written


def stale_files(target: Path | None = None, slugs=None, progress=None, fast: bool = False) -> dict[str, str]:
    """Relative path -> report for every generated file that is stale.

    A file is stale when it differs from a fresh render (the report is the unified diff) or when the content hash
    recorded in its header does not match its own body (:func:`recorded_hash_problem`; the report then starts with
    ``hash mismatch — edited by hand``).  The hash check applies to files whose fresh render carries a hash line,
    which today is every generated file (.py, .tex and .md alike, all rendered by
    :func:`resprop.derive.templating.render`).  ``slugs``: only those theories' own files (`generated_files`).
    ``fast``: an owner (the foundation, a theory) whose `fingerprint_holds` is not re-derived (the default of
    `resprop derive --check`; ``--full`` and the test suite re-derive everything).
    """
    if fast:
        chosen = [*registry.slugs(), "foundation"] if slugs is None else list(slugs)
        derivations_of(chosen)  # a ParameterError naming an unknown slug
        pending = [owner for owner in chosen if not fingerprint_holds(owner, target)]
        if not pending:
            if progress is not None:
                progress(1, 1, "fingerprints hold")
            return {}
        slugs = pending
    stale = {}
    for rel, text in _files(slugs, progress).items():
        path = file_path(rel, target)
        if path is None:
            continue
        exists = path.exists()
        old = path.read_text() if exists else ""
        problem = recorded_hash_problem(old) if exists and _HASH_LINE.search(text) else None
        if old != text or problem:
            shown = display_path(rel)
            diff = "".join(difflib.unified_diff(old.splitlines(True), text.splitlines(True), f"{shown} (on disk)",
                                                f"{shown} (derive now)"))
            stale[rel] = f"{shown}: {problem}\n{diff}" if problem else diff
    return stale


__all__ = ["generated_files", "write_generated", "stale_files", "recorded_hash_problem", "render_theory_module",
           "render_activation_module", "render_kernel_reference", "render_parameter_reference",
           "file_path", "display_path", "function_spec", "derive_with_progress",
           "KernelPrinter", "GENERATED_ACTIVATIONS"]
